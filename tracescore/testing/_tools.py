"""Shared helpers for the external test services: the cache dir, free ports, readiness, stopping."""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tracescore._env import CACHE_DIR


def cache_dir() -> Path:
    """$TRACESCORE_CACHE_DIR, else $XDG_CACHE_HOME/tracescore, else ~/.cache/tracescore."""
    if explicit := CACHE_DIR.raw():
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tracescore"


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_HANDED_OUT: collections.deque[int] = collections.deque(maxlen=512)
_HANDED_OUT_LOCK = threading.Lock()


def free_port() -> int:
    """A free loopback port, never one of the last 512 this process handed out (the kernel may
    offer a port again as soon as its probe socket closes: two listeners would then collide)."""
    with _HANDED_OUT_LOCK:
        for _ in range(64):
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = int(sock.getsockname()[1])
            if port not in _HANDED_OUT:
                break
        _HANDED_OUT.append(port)
        return port


def wait_until(
    ready: Callable[[], bool], *, timeout: float, alive: Callable[[], bool], what: str
) -> None:
    """Poll `ready()` (an external process has no readiness signal to wait on) until true or timeout.

    Raises RuntimeError as soon as `alive()` turns false, TimeoutError after `timeout` seconds.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"{what} exited before it was ready")
        if ready():
            return
        time.sleep(0.1)
    raise TimeoutError(f"{what} not ready after {timeout}s")


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def tail(path: Path, lines: int = 40) -> str:
    """The last lines of a log file, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def wait_for_process(
    ready: Callable[[], bool],
    process: subprocess.Popen[bytes],
    *,
    timeout: float,
    what: str,
    log_path: Path,
) -> None:
    """wait_until(ready) while `process` runs; a failure's message ends with the tail of its log."""
    try:
        wait_until(ready, timeout=timeout, alive=lambda: process.poll() is None, what=what)
    except (RuntimeError, TimeoutError) as exc:
        raise type(exc)(f"{exc}; log:\n{tail(log_path)}") from None


def stop_process_group(process: subprocess.Popen[bytes] | None, *, grace: float) -> None:
    """SIGTERM the group of `process` (started with start_new_session=True); SIGKILL after `grace` s."""
    if process is None or process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)
