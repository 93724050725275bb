"""Agents in other languages for the reach tests, built once into the tracescore cache dir.

`go_agent()`: the Go agent of `tests/go/agent` (openai-go and the OpenTelemetry Go SDK), built
with `go build` from its committed go.mod/go.sum; rebuilt when its sources change.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from tracescore.testing._tools import _file_lock, cache_dir

GO_AGENT = Path(__file__).resolve().parent.parent / "go" / "agent"
_READY = ".ready"


def _sources_hash(folder: Path, suffixes: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in suffixes
                       or p.name in ("go.mod", "go.sum", "pom.xml")):
        digest.update(path.relative_to(folder).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def go_agent() -> Path:
    """The built Go agent binary (a few minutes on first use; process-safe)."""
    home = cache_dir() / f"go-agent-{_sources_hash(GO_AGENT, ('.go',))}"
    binary = home / "agent"
    with _file_lock(cache_dir() / f"{home.name}.lock"):
        if not (home / _READY).exists() or not binary.exists():
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            env = {**os.environ, "GOFLAGS": os.environ.get("GOFLAGS", "-buildvcs=false")}
            done = subprocess.run([shutil.which("go") or "/usr/local/go/bin/go", "build", "-o", str(binary), "."],
                                  cwd=GO_AGENT, env=env, capture_output=True, text=True,
                                  timeout=1200, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"go build failed in {GO_AGENT}:\n{done.stderr[-4000:]}")
            (home / _READY).write_text("built\n")
    return binary


JVM_AGENT = Path(__file__).resolve().parent.parent / "jvm" / "agent"


def jvm_agent() -> list[str]:
    """The command that runs the JVM agent (`java -cp … Agent`), compiled with Maven into the
    cache dir on first use (its dependencies from Maven Central; minutes; process-safe)."""
    home = cache_dir() / f"jvm-agent-{_sources_hash(JVM_AGENT, ('.java',))}"
    classpath = home / "classpath.txt"
    with _file_lock(cache_dir() / f"{home.name}.lock"):
        if not (home / _READY).exists():
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            done = subprocess.run(
                ["mvn", "-q", "-B", f"-Dagent.build={home / 'target'}", "compile",
                 "dependency:build-classpath", f"-Dmdep.outputFile={classpath}"],
                cwd=JVM_AGENT, capture_output=True, text=True, timeout=1200, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"mvn failed in {JVM_AGENT}:\n{done.stdout[-4000:]}"
                                   f"{done.stderr[-4000:]}")
            (home / _READY).write_text("built\n")
    path = os.pathsep.join([str(home / "target" / "classes"), classpath.read_text().strip()])
    return ["java", "-cp", path, "dev.tracescore.reach.Agent"]


def main() -> int:
    """Build both agents (`make native-agents`, part of `make test`)."""
    print(go_agent())
    print(" ".join(jvm_agent()[:1]), "agent compiled")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
