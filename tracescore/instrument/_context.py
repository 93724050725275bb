"""Carry the caller's tracing context into threads and executors.

Threads start with an empty context, so spans made there would start new traces. Wrap the
callable with `propagate_context` (or submit through `ContextThreadPoolExecutor`) and the
spans it makes nest under the span that was current when it was wrapped/submitted.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

__all__ = ["ContextThreadPoolExecutor", "propagate_context"]

P = ParamSpec("P")
R = TypeVar("R")


def propagate_context(fn: Callable[P, R]) -> Callable[P, R]:
    """Return `fn` bound to the current context (OTel span, baggage, ground truth, …).

    The context is captured now, when `propagate_context` is called; each call of the result
    runs `fn` in a fresh copy of it, so the wrapper may run many times, concurrently, in any
    thread. Meant for sync callables handed to threads and executors (asyncio tasks already
    inherit the context).
    """
    captured = contextvars.copy_context()

    @functools.wraps(fn)
    def run_in_context(*args: P.args, **kwargs: P.kwargs) -> R:
        return captured.copy().run(fn, *args, **kwargs)

    return run_in_context


class ContextThreadPoolExecutor(ThreadPoolExecutor):
    """A `ThreadPoolExecutor` whose tasks run in the context of the code that submitted them.

    `submit`, `map` and `loop.run_in_executor(executor, …)` all carry the context, so spans
    made by the tasks are children of the span current at submission.
    """

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        return super().submit(propagate_context(fn), *args, **kwargs)
