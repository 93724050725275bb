"""Run `tracescore serve` as a real child process in tests: wait for readiness, read its ports,
stop it with SIGTERM or SIGKILL, start it again on the same ports and journal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from tracescore.testing._service import LoopbackOTLP, Service


class GatewayProcess(LoopbackOTLP, Service):
    """`tracescore serve` with `args` (plus free loopback ports unless given) in a child process.

    `start()` returns once the gateway logged "ready"; `grpc_port`, `http_port`, `health_port`
    are then known. `restart()` starts it again with the same ports (and journal). Its JSON log
    lines are kept in `logs`. `command_prefix` runs it under another command (e.g. taskset).

    A child that logs nothing before `ready_timeout_s` has its Python stacks dumped into `logs`
    (faulthandler, SIGABRT) and is started once more; the second failure raises with that dump.
    (Seen once in three full-suite runs with no log line at all; the dump is there to explain it.)
    """

    def __init__(self, args: Sequence[str] = (), *, env: dict[str, str] | None = None,
                 cwd: str | os.PathLike[str] | None = None, ready_timeout_s: float = 60.0,
                 grpc_port: int = 0, http_port: int = 0, health_port: int = 0,
                 command_prefix: Sequence[str] = ()) -> None:
        self.args = list(args)
        self.command_prefix = list(command_prefix)  # e.g. ["taskset", "-c", "0"]
        self.env = {**os.environ, "PYTHONFAULTHANDLER": "1", **(env or {})}
        self.cwd = cwd
        self.ready_timeout_s = ready_timeout_s
        self.grpc_port, self.http_port, self.health_port = grpc_port, http_port, health_port
        self.logs: list[dict[str, Any]] = []
        self._process: subprocess.Popen[str] | None = None
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None

    @property
    def process(self) -> subprocess.Popen[str]:
        if self._process is None:
            raise RuntimeError("the gateway process is not running")
        return self._process

    def start(self) -> GatewayProcess:
        try:
            return self._start_once()
        except _NotReady as first:
            if first.exit_code is not None:  # it exited: a real error, not a hang
                raise RuntimeError(str(first)) from None
            try:
                return self._start_once()
            except _NotReady as second:
                raise RuntimeError(f"{second} (second attempt; first: {first})") from None

    def _start_once(self) -> GatewayProcess:
        command = [*self.command_prefix, sys.executable, "-m", "tracescore", "serve",
                   "--grpc", f"127.0.0.1:{self.grpc_port}", "--http", f"127.0.0.1:{self.http_port}",
                   "--health", f"127.0.0.1:{self.health_port}", *self.args]
        self._ready.clear()
        self._process = subprocess.Popen(command, env=self.env, cwd=self.cwd, text=True,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._reader = threading.Thread(target=self._read, args=(self._process,), daemon=True)
        self._reader.start()
        deadline = time.monotonic() + self.ready_timeout_s
        while not self._ready.wait(0.1):
            if self._process.poll() is not None or time.monotonic() > deadline:
                code = self._process.poll()
                if code is None:  # hung: have faulthandler write every thread's stack to stderr
                    self._process.send_signal(signal.SIGABRT)
                    try:
                        self._process.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        pass
                self._reader.join(timeout=2)
                self.kill()
                raise _NotReady(code, f"tracescore serve did not become ready (exit {code}); "
                                      f"log: {self.logs[-40:]!r}")
        return self

    def restart(self) -> GatewayProcess:
        """Start again on the same ports (after `kill()` or `terminate()`)."""
        return self.start()

    def terminate(self, timeout_s: float = 60.0) -> int:
        """SIGTERM, then wait for the exit code."""
        process = self.process
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=timeout_s)
        self._finish()
        return code

    def kill(self) -> None:
        """SIGKILL (no chance to drain or flush), and reap it."""
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        self._finish()

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            try:
                self.terminate(timeout_s=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self._finish()

    def events(self, name: str) -> list[dict[str, Any]]:
        return [entry for entry in self.logs if entry.get("event") == name]

    def _finish(self) -> None:
        if self._reader is not None:
            self._reader.join(timeout=5)
            self._reader = None
        self._process = None

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            try:
                entry = json.loads(line)
            except ValueError:
                entry = {"message": line.rstrip()}
            if not isinstance(entry, dict):
                entry = {"message": line.rstrip()}
            self.logs.append(entry)
            if entry.get("event") == "ready":
                self.grpc_port = int(entry.get("grpc_port") or self.grpc_port)
                self.http_port = int(entry.get("http_port") or self.http_port)
                self.health_port = int(entry.get("health_port") or self.health_port)
                self._ready.set()


class _NotReady(Exception):
    def __init__(self, exit_code: int | None, message: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code
