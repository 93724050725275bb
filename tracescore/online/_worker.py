"""The background worker: one daemon thread with its own asyncio loop, a bounded queue of jobs
and a bounded number of jobs running at once.

`submit` never blocks and never raises: a full queue refuses the job (the caller counts it).
The thread starts lazily on the first job and again, fresh, in a forked child process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import queue
import threading
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

_log = logging.getLogger("tracescore")

Job = Callable[[], Awaitable[Any]]

_workers: weakref.WeakSet[Worker] = weakref.WeakSet()


class Worker:
    """Runs coroutine jobs in the background with a bounded queue and bounded concurrency."""

    def __init__(self, *, queue_size: int, concurrency: int, name: str = "tracescore-online",
                 tick_s: float | None = None, on_tick: Callable[[], None] | None = None) -> None:
        self._queue_size = queue_size
        self._concurrency = concurrency
        self._name = name
        self._tick_s = tick_s
        self._on_tick = on_tick
        self._reset()
        _workers.add(self)

    def _reset(self) -> None:
        """(Re)initialize all state; used at construction and in a forked child."""
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending: deque[Job] = deque()
        self._running = 0
        self._dispatch_waiting = True  # dispatcher is (or will be) asleep: wake it on submit
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._wake: asyncio.Event | None = None
        self._stopped = False
        self._stop_ticks = threading.Event()

    # --- producer side (any thread) ------------------------------------------------------------
    def submit(self, job: Job) -> bool:
        """Queue `job`; False when the queue is full or the worker is stopped. Never raises."""
        with self._lock:
            if self._stopped or len(self._pending) >= self._queue_size:
                return False
            self._pending.append(job)
            wake = self._dispatch_waiting
            self._dispatch_waiting = False
            loop = self._loop
            if self._thread is None:
                try:
                    loop = self._start_locked()
                except Exception:  # noqa: BLE001 - e.g. no new threads at interpreter exit
                    _log.warning("tracescore: could not start the online scoring worker",
                                 exc_info=True)
                    self._pending.pop()
                    self._dispatch_waiting, self._loop, self._thread = True, None, None
                    return False
        if wake and loop is not None:
            try:
                loop.call_soon_threadsafe(self._wake_up)
            except RuntimeError:  # loop closed underneath us (interpreter exit)
                return True
        return True

    def start(self) -> None:
        """Start the thread (and its timer) now rather than with the first job. Never raises."""
        with self._lock:
            if self._thread is not None or self._stopped:
                return
            try:
                self._start_locked()
            except Exception:  # noqa: BLE001 - e.g. no new threads at interpreter exit
                _log.warning("tracescore: could not start the online scoring worker",
                             exc_info=True)
                self._loop, self._thread = None, None

    @property
    def pending(self) -> int:
        """Jobs queued and not yet started."""
        return len(self._pending)

    @property
    def running(self) -> int:
        """Jobs currently running."""
        return self._running

    def wait_idle(self, timeout: float) -> bool:
        """Block until no job is queued or running, at most `timeout` seconds."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._idle:
            while self._pending or self._running:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._thread is None or not self._thread.is_alive():
                    return not (self._pending or self._running)
                self._idle.wait(min(remaining, 0.1))
            return True

    def stop(self, timeout: float = 5.0) -> list[Job]:
        """Stop accepting jobs, cancel running ones, stop the thread. Returns the jobs never run."""
        with self._lock:
            self._stopped = True
            discarded = list(self._pending)
            self._pending.clear()
            loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            try:
                loop.call_soon_threadsafe(self._cancel_all)
            except RuntimeError:
                pass
            if thread is not threading.current_thread():
                thread.join(timeout)
        self._stop_ticks.set()
        return discarded

    # --- loop side --------------------------------------------------------------------------------
    def _start_locked(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.new_event_loop()
        self._loop = loop
        started = threading.Event()
        self._thread = threading.Thread(
            target=self._thread_main, args=(loop, started), name=self._name, daemon=True
        )
        self._thread.start()
        started.wait()
        if self._on_tick is not None:  # a thread of its own: timers fire even if a job blocks the loop
            threading.Thread(target=self._tick_main, args=(self._stop_ticks,),
                             name=f"{self._name}-timer", daemon=True).start()
        return loop

    def _thread_main(self, loop: asyncio.AbstractEventLoop, started: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.set_default_executor(_ExitSafeExecutor(thread_name_prefix=f"{self._name}-io"))
        self._wake = asyncio.Event()
        self._main_task = loop.create_task(self._dispatch())
        started.set()
        try:
            loop.run_until_complete(self._main_task)
        except asyncio.CancelledError:  # stop() cancelled the dispatcher
            pass
        except BaseException:  # noqa: BLE001 - a bug here must not propagate into the thread
            _log.exception("tracescore: online scoring worker stopped unexpectedly")
        finally:
            try:
                tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
                for task in tasks:
                    task.cancel()
                if tasks:
                    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
            except BaseException:  # noqa: BLE001 - cleanup is best effort; the loop still closes
                _log.debug("tracescore: online worker cleanup failed", exc_info=True)
            loop.close()
            with self._idle:
                self._running = 0
                self._idle.notify_all()

    def _wake_up(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _cancel_all(self) -> None:
        self._main_task.cancel()

    async def _dispatch(self) -> None:
        slots = asyncio.Semaphore(self._concurrency)
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            while True:
                await slots.acquire()
                with self._lock:
                    job = self._pending.popleft() if self._pending else None
                    if job is None:
                        self._dispatch_waiting = True
                    else:
                        self._running += 1
                if job is None:
                    slots.release()
                    break
                asyncio.get_running_loop().create_task(self._run(job, slots))

    async def _run(self, job: Job, slots: asyncio.Semaphore) -> None:
        try:
            await job()
        except asyncio.CancelledError:
            pass
        except BaseException:  # noqa: BLE001 - a job must never kill the worker
            _log.exception("tracescore: online scoring job failed")
        finally:
            slots.release()
            with self._idle:
                self._running -= 1
                if not self._running and not self._pending:
                    self._idle.notify_all()

    def _tick_main(self, stop: threading.Event) -> None:
        assert self._on_tick is not None and self._tick_s is not None
        while not stop.wait(self._tick_s):
            try:
                self._on_tick()
            except Exception:  # noqa: BLE001 - a failing tick must not stop the timer
                _log.exception("tracescore: online scoring timer failed")


class _ExitSafeExecutor(concurrent.futures.ThreadPoolExecutor):
    """The loop's default executor (asyncio resolves host names in it). Once the interpreter
    starts exiting, stdlib pools refuse new work (and new threads may be refused too); scoring
    that shutdown waits for would then fail on its judge's DNS lookup. Such calls go to a spare
    thread started up front instead."""

    def __init__(self, thread_name_prefix: str) -> None:
        super().__init__(thread_name_prefix=thread_name_prefix)
        self._spare: queue.SimpleQueue[Any] = queue.SimpleQueue()
        threading.Thread(target=self._serve_spare, name=f"{thread_name_prefix}-spare",
                         daemon=True).start()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
               ) -> concurrent.futures.Future[Any]:
        try:
            return super().submit(fn, *args, **kwargs)
        except RuntimeError:  # "cannot schedule new futures after (interpreter) shutdown"
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            self._spare.put((future, fn, args, kwargs))
            return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._spare.put(None)
        super().shutdown(wait, cancel_futures=cancel_futures)

    def _serve_spare(self) -> None:
        while (item := self._spare.get()) is not None:
            future, fn, args, kwargs = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                future.set_exception(exc)
            else:
                future.set_result(result)


def _after_fork_in_child() -> None:
    # The parent's thread does not exist here; its jobs stay the parent's business.
    for worker in list(_workers):
        worker._reset()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
