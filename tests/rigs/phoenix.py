"""Run Arize Phoenix locally for end-to-end tests and demos: a cached venv outside the checkout, free ports.

    make phoenix        # install once, run Phoenix on :6006 until Ctrl-C
    make demo-phoenix   # the same, plus `tracescore demo` traffic sent to it

(they run `python -m rigs.phoenix serve` / `demo` in tests/).

Both listen on loopback only: the UI and OTLP/HTTP on $PHOENIX_PORT (6006), OTLP/gRPC on
$PHOENIX_GRPC_PORT (4317). A default port that is taken is replaced by a free one; a port set in
the environment (or with --port / --grpc-port) that is taken is an error naming its setting.

Phoenix lives exactly as long as the command: Ctrl-C, SIGTERM and SIGHUP stop it (it runs in a
session of its own, so a signal to the command alone would leave it running), and Phoenix stops
itself when the command is killed outright. One Phoenix per data directory: a second `serve` on
the same one is refused with the pid and address of the first (a lock held while it runs).

`PhoenixServer()` does the same from Python as a context manager (used by the end-to-end test).
"""

from __future__ import annotations

import argparse
import fcntl
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from rigs.venvs import cached_venv
from tracescore.testing._service import ChildProcess
from tracescore.testing._tools import cache_dir, free_port

PHOENIX_VERSION = os.environ.get("TRACESCORE_PHOENIX_VERSION", "20.26.1")
DEFAULT_PORTS = {"PHOENIX_PORT": 6006, "PHOENIX_GRPC_PORT": 4317}
# `phoenix serve` with its gRPC receiver on loopback: Phoenix binds it to [::] (every interface)
# and has no setting for it, so its addresses are rewritten when the server adds them
_LOOPBACK_LAUNCHER = """
import os, signal, sys, threading, time
# when whoever started it is gone (killed outright), Phoenix shuts itself down
def _orphaned(parent=os.getppid()):
    while os.getppid() == parent:
        time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGTERM)
threading.Thread(target=_orphaned, daemon=True, name="orphan-watch").start()
from grpc.aio import _server
for _name in ("add_insecure_port", "add_secure_port"):
    def _loopback(self, address, *args, _add=getattr(_server.Server, _name)):
        return _add(self, address.replace("[::]:", "127.0.0.1:", 1), *args)
    setattr(_server.Server, _name, _loopback)
from phoenix.server.main import main
sys.argv[0] = "phoenix"
sys.exit(main())
"""


def phoenix_venv(version: str = PHOENIX_VERSION) -> Path:
    """The cached venv holding arize-phoenix==version (installed on first use; minutes)."""
    return cached_venv(f"phoenix-venv-{version}", f"arize-phoenix=={version}")


