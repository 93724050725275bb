"""Hand-off of finished agent calls (the real in-process input and output) to listeners.

Decorated agents and `instrument_agent` call `notify_agent_call` just before their span ends.
Online scoring registers a listener; instrumentation itself knows nothing of scoring.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import Span

_log = logging.getLogger("tracescore")

_UNSET: Any = object()


class _Slot:
    """Ground-truth slot of one agent call (`set_ground_truth` writes into it) or of a
    `ground_truth()` block (read-only: calls inside inherit it); also the context texts that
    `add_context` gave the call, and the slot of the agent call it runs inside."""

    __slots__ = ("context", "outer", "tools", "value", "writable")

    def __init__(self, value: Any = _UNSET, writable: bool = True,
                 outer: _Slot | None = None) -> None:
        self.value = value
        self.writable = writable
        self.outer = outer
        self.context: list[tuple[int, str]] | None = None
        self.tools: dict[int, dict[str, str]] | None = None


_slot: contextvars.ContextVar[_Slot | None] = contextvars.ContextVar(
    "tracescore_ground_truth", default=None
)


@dataclass(slots=True)
class AgentCall:
    """One finished agent invocation, as seen in-process (before its span ends)."""

    span: Span
    name: str
    input: Any
    output: Any
    error: BaseException | None = None
    ground_truth: Any = None
    conversation_id: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    context: tuple[tuple[int, str], ...] = ()  # (time ns, text) given by `add_context`
    # recorded attributes of the tool spans run inside the call that content capture kept off
    # the spans (never exported), by span id: in-process scorers still get them
    tool_content: Mapping[int, Mapping[str, str]] = field(default_factory=dict)


AgentCallListener = Callable[[AgentCall], None]
AgentCallFilter = Callable[[Span], bool]
_entries: tuple[tuple[AgentCallListener, AgentCallFilter | None], ...] = ()
_entries_lock = threading.Lock()  # writers only: readers see one consistent tuple or the next
_listeners: tuple[AgentCallListener, ...] = ()
_NOBODY: tuple[AgentCallListener, ...] = ()


def _nobody(span: Span) -> tuple[AgentCallListener, ...]:
    return _NOBODY


# Who wants the call of a just-started agent span: rebuilt whenever listeners change, so the
# common cases (nobody; everybody; one filtered listener) cost one function call.
_interested: Callable[[Span], tuple[AgentCallListener, ...]] = _nobody


def _rebuild() -> None:
    global _interested, _listeners
    entries = _entries
    _listeners = tuple(listener for listener, _wants in entries)
    if not entries:
        _interested = _nobody
    elif all(wants is None for _listener, wants in entries):
        everybody = _listeners

        def _all(span: Span) -> tuple[AgentCallListener, ...]:
            return everybody

        _interested = _all
    elif len(entries) == 1:
        only = _listeners
        wants = entries[0][1]
        assert wants is not None

        def _one(span: Span) -> tuple[AgentCallListener, ...]:
            try:
                return only if wants(span) else _NOBODY
            except Exception:  # noqa: BLE001 - a broken filter skips, never raises
                _log.exception("tracescore: agent call filter %r failed", wants)
                return _NOBODY

        _interested = _one
    else:

        def _some(span: Span) -> tuple[AgentCallListener, ...]:
            return tuple(listener for listener, wants in entries if _wanted(wants, span))

        _interested = _some


def _wanted(wants: AgentCallFilter | None, span: Span) -> bool:
    if wants is None:
        return True
    try:
        return bool(wants(span))
    except Exception:  # noqa: BLE001 - a broken filter skips, never raises
        _log.exception("tracescore: agent call filter %r failed", wants)
        return False


def add_agent_call_listener(
    listener: AgentCallListener, wants: AgentCallFilter | None = None
) -> None:
    """Register `listener` to receive finished agent calls (idempotent).

    `wants(span) -> bool`, if given, runs when an agent span starts (in the caller's context)
    and says whether this listener wants that call; when no listener wants it, the caller
    builds no `AgentCall` at all. It must be cheap and must not block.
    Registering the same listener again replaces its filter.
    """
    global _entries
    with _entries_lock:
        _entries = (*((x, w) for x, w in _entries if x != listener), (listener, wants))
        _rebuild()


def remove_agent_call_listener(listener: AgentCallListener) -> None:
    """Unregister `listener` (compared by equality, so bound methods work); unknown ones are ignored."""
    global _entries
    with _entries_lock:
        _entries = tuple((x, w) for x, w in _entries if x != listener)
        _rebuild()


def has_agent_call_listeners() -> bool:
    """True when somebody listens (whatever their filters say)."""
    return bool(_listeners)


def agent_call_listeners(span: Span) -> tuple[AgentCallListener, ...]:
    """The listeners that want the call of `span` (just started); empty when nobody does.

    Decide once when the span starts, then hand the finished call to exactly these with
    `notify_agent_call(call, listeners)`.
    """
    return _interested(span)


def wants_agent_call(span: Span) -> bool:
    """True when some listener wants the call of `span` (just started): build an `AgentCall`."""
    return bool(_interested(span))


def notify_agent_call(
    call: AgentCall, listeners: tuple[AgentCallListener, ...] | None = None
) -> None:
    """Deliver `call` to `listeners` (default: every listener whose filter wants its span).

    Never raises.
    """
    for listener in _interested(call.span) if listeners is None else listeners:
        try:
            listener(call)
        except Exception:  # noqa: BLE001 - telemetry must not break the agent
            _log.exception("tracescore: agent call listener %r failed", listener)


def enter_call() -> tuple[contextvars.Token[_Slot | None], _Slot]:
    """Open a ground-truth slot for an agent call (inherits the enclosing value)."""
    outer = _slot.get()
    slot = _Slot(outer.value if outer is not None else _UNSET, outer=outer)
    return _slot.set(slot), slot


def exit_call(token: contextvars.Token[_Slot | None], slot: _Slot) -> Any:
    """Close the slot opened by `enter_call`; returns the ground truth set during the call."""
    try:
        _slot.reset(token)
    except ValueError:  # reset from another context (e.g. a generator resumed elsewhere)
        pass
    return None if slot.value is _UNSET else slot.value


def set_ground_truth(value: Any) -> None:
    """Set the expected answer for the agent call running in this context.

    Does nothing where no agent call is followed (none running, or nobody wants its hand-off,
    e.g. online scoring did not sample it): the value must not leak into later calls. To give
    ground truth from outside the call, wrap it in `with ground_truth(value):`.
    """
    slot = _slot.get()
    if slot is not None and slot.writable:
        slot.value = value


def following() -> bool:
    """True inside an agent call that somebody follows (its hand-off is wanted)."""
    slot = _slot.get()
    while slot is not None:
        if slot.writable:
            return True
        slot = slot.outer
    return False


_MAX_ADDED = 1000  # add_context texts kept per agent call (the scorers' limits apply after)


def add_context(text: str) -> None:
    """Give the agent call running in this context (and the ones it runs inside) a retrieved
    text, for scorers that judge the answer against its context (faithfulness...).

    The text reaches the scorers only (it is not put on any span). Does nothing where no agent
    call is followed, like `set_ground_truth`. Never raises.
    """
    slot = _slot.get()
    if slot is None or not isinstance(text, str) or not text:
        return
    now = time.time_ns()
    while slot is not None:
        if slot.writable:
            if slot.context is None:
                slot.context = []
            if len(slot.context) < _MAX_ADDED:
                slot.context.append((now, text))
        slot = slot.outer


def add_tool_content(span_id: int, content: dict[str, str]) -> None:
    """Keep a tool span's content (not exported: capture is off) for the followed agent calls
    running in this context."""
    slot = _slot.get()
    while slot is not None:
        if slot.writable:
            if slot.tools is None:
                slot.tools = {}
            if len(slot.tools) < _MAX_ADDED:
                slot.tools[span_id] = content
        slot = slot.outer


@contextmanager
def ground_truth(value: Any) -> Iterator[None]:
    """Context manager: agent calls made inside get `value` as their ground truth."""
    token = _slot.set(_Slot(value, writable=False, outer=_slot.get()))
    try:
        yield
    finally:
        _slot.reset(token)


def current_ground_truth(default: Any = None) -> Any:
    """Ground truth visible in the current context, or `default`."""
    slot = _slot.get()
    return default if slot is None or slot.value is _UNSET else slot.value
