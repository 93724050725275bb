"""Build and run the project's own OpenTelemetry Collector (from collector/builder-config.yaml) in tests.

    python -m tracescore.testing._collector build              # build once into the cache, print the path
    python -m tracescore.testing._collector validate FILE...   # `otelcol validate` each config
    python -m tracescore.testing._collector telemetrygen       # the load generator, built once

The binary is built with the OpenTelemetry Collector Builder from upstream Go modules (needs `go`
and the Go module proxy) into cache_dir()/otelcol-<manifest hash>/ and reused while the manifest
is unchanged. `TRACESCORE_OTELCOL=/path/to/otelcol` uses a binary you already have instead.
The contrib repo's load generator `telemetrygen`, at the same release (the gateway benchmark's
sender), is built the same way into cache_dir()/telemetrygen-<release>/ (`TRACESCORE_TELEMETRYGEN`
names one you have).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from tracescore._env import OTELCOL, TELEMETRYGEN
from tracescore._exceptions import CollectorBuildError
from tracescore.testing._service import ChildProcess, LoopbackOTLP
from tracescore.testing._tools import _file_lock, cache_dir, free_port, port_open, tail

BUILDER_VERSION = "v0.161.0"  # the builder release matching the manifest's collector release
MANIFEST = Path(__file__).resolve().parents[2] / "collector" / "builder-config.yaml"
_BINARY_NAME = "otelcol-tracescore"
# the load generator, from the contrib release the manifest pins (the builder's release too)
TELEMETRYGEN_MODULE = "github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen"
_READY_MARKER = ".tracescore-ready"
_SIGNAL_SETTLE_S = 0.5
# The collector's own telemetry would bind :8888 in every instance; tests run many at once.
QUIET_TELEMETRY = {"service::telemetry::metrics::level": "none"}


def _manifest_hash(manifest: Path) -> str:
    """Hash of what the build depends on: the builder release and the manifest minus comments."""
    lines = [line.split("#", 1)[0].rstrip() for line in manifest.read_text().splitlines()]
    content = "\n".join(line for line in lines if line)
    return hashlib.sha256(f"{BUILDER_VERSION}\0{content}".encode()).hexdigest()[:16]


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise CollectorBuildError(
            "building the collector needs the Go toolchain (`go` on PATH); "
            "or set TRACESCORE_OTELCOL to an existing collector binary"
        )
    return go


def _run(command: list[str], *, log: Path, cwd: Path, env: Mapping[str, str]) -> None:
    with open(log, "ab") as out:
        result = subprocess.run(
            command, check=False, cwd=cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT
        )
    if result.returncode != 0:
        raise CollectorBuildError(
            f"{' '.join(command[:2])} failed (exit {result.returncode}); log {log}:\n{tail(log)}"
        )


def _builder(go: str, env: Mapping[str, str], log: Path) -> Path:
    """The `builder` binary at BUILDER_VERSION, installed once into the cache."""
    gobin = cache_dir() / f"ocb-{BUILDER_VERSION}"
    builder = gobin / "builder"
    if not builder.exists():
        gobin.mkdir(parents=True, exist_ok=True)
        command = [go, "install", f"go.opentelemetry.io/collector/cmd/builder@{BUILDER_VERSION}"]
        _run(command, log=log, cwd=gobin, env={**env, "GOBIN": str(gobin)})
    return builder


def collector_binary(manifest: Path = MANIFEST) -> Path:
    """The collector built from `manifest`, building it on first use (minutes; process-safe)."""
    if explicit := OTELCOL.raw():
        return Path(explicit)
    if not manifest.is_file():
        raise CollectorBuildError(
            f"no collector manifest at {manifest} (it is in tracescore's source checkout); "
            "set TRACESCORE_OTELCOL to an existing collector binary"
        )
    home = cache_dir() / f"otelcol-{_manifest_hash(manifest)}"
    binary = home / _BINARY_NAME
    with _file_lock(cache_dir() / f"{home.name}.lock"):
        if (home / _READY_MARKER).exists() and binary.exists():
            return binary
        shutil.rmtree(home, ignore_errors=True)  # a half-finished earlier attempt
        home.mkdir(parents=True)
        log = home / "build.log"
        env = {**os.environ, "GOFLAGS": os.environ.get("GOFLAGS", "-buildvcs=false")}
        builder = _builder(_go(), env, log)
        source = home / "src"
        config = home / "builder-config.yaml"
        config.write_text(
            manifest.read_text().replace("dist:\n", f"dist:\n  output_path: {source}\n", 1)
        )
        _run([str(builder), "--config", str(config)], log=log, cwd=home, env=env)
        shutil.move(str(source / _BINARY_NAME), binary)
        shutil.rmtree(source, ignore_errors=True)
        (home / _READY_MARKER).write_text(manifest.read_text())
    return binary


def telemetrygen_binary() -> Path:
    """`telemetrygen` at the pinned contrib release, built on first use (a minute; process-safe)."""
    if explicit := TELEMETRYGEN.raw():
        return Path(explicit)
    home = cache_dir() / f"telemetrygen-{BUILDER_VERSION}"
    binary = home / "telemetrygen"
    with _file_lock(cache_dir() / f"{home.name}.lock"):
        if (home / _READY_MARKER).exists() and binary.exists():
            return binary
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        env = {**os.environ, "GOBIN": str(home),
               "GOFLAGS": os.environ.get("GOFLAGS", "-buildvcs=false")}
        _run([_go(), "install", f"{TELEMETRYGEN_MODULE}@{BUILDER_VERSION}"],
             log=home / "build.log", cwd=home, env=env)
        (home / _READY_MARKER).write_text(f"{TELEMETRYGEN_MODULE}@{BUILDER_VERSION}\n")
    return binary


def _set_flags(overrides: Mapping[str, str]) -> list[str]:
    return [f"--set={key}={value}" for key, value in overrides.items()]


def validate_config(
    config: Path, *, overrides: Mapping[str, str] = {}, env: Mapping[str, str] = {}
) -> subprocess.CompletedProcess[str]:
    """`otelcol validate --config config`: the collector's own check that it would start."""
    command = [str(collector_binary()), "validate", f"--config={config}", *_set_flags(overrides)]
    return subprocess.run(
        command, check=False, capture_output=True, text=True, env={**os.environ, **env},
        timeout=120,
    )