class PhoenixServer(ChildProcess):
    """`phoenix serve` on free loopback ports with offline settings and a temporary working dir."""

    what = "phoenix"
    stop_grace_s = 15.0

    def __init__(
        self,
        *,
        version: str = PHOENIX_VERSION,
        port: int | None = None,
        grpc_port: int | None = None,
        working_dir: str | Path | None = None,
        startup_timeout: float = 180.0,
        log_path: str | Path | None = None,
    ) -> None:
        self.version = version
        self._fixed_ports = port is not None or grpc_port is not None
        self.port = port or free_port()
        self.grpc_port = grpc_port or free_port()
        self._working_dir = Path(working_dir) if working_dir else None
        self._startup_timeout = startup_timeout
        self._log_path = Path(log_path) if log_path else None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def traces_url(self) -> str:
        """OTLP/HTTP traces endpoint."""
        return f"{self.base_url}/v1/traces"

    @property
    def grpc_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.grpc_port}"

    @property
    def workdir(self) -> Path:
        """The working dir given, else a temporary one."""
        return self._working_dir or super().workdir

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            PHOENIX_WORKING_DIR=str(self.workdir),
            PHOENIX_HOST="127.0.0.1",
            PHOENIX_PORT=str(self.port),
            PHOENIX_GRPC_PORT=str(self.grpc_port),
            PHOENIX_TELEMETRY_ENABLED="false",
            PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",
        )
        return env

    def start(self) -> PhoenixServer:
        """Start Phoenix; ports it picked itself are picked again (twice at most) when another
        process took one between the pick and Phoenix's bind."""
        venv = phoenix_venv(self.version)
        for _ in range(2):
            try:
                return self._serve(venv)
            except Exception as exc:
                if self._fixed_ports or "already in use" not in str(exc).lower():
                    raise
                self.port, self.grpc_port = free_port(), free_port()
        return self._serve(venv)

    def _serve(self, venv: Path) -> PhoenixServer:
        command = [str(venv / "bin" / "python"), "-c", _LOOPBACK_LAUNCHER, "serve"]
        self._launch(command, env=self.environment(),
                     ready=lambda: _healthy(self.base_url), timeout=self._startup_timeout)
        return self

    def get_json(self, path: str, **params: Any) -> Any:
        """GET a Phoenix REST path (e.g. "/v1/projects/default/spans"); urllib HTTPError on 4xx/5xx."""
        query = "&".join(f"{key}={value}" for key, value in params.items() if value is not None)
        url = f"{self.base_url}{path}" + (f"?{query}" if query else "")
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())


    def wait_for_span_annotations(self, span_ids: list[str], expected: int, *,
                                  project: str = "default", timeout: float = 120.0
                                  ) -> list[dict[str, Any]]:
        """Poll until `expected` annotations of these spans (hex ids) are stored; Phoenix inserts
        annotations asynchronously and retries those whose span it has not ingested yet every 10 s.
        """
        query = "&".join([*(f"span_ids={span_id}" for span_id in span_ids), "limit=1000"])
        deadline = time.monotonic() + timeout
        found: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            try:
                found = self.get_json(f"/v1/projects/{project}/span_annotations?{query}")["data"]
            except urllib.error.HTTPError as exc:
                if exc.code != 404:  # 404: the project does not exist until its first span
                    raise
            if len(found) >= expected:
                return found
            time.sleep(0.5)  # an external server: nothing to wait on but its API
        raise TimeoutError(f"Phoenix has {len(found)} of {expected} annotations after {timeout}s")


DEMO_PROJECT = "tracescore-demo"


def _healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/healthz", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, http.client.HTTPException):
        return False  # not up yet, or another server (e.g. HTTP/2 gRPC) holds the port


def _port_free(port: int) -> bool:
    """Whether a loopback listener can bind `port` (a wildcard listener on it also says no)."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class PortTaken(Exception):
    """A port the user set is in use; the message names the setting."""


def _port(setting: str, given: int | None) -> int:
    """The port for `setting` (PHOENIX_PORT or PHOENIX_GRPC_PORT): the one given on the command
    line or in the environment, which must be free, else the default, else a free one."""
    if given is None and (value := os.environ.get(setting)):
        try:
            given = int(value)
        except ValueError:
            raise PortTaken(f"{setting}={value!r} is not a port number") from None
    if given is not None:
        if not _port_free(given):
            raise PortTaken(f"port {given} ({setting}) is in use: set {setting} to a free port, "
                            "or unset it to use a free one")
        return given
    default = DEFAULT_PORTS[setting]
    return default if _port_free(default) else free_port()


def run_demo(base_url: str, spans_file: Path) -> int:
    """`tracescore demo` with its spans also exported to Phoenix (project DEMO_PROJECT) over OTLP/HTTP,
    its scores as span annotations and the agents' input/output in Phoenix's columns."""
    env = dict(os.environ)
    resource = env.get("OTEL_RESOURCE_ATTRIBUTES", "")
    env.update(
        OTEL_EXPORTER_OTLP_ENDPOINT=base_url,
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        OTEL_RESOURCE_ATTRIBUTES=",".join(
            part for part in (resource, f"openinference.project.name={DEMO_PROJECT}") if part
        ),
    )
    env.setdefault("OTEL_SERVICE_NAME", DEMO_PROJECT)
    env["PHOENIX_ENDPOINT"] = base_url  # the demo's scores also become span annotations
    env.setdefault("TRACESCORE_OPENINFERENCE", "true")  # Phoenix's input and output columns
    command = [sys.executable, "-m", "tracescore", "demo", "--spans-file", str(spans_file)]
    return subprocess.run(command, env=env, check=False).returncode


def _where_to_click(base_url: str) -> str:
    return (
        f"Open {base_url}/projects and pick the project '{DEMO_PROJECT}': each 'invoke_agent ...' "
        "row shows its input, output and its answer-relevancy score in the annotations column "
        "(Phoenix attaches it within about 10 s of the span; filter low scores with "
        "annotations['answer-relevancy'].score < 0.5). A span's Events tab lists every "
        "gen_ai.evaluation.result event (content similarity too) and the judge's step events."
    )


LOCK_NAME = "tracescore-phoenix.lock"


class DataDirTaken(Exception):
    """Another Phoenix of this rig runs on the data directory; the message names it."""


def lock_data_dir(working_dir: Path) -> Any:
    """Hold the data directory for one Phoenix (the open lock file; closing it, or this process
    ending, lets go). DataDirTaken naming the holder's pid and address when another holds it."""
    path = working_dir / LOCK_NAME
    handle = open(path, "a+")  # noqa: SIM115 - held open for as long as Phoenix runs
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise DataDirTaken(f"{working_dir} is in use by a running Phoenix ({holder}): stop it "
                           "first, or give another --working-dir / PHOENIX_WORKING_DIR") from None
    return handle


