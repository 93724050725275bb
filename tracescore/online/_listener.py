"""`LISTENERS`: the one agent-call listener all in-process scoring processors share.

`@agent` hands each finished call to the listener (`tracescore.instrument._calls`) when its
filter (`wants_call`, run as the agent span starts: cheap, no I/O) says some live processor may
sample it; the listener passes the call to each live processor's `_consider`. Processors are
held by weak reference (one dropped without shutdown does not stay alive because of us) in a
tuple (iterating it on the hot path is cheap; a WeakSet is not). In a forked child every live
processor's `_after_fork` runs.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace as trace_api

from tracescore import _semconv as sc
from tracescore._guard import GUARD
from tracescore.instrument._calls import (
    AgentCall,
    add_agent_call_listener,
    remove_agent_call_listener,
)
from tracescore.online._sampling import RANDOMNESS_MASK

_CONSIDER = GUARD.site("consider", "tracescore: online scoring could not consider an agent "
                       "call")  # the other processors still do
_NEVER = 1 << 56  # above every trace's randomness


class _Processor(Protocol):
    """The hooks a processor gives the listener."""

    _min_threshold: int

    def _consider(self, call: AgentCall) -> None: ...

    def _after_fork(self) -> None: ...


class Listeners:
    """The live processors and the shared listener's callbacks."""

    def __init__(self) -> None:
        self._active: tuple[weakref.ref[Any], ...] = ()
        self._lock = threading.Lock()
        # (the `_active` it was computed for, the lowest sampling threshold of its processors)
        self._lowest: tuple[tuple[weakref.ref[Any], ...], int] = ((), _NEVER)

    def live(self) -> list[Any]:
        """The processors registered and still alive, oldest first."""
        return [p for p in (ref() for ref in self._active) if p is not None]

    def register(self, processor: _Processor) -> None:
        with self._lock:
            self._active = (*(weakref.ref(p) for p in self.live() if p is not processor),
                            weakref.ref(processor))
        add_agent_call_listener(self.on_agent_call, self.wants_call)

    def unregister(self, processor: _Processor) -> None:
        with self._lock:
            self._active = tuple(weakref.ref(p) for p in self.live() if p is not processor)
            if not self._active:
                remove_agent_call_listener(self.on_agent_call)

    def only(self, processor: _Processor | None) -> None:
        """Route agent calls to `processor` alone (None: to nobody), e.g. for a benchmark."""
        with self._lock:
            self._active = () if processor is None else (weakref.ref(processor),)
        if processor is None:
            remove_agent_call_listener(self.on_agent_call)
        else:
            add_agent_call_listener(self.on_agent_call, self.wants_call)

    def wants_call(self, span: trace_api.Span) -> bool:
        """Filter of the shared listener, run when an agent span starts (cheap, no I/O): could
        any processor sample this call? Calls made inside `run_evals` are left to the eval."""
        active, lowest = self._lowest
        if active is not self._active:
            active = self._active
            lowest = min((p._min_threshold for p in self.live()), default=_NEVER)
            self._lowest = (active, lowest)
        context = span.get_span_context()
        return bool(
            context.trace_flags & 1  # not sampled by the tracer: never scored
            and context.trace_id & RANDOMNESS_MASK >= lowest
            and otel_context.get_value(sc.CTX_EVAL_RUN_ID) is None
        )

    def on_agent_call(self, call: AgentCall) -> None:
        for ref in self._active:
            processor = ref()
            if processor is None:
                continue
            with _CONSIDER:
                processor._consider(call)

    def after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        for processor in self.live():
            processor._after_fork()


LISTENERS = Listeners()

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=LISTENERS.after_fork_in_child)
