"""Hand-off of finished agent calls (the real in-process input and output) to listeners.

Decorated agents and `instrument_agent` call `notify_agent_call` just before their span ends.
Online scoring registers a listener; instrumentation itself knows nothing of scoring.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import Span

_log = logging.getLogger("tracescore")

_UNSET: Any = object()


class _Slot:
    """Mutable ground-truth slot of one agent call; `set_ground_truth` writes into it."""

    __slots__ = ("value",)

    def __init__(self, value: Any = _UNSET) -> None:
        self.value = value


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


AgentCallListener = Callable[[AgentCall], None]
_listeners: tuple[AgentCallListener, ...] = ()


def add_agent_call_listener(listener: AgentCallListener) -> None:
    """Register `listener` to receive every finished agent call (idempotent)."""
    global _listeners
    if listener not in _listeners:
        _listeners = (*_listeners, listener)


def remove_agent_call_listener(listener: AgentCallListener) -> None:
    """Unregister `listener` (compared by equality, so bound methods work); unknown ones are ignored."""
    global _listeners
    _listeners = tuple(x for x in _listeners if x != listener)


def has_agent_call_listeners() -> bool:
    """True when somebody listens; lets callers skip building an `AgentCall`."""
    return bool(_listeners)


def notify_agent_call(call: AgentCall) -> None:
    """Deliver `call` to every listener. Never raises."""
    for listener in _listeners:
        try:
            listener(call)
        except Exception:  # noqa: BLE001 - telemetry must not break the agent
            _log.exception("tracescore: agent call listener %r failed", listener)


def enter_call() -> tuple[contextvars.Token[_Slot | None], _Slot]:
    """Open a ground-truth slot for an agent call (inherits the enclosing value)."""
    outer = _slot.get()
    slot = _Slot(outer.value if outer is not None else _UNSET)
    return _slot.set(slot), slot


def exit_call(token: contextvars.Token[_Slot | None], slot: _Slot) -> Any:
    """Close the slot opened by `enter_call`; returns the ground truth set during the call."""
    try:
        _slot.reset(token)
    except ValueError:  # reset from another context (e.g. a generator resumed elsewhere)
        pass
    return None if slot.value is _UNSET else slot.value


def set_ground_truth(value: Any) -> None:
    """Set the expected answer for the agent call running in this context."""
    slot = _slot.get()
    if slot is None:
        _slot.set(_Slot(value))
    else:
        slot.value = value


@contextmanager
def ground_truth(value: Any) -> Iterator[None]:
    """Context manager: agent calls made inside get `value` as their ground truth."""
    token = _slot.set(_Slot(value))
    try:
        yield
    finally:
        _slot.reset(token)


def current_ground_truth(default: Any = None) -> Any:
    """Ground truth visible in the current context, or `default`."""
    slot = _slot.get()
    return default if slot is None or slot.value is _UNSET else slot.value
