"""Opt-in process isolation of online scoring (`ScoringSpanProcessor(isolation="process")`).

Scorer runs go to ONE spawned daemon child with its own asyncio loop, so the judge's CPU work
(litellm) holds the child's GIL, not the agent's. Jobs and results travel pickled over a pipe;
a reader thread in the parent settles the awaiting futures. A job that cannot be pickled runs
in-thread instead; a dead child fails its pending runs and is restarted by the next job.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import threading
import weakref
from multiprocessing.connection import Connection
from typing import Any

from tracescore._exceptions import TracescoreError

_log = logging.getLogger("tracescore")

ISOLATIONS = ("thread", "process")
_STOP = b""  # parent -> child: finish (running jobs are cancelled)
_runners: weakref.WeakSet[ProcessRunner] = weakref.WeakSet()


class ProcessRunner:
    """Runs `scorer.arun(...)` in one lazily spawned child process, `concurrency` runs at once."""

    def __init__(self, concurrency: int) -> None:
        self._concurrency = concurrency
        self._ids = itertools.count()
        self.in_thread = 0  # runs whose payload could not be pickled (ran in the worker thread)
        self._reset()
        _runners.add(self)

    def _reset(self) -> None:
        """(Re)initialize all state; used at construction and in a forked child."""
        self._lock = threading.Lock()
        # multiprocessing.Process is not thread-safe: two threads reaping one child can make
        # is_alive() report a dead child as alive. Every is_alive/join/exitcode goes under this.
        self._reap_lock = threading.Lock()
        self._process: Any = None
        self._conn: Connection | None = None
        # job id -> (worker loop, future, the child running it)
        self._pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Any]] = {}
        self._stopped = False
        self._warned_pickle = False

    async def run(self, scorer: Any, *, input: Any, output: Any, ground_truth: Any, run_id: str,
                  timeout_s: float) -> Any:
        """The scorer's result (or its exception), computed in the child when possible."""
        job_id = next(self._ids)
        try:
            payload = pickle.dumps((job_id, scorer, input, output, ground_truth, run_id, timeout_s),
                                   protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - e.g. a lock or a lambda in the input
            return await self._in_thread(scorer, exc, input=input, output=output,
                                         ground_truth=ground_truth, run_id=run_id)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            if self._stopped:
                raise TracescoreError("the scoring process is stopped (processor shut down)")
            conn = self._ensure_started_locked()
            self._pending[job_id] = (loop, future, self._process)
        try:
            try:
                conn.send_bytes(payload)
            except (OSError, ValueError) as exc:  # the child died since the last job
                raise TracescoreError(f"could not send the job to the scoring process: {exc}") from None
            return await future
        finally:
            with self._lock:
                self._pending.pop(job_id, None)

    async def _in_thread(self, scorer: Any, reason: BaseException, **kwargs: Any) -> Any:
        self.in_thread += 1
        if not self._warned_pickle:
            self._warned_pickle = True
            _log.warning("tracescore: a scoring job cannot be pickled for the scoring process "
                         "(%s: %s); such jobs run in the worker thread", type(reason).__name__,
                         reason)
        return await scorer.arun(**kwargs)

    def _ensure_started_locked(self) -> Connection:
        if self._process is not None and self._conn is not None:
            with self._reap_lock:
                if self._process.is_alive():
                    return self._conn
        self._discard_locked()
        ctx = multiprocessing.get_context("spawn")
        parent_end, child_end = ctx.Pipe(duplex=True)
        process = ctx.Process(target=_child_main, args=(child_end, self._concurrency),
                              name="tracescore-scoring", daemon=True)
        process.start()
        child_end.close()  # only the child holds it now: its death means EOF for our reader
        self._process, self._conn = process, parent_end
        threading.Thread(target=self._read, args=(parent_end, process),
                         name="tracescore-scoring-reader", daemon=True).start()
        return parent_end

    def _discard_locked(self) -> None:
        # The reader closes the pipe once the child is gone (closing it under a blocked read
        # would not wake the child up).
        self._process, self._conn = None, None

    def _read(self, conn: Connection, process: Any) -> None:
        """Reader thread of one child: settle futures as results arrive; fail the rest at EOF."""
        while True:
            try:
                message = conn.recv_bytes()
            except (EOFError, OSError):
                break
            try:
                job_id, ok, value = _decode(message)
            except Exception:  # noqa: BLE001 - a garbled message; its run times out
                _log.warning("tracescore: unreadable message from the scoring process",
                             exc_info=True)
                continue
            self._settle(job_id, ok, value)
        conn.close()
        multiprocessing.connection.wait([process.sentinel], 1.0)
        with self._reap_lock:
            code = process.exitcode
        with self._lock:
            if self._process is process:
                self._discard_locked()
            lost = [job for job, entry in self._pending.items() if entry[2] is process]
        for job_id in lost:
            self._settle(job_id, False, TracescoreError(
                f"the scoring process exited (exit code {code}) before this run finished"))

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
        """Stop the child: EOF on its pipe, then terminate and kill if it lingers. Idempotent."""
        with self._lock:
            self._stopped = True
            process, conn = self._process, self._conn
            self._discard_locked()
        if process is None:
            return
        try:
            if conn is not None:
                conn.send_bytes(_STOP)
        except (OSError, ValueError):  # already gone
            pass
        with self._reap_lock:
            process.join(timeout)
            if process.is_alive():
                process.terminate()
                process.join(1.0)
            if process.is_alive():
                process.kill()
                process.join(1.0)


def _resolve(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


def _decode(message: bytes) -> tuple[int, bool, Any]:
    job_id, ok, value, type_name, text = pickle.loads(message)
    if ok:
        return job_id, True, pickle.loads(value)
    try:
        cls, args, state = pickle.loads(value)
        error = cls.__new__(cls)  # not cls(*args): some __init__ take keyword-only arguments
        error.args = args
        error.__dict__.update(state)
    except Exception:  # noqa: BLE001 - a class the parent cannot import or rebuild
        error = TracescoreError(f"{type_name}: {text}")
    return job_id, False, error


# --- the child process ------------------------------------------------------------------------------
def _child_main(conn: Connection, concurrency: int) -> None:
    """Entry point of the scoring process: run jobs until the parent closes the pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    asyncio.run(_serve(conn, concurrency))


async def _serve(conn: Connection, concurrency: int) -> None:
    loop = asyncio.get_running_loop()
    slots = asyncio.Semaphore(concurrency)
    send_lock = threading.Lock()
    closed = asyncio.Event()
    tasks: set[asyncio.Task[None]] = set()

    def read() -> None:
        while True:
            try:
                message = conn.recv_bytes()
            except (EOFError, OSError):
                message = _STOP
            if message == _STOP:
                loop.call_soon_threadsafe(closed.set)
                return
            loop.call_soon_threadsafe(start, message)

    def start(message: bytes) -> None:
        task = loop.create_task(_run_job(conn, send_lock, slots, message))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    threading.Thread(target=read, name="tracescore-scoring-jobs", daemon=True).start()
    await closed.wait()
    for task in list(tasks):
        task.cancel()


async def _run_job(conn: Connection, send_lock: threading.Lock, slots: asyncio.Semaphore,
                   message: bytes) -> None:
    from tracescore._suppress import suppressed

    job_id = -1
    try:
        job_id, scorer, input, output, ground_truth, run_id, timeout_s = pickle.loads(message)
        async with slots:
            with suppressed():
                result = await asyncio.wait_for(
                    scorer.arun(input=input, output=output, ground_truth=ground_truth,
                                run_id=run_id), timeout_s)
        reply = _encode_result(job_id, result)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - failures travel back as data
        reply = _encode_error(job_id, exc)
    try:
        with send_lock:
            conn.send_bytes(reply)
    except (OSError, ValueError):  # the parent is gone
        pass


def _encode_result(job_id: int, result: Any) -> bytes:
    try:
        return pickle.dumps((job_id, True, pickle.dumps(result), "", ""))
    except Exception as exc:  # noqa: BLE001
        return _encode_error(job_id, TracescoreError(
            f"the scorer's result cannot be pickled: {type(exc).__name__}: {exc}"))


def _encode_error(job_id: int, error: BaseException) -> bytes:
    type_name, text = type(error).__qualname__, _message(error)
    try:
        blob = pickle.dumps((type(error), error.args, dict(getattr(error, "__dict__", {}))))
    except Exception:  # noqa: BLE001 - sent as type name + message instead
        blob = b""
    return pickle.dumps((job_id, False, blob, type_name, text))


def _message(error: BaseException) -> str:
    try:
        return str(error) or type(error).__name__
    except Exception:  # noqa: BLE001
        return type(error).__name__


def _after_fork_in_child() -> None:
    # The spawned child and its reader thread belong to the parent; this process starts its own.
    for runner in list(_runners):
        runner._reset()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
