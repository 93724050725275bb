"""Where the judge client's CPU goes: py-spy samples of a process, sorted into the parts of one
litellm judge call.

    record(pid, seconds, path)   py-spy (`record -f raw`) of every thread of `pid`
    parts(path)                  {part: share of the busy samples}, largest first

A sample's part is the first of `PARTS` whose marker is in any frame of its stack (so a
pricing call made while the reply is built counts as pricing). Samples of threads waiting
(a thread pool's idle workers, the event loop's `select`, the scoring process's pipe reader)
are left out: py-spy counts some blocking calls as busy.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

# part -> frame markers (module paths or function names); the first part that matches wins
PARTS: list[tuple[str, tuple[str, ...]]] = [
    ("litellm pricing (cost of the reply, zero-cost diagnostic)",
     ("response_cost_calculator", "completion_cost", "_record_zero_cost_diagnostic")),
    ("litellm success logging (standard logging payload, callbacks)",
     ("success_handler", "LoggingWorker", "_client_async_logging_helper")),
    ("reply parsing (openai SDK and litellm response objects)",
     ("_legacy_response", "convert_to_model_response_object", "convert_dict_to_response")),
    ("litellm's executor hop (sync half in a thread pool, hand-back to the loop)",
     ("call_soon_threadsafe", "_chain_future", "run_in_executor")),
    ("HTTP (openai SDK client, httpx, litellm's aiohttp transport)",
     ("aiohttp", "httpx", "openai/_base_client", "_client_auth")),
    ("litellm request building and set-up (params, provider config, logging object)",
     ("litellm/main.py", "litellm/utils.py", "litellm/llms/", "function_setup")),
]
# the rest: by the innermost frame of litellm or tracescore (every frame of the scoring
# process's loop thread has tracescore's `_child_main` below it)
_OWNERS = (("litellm/", "litellm, other"),
           ("tracescore/", "tracescore (scorer steps, prompts, reply validation, judge trace, IPC)"))
_REST = "event loop and the rest"
_LOOP = ("_child_main (", "run_until_complete (")  # frames that run the loop (scoring process)
# a thread waiting, not working (last frame of the stack)
_IDLE = ("_worker (concurrent/futures/thread.py", "select (selectors.py", "EpollSelector.select",
         "_read_frame (", "wait (threading.py", "Condition.wait", "Queue.get")


def _owner(frames: list[str]) -> str:
    for frame in reversed(frames):
        if frame.startswith(_LOOP):  # the event loop's own work
            return _REST
        for marker, part in _OWNERS:
            if marker in frame:
                return part
    return _REST


def available() -> bool:
    return _py_spy() is not None


def _py_spy() -> str | None:
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


def record(pid: int, seconds: float, path: Path, rate: int = 200) -> None:
    """Sample `pid` for `seconds` into `path` (py-spy's raw, collapsed-stack format)."""
    spy = _py_spy()
    if spy is None:
        raise RuntimeError("py-spy is not installed (it is in the dev extra)")
    subprocess.run([spy, "record", "-r", str(rate), "-f", "raw", "-o", str(path), "-d",
                    str(max(1, round(seconds))), "-p", str(pid), "--nonblocking"],
                   check=True, capture_output=True, timeout=seconds + 60)


def parts(path: Path) -> tuple[dict[str, float], int]:
    """Shares (%) of the busy samples in `path` by part, and the number of busy samples."""
    counts: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        if not frames or frames[-1].startswith(_IDLE) or any(
                "_find_and_load" in f for f in frames):  # waiting, or importing
            continue
        part = next((name for name, markers in PARTS
                     if any(m in f for m in markers for f in frames)), None) or _owner(frames)
        counts[part] += int(n)
    busy = sum(counts.values())
    return {name: 100.0 * c / busy for name, c in counts.most_common()} if busy else {}, busy
