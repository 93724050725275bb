"""What `run_evals` is given, checked before anything runs: the target (resolved to one call
shape), the items, the scorers (and their judges' preflight), the thresholds."""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from tracescore._exceptions import ConfigurationError
from tracescore.scoring._trace_data import (
    TURNS_KEY,
    item_scope,
    item_trace,
)

if TYPE_CHECKING:
    from tracescore.scoring import Scorer

    # a scorer, its name, or a spec {"scorer": name, "options": {...}} (the gateway config's form)
    ScorerSpec = Scorer | str | Mapping[str, Any]


# --- targets -----------------------------------------------------------------------------------

_Call = Callable[[Any, ThreadPoolExecutor], Awaitable[Any]]
_AGENT_METHODS = ("ainvoke", "arun", "invoke", "run")


def _resolve_target(target: Any) -> _Call:
    """Turn a function, coroutine function, generator or agent object into one async call."""
    fn = target
    if not callable(fn):
        fn = next((getattr(target, m) for m in _AGENT_METHODS
                   if callable(getattr(target, m, None))), None)
        if fn is None:
            raise ConfigurationError(
                f"target must be callable or have one of {', '.join(_AGENT_METHODS)}; "
                f"got {type(target).__name__}"
            )
    if inspect.isasyncgenfunction(fn) or inspect.iscoroutinefunction(fn):
        async def call_async(value: Any, executor: ThreadPoolExecutor) -> Any:
            return await _settle(fn(value))
        return call_async

    async def call_sync(value: Any, executor: ThreadPoolExecutor) -> Any:
        # the executor carries the item's context (span, ground truth) into its thread
        result = await asyncio.get_running_loop().run_in_executor(
            executor, _call_and_drain, fn, value)
        return await _settle(result)
    return call_sync


def _call_and_drain(fn: Callable[[Any], Any], value: Any) -> Any:
    """Call a sync target; a returned generator is consumed on the same thread."""
    result = fn(value)
    if inspect.isgenerator(result):
        return _join(list(result))
    return result


async def _settle(result: Any) -> Any:
    """Await coroutines and drain async generators returned by the target."""
    while inspect.isawaitable(result):
        result = await result
    if inspect.isasyncgen(result):
        return _join([chunk async for chunk in result])
    return result


def _join(chunks: list[Any]) -> Any:
    return "".join(chunks) if all(isinstance(c, str) for c in chunks) else chunks


def _target_name(target: Any) -> str:
    """Span/agent name of a run: the function's or the agent class's name."""
    name = getattr(target, "__name__", None)
    if isinstance(name, str) and name and name != "<lambda>":
        return name
    if inspect.isfunction(target) or inspect.ismethod(target):
        return "eval"
    return type(target).__name__


# --- validation --------------------------------------------------------------------------------


def _check_items(data: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    if isinstance(data, (str, bytes)) or not isinstance(data, Iterable):
        raise ConfigurationError("data must be an iterable of items like {'input': ...}")
    items = list(data)
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ConfigurationError(f"item {i} must be a mapping, got {type(item).__name__}")
        if "input" not in item and TURNS_KEY not in item:
            raise ConfigurationError(f"item {i} has no 'input' key (keys: {sorted(item)})")
        item_trace(item, f"item {i}")
        item_scope(item, f"item {i}")
    return items


def _check_scorers(scorers: Any) -> list[Scorer]:
    from tracescore.scoring._registry import resolve_scorers

    single = hasattr(scorers, "arun") or isinstance(scorers, (str, Mapping))
    found = resolve_scorers([scorers] if single else list(scorers or ()))
    if not found:
        raise ConfigurationError("run_evals needs at least one scorer")
    seen: set[str] = set()
    for scorer in found:
        if not (hasattr(scorer, "arun") and isinstance(getattr(scorer, "id", None), str)):
            raise ConfigurationError(f"not a scorer: {scorer!r} (needs an 'id' and 'arun')")
        if scorer.id in seen:
            raise ConfigurationError(f"two scorers share the id {scorer.id!r}")
        seen.add(scorer.id)
    return found


def _preflight(scorers: list[Scorer]) -> None:
    """Check every judge (model known, API key set) before the first item."""
    from tracescore.scoring._resolve import preflight_scorers

    preflight_scorers(scorers)


def _check_thresholds(thresholds: Mapping[str, float] | None,
                      scorers: list[Scorer]) -> dict[str, float]:
    limits: dict[str, float] = {}
    ids = {s.id for s in scorers}
    for sid, minimum in (thresholds or {}).items():
        if sid not in ids:
            raise ConfigurationError(
                f"threshold for unknown scorer {sid!r} (scorers: {', '.join(sorted(ids))})")
        if isinstance(minimum, bool) or not isinstance(minimum, (int, float)) \
                or not math.isfinite(minimum):
            raise ConfigurationError(f"threshold for {sid!r} must be a number, got {minimum!r}")
        limits[sid] = float(minimum)
    return limits
