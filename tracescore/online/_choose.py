"""Which scorers sample an agent call: rates (by trace id), `agents` / `attributes` / predicate
filters, rate limits and budgets. Runs in the agent's thread (or the gateway's request thread):
cheap, no I/O (fleet limits are reserved later, in the worker), never raises."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tracescore.instrument._calls import AgentCall
from tracescore.online._metrics import OnlineMetrics
from tracescore.online._options import OnlineScorer

_MISSING: Any = object()


def choose(scorers: Sequence[OnlineScorer], call: AgentCall, randomness: int,
           metrics: OnlineMetrics, log_once: Callable[..., None]) -> tuple[OnlineScorer, ...]:
    """The scorers that sample `call` (each holding its rate limit and budget); those a limit
    or budget refused are counted as dropped."""
    chosen: list[OnlineScorer] = []
    for online in scorers:
        if randomness < online.threshold or (
            online.filtered and not matches(online, call, log_once)
        ):
            continue
        refused = online.admit()
        if refused is not None:
            metrics.dropped(online.scorer_id, call.name, refused)
            continue
        chosen.append(online)
    return tuple(chosen)


def would_sample(scorers: Sequence[OnlineScorer], randomness: int, agent: str,
                 attributes: Mapping[str, Any]) -> dict[str, OnlineScorer]:
    """The scorers whose rate, `agents` and `attributes` filters take a call (no limits,
    budgets nor predicates), by id."""
    return {online.scorer_id: online for online in scorers
            if randomness >= online.threshold
            and (online.agents is None or agent in online.agents)
            and all(_same_value(attributes.get(key, _MISSING), expected)
                    for key, expected in (online.attributes or {}).items())}


def matches(online: OnlineScorer, call: AgentCall, log_once: Callable[..., None]) -> bool:
    agents = online.agents
    if agents is not None and call.name not in agents:
        return False
    if online.attributes:
        span_attributes = getattr(call.span, "attributes", None) or {}
        for key, expected in online.attributes.items():
            value = call.attributes.get(key, _MISSING) if call.attributes else _MISSING
            if value is _MISSING:
                value = span_attributes.get(key, _MISSING)
            if not _same_value(value, expected):
                return False
    if online.predicate is not None:
        try:
            return bool(online.predicate(call))
        except Exception:  # noqa: BLE001 - a broken predicate skips, never raises
            log_once(f"predicate:{online.scorer_id}",
                     "tracescore: predicate of online scorer %r raised; skipping calls",
                     online.scorer_id, exc_info=True)
            return False
    return True


def _same_value(value: object, expected: object) -> bool:
    if isinstance(expected, list):
        expected = tuple(expected)
    if isinstance(value, list):
        value = tuple(value)
    return value == expected
