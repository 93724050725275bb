"""Run rotel (a Rust OTLP collector shipped on PyPI) as a real second collector hop in tests."""

from __future__ import annotations

import os
from pathlib import Path

from rigs.venvs import cached_venv
from tracescore.testing._service import ChildProcess, LoopbackOTLP
from tracescore.testing._tools import free_port, port_open

ROTEL_VERSION = os.environ.get("TRACESCORE_ROTEL_VERSION", "0.0.1a15")


def rotel_binary(version: str = ROTEL_VERSION) -> Path:
    """The `rotel-agent` binary from a cached venv holding rotel==version (installed on first use)."""
    venv = cached_venv(f"rotel-venv-{version}", f"rotel=={version}")
    found = sorted(venv.glob("lib/python*/site-packages/rotel/rotel-agent"))
    if not found:
        raise FileNotFoundError(f"rotel-agent not found in {venv}")
    return found[0]


class RotelCollector(LoopbackOTLP, ChildProcess):
    """rotel receiving OTLP (gRPC + HTTP) on free loopback ports and exporting OTLP to `exporter_endpoint`.

    exporter_protocol: "grpc" (endpoint "http://host:port") or "http" (base URL; rotel adds /v1/traces).
    """

    what = "rotel"
    stop_grace_s = 10.0  # rotel flushes its batches on SIGTERM

    def __init__(
        self,
        exporter_endpoint: str,
        *,
        exporter_protocol: str = "grpc",
        version: str = ROTEL_VERSION,
        startup_timeout: float = 60.0,
    ) -> None:
        self.exporter_endpoint = exporter_endpoint
        self.exporter_protocol = exporter_protocol
        self.version = version
        self.grpc_port = free_port()
        self.http_port = free_port()
        self._startup_timeout = startup_timeout

    def start(self) -> RotelCollector:
        binary = rotel_binary(self.version)
        command = [
            str(binary),
            "start",
            "--otlp-grpc-endpoint", f"127.0.0.1:{self.grpc_port}",
            "--otlp-http-endpoint", f"127.0.0.1:{self.http_port}",
            "--exporter", "otlp",
            "--otlp-exporter-endpoint", self.exporter_endpoint,
            "--otlp-exporter-protocol", self.exporter_protocol,
            "--batch-timeout", "50ms",
        ]  # fmt: skip
        env = {key: value for key, value in os.environ.items() if not key.startswith("ROTEL_")}
        self._launch(command, env=env, timeout=self._startup_timeout,
                     ready=lambda: port_open(self.grpc_port) and port_open(self.http_port))
        return self
