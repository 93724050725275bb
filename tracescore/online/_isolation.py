"""Process isolation of online scoring: the judge's CPU work away from the agent's GIL.

A judged run spends milliseconds of CPU in litellm (building requests, parsing replies, looking
up costs). In the agent's process that CPU holds the GIL, and an agent thread waking from I/O
can wait up to the interpreter's switch interval (5 ms) for it: the agent's p99 grows. So by
default (`isolation="auto"`) scorers that call a judge run in ONE scoring process per
`ScoringSpanProcessor`:

- started lazily with `subprocess` (not multiprocessing: the user's main module is never
  re-imported, so scripts need no `if __name__ == "__main__":` guard), with the parent's
  `sys.path`, environment and `OTEL_SDK_DISABLED=true` (the child exports nothing itself);
- fed over its stdin, by a writer thread, with length-prefixed pickles: each scorer once, then
  jobs; results and failures come back over a copy of its stdout, read by a reader thread
  (stdout itself goes to stderr, and whatever came before the channel's sync marker is skipped);
- gone when the parent is: it exits at EOF on its stdin;
- at a lower CPU priority (niceness +10 on Unix): on a busy host the agent's process gets the
  cores first, and the scoring process (litellm's import, request building, reply parsing)
  the rest.

`isolation="process"` sends every scorer there; `"thread"` starts no process. Whatever the
mode, a scorer that cannot be pickled or loaded there (or is defined in `__main__`), a job whose
data cannot be, and every job once the process cannot start (three tries) run in the worker
thread instead (logged once per scorer and cause). A child that dies after starting fails its
pending runs; the next job starts a new one.

(About 560 lines: the parent's `ProcessRunner` and the child's `_child_main` speak the one framed
protocol defined here; apart, each half would import the other's.)
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import warnings
import weakref
from collections.abc import Sequence
from typing import IO, Any

from tracescore._exceptions import TracescoreError
from tracescore._guard import Guard
from tracescore.scoring._base import ScorerInput, ToolCall, evaluate_call
from tracescore.scoring._judge_trace import adopted, carry, recording

_log = logging.getLogger("tracescore")

ISOLATIONS = ("auto", "process", "thread")
_HEADER = struct.Struct("!I")
# The channel is a copy of stdout taken before any import; stdout itself then goes to stderr.
# `-c` puts the working directory first on sys.path: dropped, so the child imports what the
# parent did (its path comes in PYTHONPATH), not a `tracescore` or `litellm` folder where it runs.
_CHILD_CODE = ("import sys; sys.path[:] = [p for p in sys.path if p]; "
               "import os; channel = os.dup(1); os.dup2(2, 1); "
               "from tracescore.online._isolation import _child_main; _child_main(channel)")
_SYNC = b"\x00tracescore-scoring-channel\x00"  # the first bytes of the child's frames
_MAX_PREAMBLE = 1 << 20  # bytes the interpreter may print before that (site hooks)
_NICE = 10  # the scoring process's CPU priority below the agent's (Unix niceness increment)
_START_ATTEMPTS = 3  # children that die before they are ready, before we stop trying
_runners: weakref.WeakSet[ProcessRunner] = weakref.WeakSet()
_forked_away: list[_Child] = []  # a forked child's copies of the parent's pipes, kept from GC


class _Unavailable(Exception):
    """The scoring process cannot run this job: it runs in the worker thread instead.

    `kind` ("scorer", "data" or "start") says what stood in the way; warnings are logged once
    per scorer and kind (reasons quote exception texts, which can differ on every job).
    """

    def __init__(self, reason: str, kind: str) -> None:
        super().__init__(reason)
        self.kind = kind


# --- framing -------------------------------------------------------------------------------------
def _frame(message: tuple[Any, ...]) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


def _skip_preamble(stream: IO[bytes]) -> bool:
    """Skip what the child's interpreter printed before its channel opened; False at EOF."""
    tail, skipped = b"", 0
    while tail != _SYNC:
        byte = stream.read(1)
        skipped += 1
        if not byte or skipped > _MAX_PREAMBLE + len(_SYNC):
            return False
        tail = (tail + byte)[-len(_SYNC):]
    return True


