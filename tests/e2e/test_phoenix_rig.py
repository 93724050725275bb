"""`make phoenix` lives exactly as long as the command: SIGTERM to `make` stops Phoenix (it ran on
re-parented, its ports bound), a command killed outright takes Phoenix with it, and a second
`make phoenix` on the same data directory is refused naming the first, instead of starting
another Phoenix on the same data."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rigs.phoenix import LOCK_NAME, phoenix_venv

from tracescore.testing._tools import free_port

ROOT = Path(__file__).resolve().parents[2]
START_BUDGET_S = 300  # a budget for a loaded machine: Phoenix starts in 20-60 s

pytestmark = pytest.mark.slow


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.5)


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    """A data directory; any Phoenix the lock file names is stopped at the end, whatever
    happened."""
    phoenix_venv()  # installed (cached) before any timing starts
    yield tmp_path
    holder = (tmp_path / LOCK_NAME).read_text() if (tmp_path / LOCK_NAME).exists() else ""
    for pid in re.findall(r"pid (\d+)", holder):
        try:
            os.killpg(int(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _env(data: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHOENIX_")}
    env.update(PHOENIX_WORKING_DIR=str(data), PHOENIX_PORT=str(port),
               PHOENIX_GRPC_PORT=str(free_port()))
    return env


def _started(command: list[str], data: Path, port: int) -> tuple[subprocess.Popen[str], int]:
    """The command, once its Phoenix answers; and Phoenix's pid (from the data dir's lock)."""
    process = subprocess.Popen(command, cwd=ROOT, env=_env(data, port), text=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _wait(lambda: _healthy(port) and "Phoenix pid" in (data / LOCK_NAME).read_text(),
          START_BUDGET_S, "Phoenix did not start")
    found = re.search(r"Phoenix pid (\d+)", (data / LOCK_NAME).read_text())
    assert found is not None
    return process, int(found.group(1))


def test_sigterm_to_make_stops_phoenix_and_one_phoenix_per_data_dir(data_dir: Path) -> None:
    port = free_port()
    make = ["make", "-s", "-o", ".venv/.installed", "phoenix"]
    first, phoenix = _started(make, data_dir, port)

    again = subprocess.run(make, cwd=ROOT, env=_env(data_dir, free_port()), text=True,
                           capture_output=True, timeout=120, check=False)
    assert again.returncode != 0
    assert f"{data_dir} is in use by a running Phoenix (pid " in again.stderr
    assert _healthy(port) and _alive(phoenix)

    first.send_signal(signal.SIGTERM)  # to make alone, as `kill PID` does
    first.wait(timeout=60)
    _wait(lambda: not _alive(phoenix), 30, "Phoenix outlived make")
    assert not _healthy(port)


def test_phoenix_stops_when_its_command_is_killed_outright(data_dir: Path) -> None:
    port = free_port()
    rig = [sys.executable, "-m", "rigs.phoenix", "serve"]
    command = ["env", "PYTHONPATH=tests", *rig]
    process, phoenix = _started(command, data_dir, port)
    process.kill()
    process.wait(timeout=30)
    _wait(lambda: not _alive(phoenix), 30, "Phoenix outlived its killed command")
    assert not _healthy(port)
