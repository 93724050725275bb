"""`tracescore serve`: run a `Gateway` until SIGTERM/SIGINT, with JSON logs on stderr."""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
from typing import Any

from tracescore.gateway._config import GatewayConfig
from tracescore.gateway._gateway import Gateway
from tracescore.gateway._open_files import open_files_limit
from tracescore.scoring._resolve import preflight_scorers

LIFECYCLE = "tracescore.gateway.lifecycle"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message (never span content)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
                    + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in ("event", "grpc_port", "http_port", "health_port", "replayed", "drained"):
            if hasattr(record, key):
                entry[key] = getattr(record, key)
        if record.exc_info and record.exc_info[0] is not None:
            entry["error.type"] = record.exc_info[0].__name__
        return json.dumps(entry, ensure_ascii=False)


def setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("LiteLLM", "litellm", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # ready / draining / stopped are always logged: supervisors and tests wait for them
    logging.getLogger(LIFECYCLE).setLevel(logging.INFO)


def serve(config: GatewayConfig) -> int:
    """Start the gateway, block until SIGTERM or SIGINT, then drain; the exit code. A judge that
    cannot work (unknown model, no API key) raises ConfigurationError before anything starts."""
    preflight_scorers(config.scorers or ())
    log = logging.getLogger(LIFECYCLE)
    open_files_limit()  # each connection is a file descriptor; 1024 is a common soft default
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    # a thread that wakes (a request, the forwarder) waits at most this long for the GIL
    sys.setswitchinterval(0.001)
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        gateway = Gateway(config).start()
        log.info("ready", extra={"event": "ready", "grpc_port": gateway.grpc_port,
                                 "http_port": gateway.http_port,
                                 "health_port": gateway.health_port})
        while not stop.wait(1.0):
            pass
        log.info("draining", extra={"event": "draining"})
        drained = gateway.stop()
        log.info("stopped", extra={"event": "stopped", "drained": drained})
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