def _read_frame(stream: IO[bytes]) -> Any:
    """The next message, or None at EOF (a truncated frame is EOF too)."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)


# --- the parent side -----------------------------------------------------------------------------
class _Child:
    """One running scoring process: its pipes, the scorers it has been sent, and the thread
    that writes to it (a child that stops reading then stalls that thread, never the worker)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.keys: set[int] = set()
        self.ready = False
        self._lock = threading.Lock()
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        threading.Thread(target=self._write, name="tracescore-scoring-writer",
                         daemon=True).start()

    def send(self, key: int, registration: bytes, job: bytes) -> None:
        with self._lock:  # a scorer must reach the child before its first job
            self._outbox.put(job if key in self.keys else registration + job)
            self.keys.add(key)

    def close_input(self) -> None:
        """EOF for the child, once what was sent before is written."""
        self._outbox.put(None)

    def _write(self) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        while (frame := self._outbox.get()) is not None:
            try:
                stdin.write(frame)
                stdin.flush()
            except (OSError, ValueError):  # the child is gone: the reader fails its runs
                break
        with contextlib.suppress(OSError, ValueError):
            stdin.close()


class ProcessRunner:
    """Runs scorers in a lazily started scoring process, per the isolation mode."""

    def __init__(self, mode: str) -> None:
        self._mode = mode
        self._ids = itertools.count()
        self._keys = itertools.count()
        self.in_thread = 0  # runs meant for the scoring process that ran in the worker thread
        self._reset()
        _runners.add(self)

    @property
    def mode(self) -> str:
        """"auto" or "process" (a "thread" runner is never built)."""
        return self._mode

    def _reset(self) -> None:
        """(Re)initialize all state; used at construction and in a forked child."""
        self._lock = threading.Lock()
        self._child: _Child | None = None
        # scorer id -> (scorer, key, registration frame), or (scorer, None, reason) for the thread
        self._routes: dict[int, tuple[Any, int | None, Any]] = {}
        # job id -> (worker loop, future, the child running it)
        self._pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], _Child]] = {}
        self._stopped = False
        self._broken: str | None = None  # why no scoring process can be started here
        self._failed_starts = 0  # children in a row that died before they were ready
        self._guard = Guard(_log)  # warns once per scorer and cause

    @property
    def child_pid(self) -> int | None:
        """The pid of the running scoring process, if any."""
        child = self._child
        return child.process.pid if child is not None else None

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The running scoring process, if any."""
        child = self._child
        return child.process if child is not None else None

    @property
    def awaiting(self) -> int:
        """Runs sent to the scoring process and not answered yet."""
        return len(self._pending)

    @property
    def broken(self) -> str | None:
        """Why no scoring process can be started here any more (None while one can)."""
        return self._broken

    async def run(self, scorer: Any, *, input: Any, output: Any, ground_truth: Any, run_id: str,
                  timeout_s: float, tool_calls: Sequence[ToolCall] = (),
                  context: Sequence[str] = (), run: Any = None) -> Any:
        """The scorer's result (or its exception), computed in the scoring process when it is
        meant to run there and can. `tool_calls` / `context` reach a scorer that takes them;
        `run`: a run-scope scorer's run."""
        call = ScorerInput(input=input, output=output, ground_truth=ground_truth, run_id=run_id,
                           tool_calls=tuple(tool_calls), context=tuple(context), run=run)
        key, registration = self._route(scorer)
        if key is None:
            if registration is not None:  # meant for the process, cannot go there
                return await self._in_thread(scorer, _Unavailable(registration, "scorer"), call)
            return await evaluate_call(scorer, call)
        job_id = next(self._ids)
        try:
            data = pickle.dumps((input, output, ground_truth, run_id, timeout_s,
                                 tuple(tool_calls), tuple(context), run),
                                protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - e.g. a lock or a lambda in the input
            return await self._in_thread(scorer, _Unavailable(
                f"a job's data cannot be pickled ({type(exc).__name__}: {exc})", "data"), call)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            if self._stopped:
                raise TracescoreError("the scoring process is stopped (processor shut down)")
            child = self._ensure_started_locked()
            if child is not None:
                self._pending[job_id] = (loop, future, child)
        if child is None:
            return await self._in_thread(scorer, _Unavailable(str(self._broken), "start"), call)
        try:
            child.send(key, registration, _frame(("job", job_id, key, data)))
            return await adopted(future)  # settled by the reader, also when the child dies
        except _Unavailable as exc:
            return await self._in_thread(scorer, exc, call)
        finally:
            with self._lock:
                self._pending.pop(job_id, None)

    def _route(self, scorer: Any) -> tuple[int | None, Any]:
        """(key, registration frame) for the process, (None, reason) when it cannot go there,
        (None, None) when it is not meant to."""
        route = self._routes.get(id(scorer))
        if route is None or route[0] is not scorer:
            route = (scorer, *self._decide(scorer))
            self._routes[id(scorer)] = route  # keeps the scorer alive: its id stays its own
        return route[1], route[2]

    def _decide(self, scorer: Any) -> tuple[int | None, Any]:
        if self._mode == "thread" or (self._mode == "auto"
                                      and getattr(scorer, "uses_judge", False) is not True):
            return None, None
        if type(scorer).__module__ == "__main__":
            return None, "its class is defined in __main__, which the scoring process cannot import"
        try:
            blob = pickle.dumps(scorer, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - pickling raises anything: run in the thread
            return None, f"it cannot be pickled ({type(exc).__name__}: {exc})"
        key = next(self._keys)
        return key, _frame(("scorer", key, blob))

    async def _in_thread(self, scorer: Any, why: _Unavailable, call: ScorerInput) -> Any:
        self.in_thread += 1
        name = getattr(scorer, "id", type(scorer).__name__)
        self._guard.once(f"{name}:{why.kind}", "tracescore: scorer %r runs in the worker thread, "
                        "not in the scoring process: %s", name, why)
        return await evaluate_call(scorer, call)

    def _ensure_started_locked(self) -> _Child | None:
        if self._broken is not None:
            return None
        child = self._child
        if child is not None and child.process.poll() is None:
            return child
        self._child = None
        if getattr(sys, "frozen", False) or not sys.executable:
            self._broken = "this interpreter cannot start a Python subprocess (frozen or embedded)"
            return None
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", _CHILD_CODE], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, env=_child_env(), close_fds=True)
        except (OSError, ValueError) as exc:
            self._broken = f"the scoring process could not start ({type(exc).__name__}: {exc})"
            return None
        child = self._child = _Child(process)
        threading.Thread(target=self._read, args=(child,), name="tracescore-scoring-reader",
                         daemon=True).start()
        return child

    def _read(self, child: _Child) -> None:
        """Reader thread of one child: settle futures as results arrive; the rest at EOF."""
        stdout = child.process.stdout
        assert stdout is not None
        synced = _skip_preamble(stdout)
        while synced:
            try:
                message = _read_frame(stdout)
            except (OSError, ValueError):
                break
            except Exception:  # noqa: BLE001 - a garbled result; its run times out
                _log.warning("tracescore: unreadable message from the scoring process",
                             exc_info=True)
                continue
            if message is None:
                break
            kind = message[0]
            if kind == "ready":
                child.ready = True
                self._failed_starts = 0
            elif kind == "done":
                self._settle(message[1], *_decode(message[2:]))
            elif kind == "unavailable":
                self._settle(message[1], False, _Unavailable(message[2], message[3]))
        try:
            stdout.close()
        except OSError:
            pass
        try:
            code = child.process.wait(1.0)
        except subprocess.TimeoutExpired:  # alive, but its channel is unusable (no sync marker)
            child.process.kill()
            code = child.process.wait()
        with self._lock:
            if self._child is child:
                self._child = None
            if not child.ready and not self._stopped:
                self._failed_starts += 1
                if self._failed_starts >= _START_ATTEMPTS:
                    self._broken = (f"the scoring process exited while starting, {_START_ATTEMPTS}"
                                    f" times (last exit code {code}); see its messages on stderr")
            lost = [job for job, entry in self._pending.items() if entry[2] is child]
        if self._stopped:
            error: Exception = TracescoreError("the scoring process was stopped (shutdown)")
        elif not child.ready:
            error = _Unavailable(self._broken or "the scoring process could not start", "start")
        else:
            error = TracescoreError(
                f"the scoring process exited (exit code {code}) before this run finished")
        for job_id in lost:
            self._settle(job_id, False, error)

    def _settle(self, job_id: int, ok: bool, value: Any) -> None:
        with self._lock:
            entry = self._pending.pop(job_id, None)
        if entry is None:
            return
        loop, future, _ = entry
        try:
            loop.call_soon_threadsafe(_resolve, future, ok, value)
        except RuntimeError:  # the worker's loop is closed (shutdown)
            pass

    def stop(self, timeout: float) -> None:
        """Stop the child: EOF on its stdin, then terminate and kill if it lingers. Idempotent."""
        with self._lock:
            self._stopped = True
            child, self._child = self._child, None
        if child is None:
            return
        child.close_input()
        process = child.process
        for end in (None, process.terminate, process.kill):  # a child that reads nothing (stopped,
            if end is not None:  # or its GIL held) gets no EOF: it is ended, which frees our writer
                end()
            try:
                process.wait(timeout if end is None else 1.0)
                return
            except subprocess.TimeoutExpired:
                continue

    def _after_fork(self) -> None:
        # The child process and the reader thread belong to the parent: drop our copies of its
        # pipes (or it would not see EOF when the parent goes) and start afresh.
        # Their buffered objects may hold locks of parent threads: close the raw files under
        # them (closed for good, so nothing closes those numbers again) and keep them forever.
        child = self._child
        if child is not None:
            _forked_away.append(child)
            for stream in (child.process.stdin, child.process.stdout):
                try:
                    if stream is not None:
                        stream.raw.close()  # type: ignore[attr-defined]
                except (OSError, ValueError, AttributeError):
                    pass
        self._reset()


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    # the parent's "" (its working directory, for `python -c` or a REPL) as the directory itself
    env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path if isinstance(p, str))
    env["OTEL_SDK_DISABLED"] = "true"
    return env


def _resolve(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


def _decode(fields: tuple[Any, ...]) -> tuple[bool, Any]:
    ok, value, type_name, text = fields
    if ok:
        try:
            return True, pickle.loads(value)
        except Exception as exc:  # noqa: BLE001 - must not kill the reader: it serves every run
            return False, TracescoreError(
                f"the scorer's result cannot be loaded: {type(exc).__name__}: {exc}")
    try:
        cls, args, state = pickle.loads(value)
        error = cls.__new__(cls)  # not cls(*args): some __init__ take keyword-only arguments
        error.args = args
        error.__dict__.update(state)
    except Exception:  # noqa: BLE001 - a class the parent cannot import or rebuild
        error = TracescoreError(f"{type_name}: {text}")
    return False, error


# --- the child process ------------------------------------------------------------------------------
def _child_main(channel_fd: int) -> None:
    """Entry point of the scoring process: run jobs until its stdin closes. Frames go to
    `channel_fd`; fd 1 is stderr by now, so stray prints (litellm's banners) stay out."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _yield_cpu()
    channel = os.fdopen(channel_fd, "wb")
    try:
        asyncio.run(_serve(sys.stdin.buffer, channel))
    finally:
        sys.stderr.flush()
        os._exit(0)  # litellm's and httpx's threads need no waiting for


def _yield_cpu() -> None:
    """Lower this process's CPU priority: when cores are scarce, the agents' processes run
    first and scoring (litellm's import and request work included) takes what is left."""
    try:
        os.nice(_NICE)
    except (AttributeError, OSError):  # no nice (Windows) or not allowed: normal priority
        pass


async def _serve(requests: IO[bytes], channel: IO[bytes]) -> None:
    loop = asyncio.get_running_loop()
    scorers: dict[int, Any] = {}
    closed = asyncio.Event()
    tasks: set[asyncio.Task[None]] = set()  # a run ends by itself at its timeout, or at EOF
    send_lock = threading.Lock()

    def send(message: tuple[Any, ...]) -> None:
        try:
            with send_lock:
                channel.write(_frame(message))
                channel.flush()
        except (OSError, ValueError):  # the parent is gone
            loop.call_soon_threadsafe(closed.set)

    def read() -> None:
        while True:
            try:
                message = _read_frame(requests)
            except Exception:  # noqa: BLE001 - a broken channel ends the process
                message = None
            if message is None:
                loop.call_soon_threadsafe(closed.set)
                return
            loop.call_soon_threadsafe(handle, message)

    def handle(message: tuple[Any, ...]) -> None:
        if message[0] == "scorer":
            _, key, blob = message
            try:
                scorers[key] = pickle.loads(blob)
            except Exception as exc:  # noqa: BLE001 - e.g. a class only the parent can import
                scorers[key] = _Unavailable(
                    f"the scoring process cannot load it ({type(exc).__name__}: {exc})", "scorer")
            return
        task = loop.create_task(_run_job(scorers, message, send))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    channel.write(_SYNC)
    send(("ready", os.getpid()))
    threading.Thread(target=read, name="tracescore-scoring-jobs", daemon=True).start()
    await closed.wait()
    # Runs cut short leave litellm coroutines and tasks behind; their complaints at teardown
    # would land on the user's stderr and mean nothing there.
    warnings.simplefilter("ignore")
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    for task in list(tasks):
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _run_job(scorers: dict[int, Any], message: tuple[Any, ...], send: Any) -> None:
    from tracescore._suppress import suppressed

    _, job_id, key, data = message
    scorer = scorers.get(key)
    try:
        input, output, ground_truth, run_id, timeout_s, tool_calls, context, run = \
            pickle.loads(data)
    except Exception as exc:  # noqa: BLE001 - e.g. an input of a class defined in __main__
        scorer = _Unavailable(f"a job's data cannot be loaded ({type(exc).__name__}: {exc})",
                              "data")
    if scorer is None:
        scorer = _Unavailable("the scorer never reached the scoring process", "scorer")
    if isinstance(scorer, _Unavailable):
        send(("unavailable", job_id, str(scorer), scorer.kind))
        return
    calls = None  # the judge's calls travel back with the result (`_judge_trace`)
    try:
        with suppressed(), recording() as calls:
            result = await asyncio.wait_for(
                evaluate_call(scorer, ScorerInput(
                    input=input, output=output, ground_truth=ground_truth, run_id=run_id,
                    tool_calls=tuple(tool_calls), context=tuple(context), run=run)),
                timeout_s)
        reply = _encode_result(job_id, carry(result, calls))
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - failures travel back as data
        reply = _encode_error(job_id, carry(exc, calls))
    send(reply)


def _encode_result(job_id: int, result: Any) -> tuple[Any, ...]:
    try:
        return ("done", job_id, True, pickle.dumps(result), "", "")
    except Exception as exc:  # noqa: BLE001 - pickling raises anything: sent as an error
        return _encode_error(job_id, TracescoreError(
            f"the scorer's result cannot be pickled: {type(exc).__name__}: {exc}"))


def _encode_error(job_id: int, error: BaseException) -> tuple[Any, ...]:
    type_name, text = type(error).__qualname__, _message(error)
    try:
        blob = pickle.dumps((type(error), error.args, dict(getattr(error, "__dict__", {}))))
    except Exception:  # noqa: BLE001 - sent as type name + message instead
        blob = b""
    return ("done", job_id, False, blob, type_name, text)


def _message(error: BaseException) -> str:
    try:
        return str(error) or type(error).__name__
    except Exception:  # noqa: BLE001 - a broken __str__: the type's name instead
        return type(error).__name__


def _after_fork_in_child() -> None:
    for runner in list(_runners):
        runner._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