class OTelCollector(LoopbackOTLP, ChildProcess):
    """The built collector running `config` (a YAML file or text) until stop().

    overrides: `--set key=value` settings (e.g. receiver endpoints on free ports).
    env: extra environment for `${env:...}` references. ready_ports: loopback ports that must
    accept connections before start() returns (default: the OTLP ports this object allotted).
    The receiver is put on free loopback ports (`grpc_port`, `http_port`) unless
    `otlp_receiver=False`, and the collector's own metrics endpoint is switched off.
    """

    what = "otelcol"
    stop_grace_s = 15.0  # the collector drains its queues on SIGTERM

    def __init__(
        self,
        config: str | Path,
        *,
        overrides: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        otlp_receiver: bool = True,
        ready_ports: Iterable[int] | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        self.config = config
        self.grpc_port = free_port()
        self.http_port = free_port()
        self.overrides = dict(QUIET_TELEMETRY)
        if otlp_receiver:
            self.overrides.update(
                {
                    "receivers::otlp::protocols::grpc::endpoint": f"127.0.0.1:{self.grpc_port}",
                    "receivers::otlp::protocols::http::endpoint": f"127.0.0.1:{self.http_port}",
                }
            )
        self.overrides.update(overrides or {})
        self.env = dict(env or {})
        self._ready_ports = list(
            ready_ports if ready_ports is not None else
            ((self.grpc_port, self.http_port) if otlp_receiver else ())
        )
        self._startup_timeout = startup_timeout

    def start(self) -> OTelCollector:
        binary = collector_binary()
        config_path = Path(self.config) if isinstance(self.config, Path) else None
        if config_path is None:
            config_path = self.workdir / "config.yaml"
            config_path.write_text(str(self.config))
        self._launch(
            [str(binary), f"--config={config_path}", *_set_flags(self.overrides)],
            ready=lambda: all(port_open(port) for port in self._ready_ports)
            and "Everything is ready" in self.log(),
            timeout=self._startup_timeout,
            env={**os.environ, **self.env},
        )
        # It subscribes to SIGTERM just after logging "ready"; a SIGTERM before then kills it
        # without draining. Nothing shows the moment, so allow it a moment.
        time.sleep(_SIGNAL_SETTLE_S)
        return self


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tracescore.testing._collector")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="build the collector into the cache and print its path")
    commands.add_parser("telemetrygen", help="build telemetrygen into the cache, print its path")
    validate = commands.add_parser("validate", help="`otelcol validate` each config file")
    validate.add_argument("configs", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if args.command == "build":
        print(collector_binary())
        return 0
    if args.command == "telemetrygen":
        print(telemetrygen_binary())
        return 0
    failed = 0
    for config in args.configs:
        result = validate_config(config)
        print(f"{config}: {'ok' if result.returncode == 0 else 'INVALID'}")
        if result.returncode != 0:
            failed += 1
            print(result.stdout + result.stderr, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
