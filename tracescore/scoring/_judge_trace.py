"""The judge's own calls, recorded so that online scoring can trace them.

While a scorer runs inside `recording()`, every judge call made through `traced` (the litellm
judge's completion calls) is noted as a `JudgeCall`: model, step, start and end, tokens, cost,
response model and id, error type. Nothing here makes a span (scoring knows nothing of spans):
the online core turns the calls into GenAI `chat` client spans after the run, in the process
that exports spans, also when the scorer ran in the scoring process (`carry` / `adopted` bring
the calls back with the result or the error).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")

MAX_CALLS = 64  # judge calls noted per scorer run (retries included); the rest are counted only
_ERROR_KEY = "_tracescore_judge_calls"  # where an exception carries its calls across processes
_calls: ContextVar[list[JudgeCall] | None] = ContextVar("tracescore_judge_calls", default=None)


@dataclass(frozen=True, kw_only=True)  # no slots: it is pickled (Python 3.10 could not load those)
class JudgeCall:
    """One request to the judge's model, as it went."""

    model: str
    step: str
    start_ns: int
    end_ns: int
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    response_model: str | None = None
    response_id: str | None = None
    finish_reasons: tuple[str, ...] = ()
    error_type: str | None = None


class Traced(NamedTuple):
    """A scorer's result travelling with the judge calls its run made."""

    value: Any
    calls: tuple[JudgeCall, ...]


@contextmanager
def recording(enabled: bool = True) -> Iterator[list[JudgeCall] | None]:
    """Note the judge calls made inside (in this context and the tasks it starts); yields the
    list they land in, or None when not `enabled`."""
    if not enabled:
        yield None
        return
    calls: list[JudgeCall] = []
    token = _calls.set(calls)
    try:
        yield calls
    finally:
        _calls.reset(token)


async def traced(model: str, step: str, call: Awaitable[T]) -> T:
    """`await call` (one completion request), noted when a recording is on."""
    calls = _calls.get()
    if calls is None:
        return await call
    start = time.time_ns()
    try:
        response = await call
    except BaseException as exc:
        _note(calls, JudgeCall(model=model, step=step, start_ns=start, end_ns=time.time_ns(),
                               error_type=_error_type(exc)))
        raise
    with contextlib.suppress(Exception):  # an odd reply object: counted by the judge, untraced
        _note(calls, _from_response(model, step, start, time.time_ns(), response))
    return response


def carry(value: Any, calls: list[JudgeCall] | None) -> Any:
    """A result (`Traced`) or an exception (an attribute) with `calls`, to cross a process."""
    if not calls:
        return value
    if isinstance(value, BaseException):
        try:
            setattr(value, _ERROR_KEY, tuple(calls))
        except (AttributeError, TypeError):  # an exception with __slots__: the calls are lost
            pass
        return value
    return Traced(value, tuple(calls))


async def adopted(outcome: Awaitable[Any]) -> Any:
    """The result of `outcome` as `carry` sent it, its judge calls added to this context's
    recording (an exception is re-raised with its calls taken off)."""
    try:
        value = await outcome
    except Exception as exc:
        _adopt(exc.__dict__.pop(_ERROR_KEY, ()) if hasattr(exc, "__dict__") else ())
        raise
    if isinstance(value, Traced):
        _adopt(value.calls)
        return value.value
    return value


def _adopt(calls: tuple[JudgeCall, ...]) -> None:
    recorded = _calls.get()
    if recorded is not None:
        for call in calls:
            _note(recorded, call)


def _note(calls: list[JudgeCall], call: JudgeCall) -> None:
    if len(calls) < MAX_CALLS:
        calls.append(call)


def _from_response(model: str, step: str, start: int, end: int, response: Any) -> JudgeCall:
    usage = getattr(response, "usage", None)
    hidden = getattr(response, "_hidden_params", None)
    cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
    reasons = tuple(str(r) for r in (getattr(c, "finish_reason", None)
                                     for c in getattr(response, "choices", None) or ()) if r)
    return JudgeCall(
        model=model, step=step, start_ns=start, end_ns=end,
        input_tokens=_count(getattr(usage, "prompt_tokens", None)),
        output_tokens=_count(getattr(usage, "completion_tokens", None)),
        cost_usd=float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool)
        else None,
        response_model=_str(getattr(response, "model", None)),
        response_id=_str(getattr(response, "id", None)),
        finish_reasons=reasons)


def _error_type(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        return str(status)
    return type(exc).__qualname__


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