def _note_holder(handle: Any, text: str) -> None:
    handle.seek(0)
    handle.truncate()
    handle.write(text)
    handle.flush()


def _stop_on_signals() -> None:
    """SIGTERM and SIGHUP end the command as Ctrl-C does: Phoenix is stopped on the way out."""
    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)


def main(argv: list[str] | None = None) -> int:
    """`install` the cached venv, `serve` Phoenix in the foreground, or run the `demo` against it."""
    parser = argparse.ArgumentParser(prog="python -m rigs.phoenix")
    parser.add_argument("command", choices=["install", "serve", "demo"])
    parser.add_argument("--port", type=int, help="UI and OTLP/HTTP (default $PHOENIX_PORT, 6006)")
    parser.add_argument("--grpc-port", type=int, help="OTLP/gRPC (default $PHOENIX_GRPC_PORT, 4317)")
    parser.add_argument("--working-dir", default=os.environ.get("PHOENIX_WORKING_DIR"))
    parser.add_argument(
        "--exit", action="store_true", help="demo: stop the Phoenix it started when done"
    )
    args = parser.parse_args(argv)
    if args.command == "install":
        print(phoenix_venv())
        return 0
    asked = args.port or int(os.environ.get("PHOENIX_PORT") or DEFAULT_PORTS["PHOENIX_PORT"])
    base_url = f"http://127.0.0.1:{asked}"
    if args.command == "demo" and _healthy(base_url):  # a Phoenix (e.g. `make phoenix`) is running
        code = run_demo(base_url, cache_dir() / "demo-spans.jsonl")
        print(_where_to_click(base_url))
        return code
    try:
        port, grpc_port = _port("PHOENIX_PORT", args.port), _port("PHOENIX_GRPC_PORT", args.grpc_port)
    except PortTaken as exc:
        print(f"phoenix: {exc}", file=sys.stderr)
        return 2
    working_dir = Path(args.working_dir or cache_dir() / "phoenix-data")
    working_dir.mkdir(parents=True, exist_ok=True)
    try:
        held = lock_data_dir(working_dir)
    except DataDirTaken as exc:
        print(f"phoenix: {exc}", file=sys.stderr)
        return 2
    _stop_on_signals()
    print(
        f"Starting Phoenix {PHOENIX_VERSION} (first run installs it into {cache_dir()}) ...",
        flush=True,
    )
    server = PhoenixServer(port=port, grpc_port=grpc_port, working_dir=working_dir)
    try:
        server.start()
    except (RuntimeError, TimeoutError) as exc:  # e.g. a port taken since it was checked
        reason = str(exc).partition("; log:")[0]
        print(f"phoenix: {reason} (ports {port}, {grpc_port}); its log: {server.log_path}",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # stopped while starting (start() stopped Phoenix)
        return 130
    _note_holder(held, f"pid {os.getpid()}, Phoenix pid {server.pid}, UI {server.base_url}")
    print(
        f"Phoenix UI: {server.base_url}  OTLP/HTTP: {server.traces_url}  OTLP/gRPC: {server.grpc_endpoint}"
    )
    print(f"Data: {working_dir}. Ctrl-C stops it.", flush=True)
    try:
        if args.command == "demo":
            code = run_demo(server.base_url, working_dir / "demo-spans.jsonl")
            print(_where_to_click(server.base_url), flush=True)
            if args.exit or code:
                return code
        assert server._process is not None
        server._process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        held.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
