"""Programs in other languages the suite runs, built once into the tracescore cache dir.

`go_agent()`: the Go agent of `tests/go/agent` (openai-go and the OpenTelemetry Go SDK);
`k8s_check()`: the Kubernetes manifest checker of `tests/go/k8scheck` (the official k8s.io/api
types); both built with `go build` from their committed go.mod/go.sum, rebuilt when their
sources change. `jvm_agent()`: the JVM agent of `tests/jvm/agent` (Maven).
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


K8S_CHECK = Path(__file__).resolve().parent.parent / "go" / "k8scheck"


def _go_build(source: Path, name: str) -> Path:
    """The binary of the Go program in `source`, built into the cache dir (process-safe)."""
    home = cache_dir() / f"{name}-{_sources_hash(source, ('.go',))}"
    binary = home / name
    with _file_lock(cache_dir() / f"{home.name}.lock"):
        if not (home / _READY).exists() or not binary.exists():
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            env = {**os.environ, "GOFLAGS": os.environ.get("GOFLAGS", "-buildvcs=false")}
            go = shutil.which("go") or "/usr/local/go/bin/go"
            done = subprocess.run([go, "build", "-o", str(binary), "."], cwd=source, env=env,
                                  capture_output=True, text=True, timeout=1200, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"go build failed in {source}:\n{done.stderr[-4000:]}")
            (home / _READY).write_text("built\n")
    return binary


def go_agent() -> Path:
    """The built Go agent binary (a few minutes on first use)."""
    return _go_build(GO_AGENT, "go-agent")


def k8s_check() -> Path:
    """The built Kubernetes manifest checker (a minute on first use)."""
    return _go_build(K8S_CHECK, "k8scheck")


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
    """Build the agents and the manifest checker (`make native-agents`, part of `make test`)."""
    print(go_agent())
    print(k8s_check())
    print(" ".join(jvm_agent()[:1]), "agent compiled")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
