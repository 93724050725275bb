"""Online-scoring metrics through the global MeterProvider (no-ops while none is configured).

Also keeps in-process counters, readable with `ScoringSpanProcessor.stats()`, so drops and
failures are visible even without a metrics backend.
"""

from __future__ import annotations

import collections
import functools
import logging
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from opentelemetry import metrics

from tracescore import _semconv as sc
from tracescore.online._quality import QualityMetrics

_log = logging.getLogger("tracescore")

# reasons a sampled call ends up unscored (also the `tracescore.evaluation.unscored.reason` values)
QUEUE_FULL = "queue_full"
HELD_OVERFLOW = "held_overflow"
TIMEOUT = "timeout"
FLUSH = "flush"
SHUTDOWN = "shutdown"
RATE_LIMITED = "rate_limited"
BUDGET = "budget_exhausted"
NO_LLM_CALLS = "no_llm_calls"  # an agent span without content whose LLM calls never arrived

_REASON = sc.TS_UNSCORED_REASON

# in-process counter key -> (metric name, unit, description)
_COUNTERS = {
    "sampled": (sc.METRIC_EVALUATION_SAMPLED, "{evaluation}",
                "Agent calls selected for online scoring"),
    "scored": (sc.METRIC_EVALUATION_SCORED, "{evaluation}",
               "Online scorer runs that produced a score"),
    "dropped": (sc.METRIC_EVALUATION_DROPPED, "{evaluation}",
                "Online scorer runs skipped or dropped (see reason)"),
    "failed": (sc.METRIC_EVALUATION_FAILED, "{evaluation}",
               "Online scorer runs that failed (judge or scorer error)"),
    "held_timeout": (sc.METRIC_EVALUATION_HELD_TIMEOUT, "{span}",
                     "Held spans exported unscored because scoring exceeded max wait"),
}


def _guarded(record: Callable[..., None]) -> Callable[..., None]:
    """A recording method that never raises (a broken meter must not reach the agent)."""

    @functools.wraps(record)
    def guarded(self: OnlineMetrics, *args: Any) -> None:
        try:
            record(self, *args)
        except Exception:  # noqa: BLE001 - a broken meter must not reach the agent
            if not self._broken:
                self._broken = True
                _log.warning("tracescore: recording an online scoring metric failed",
                             exc_info=True)

    return guarded


class OnlineMetrics:
    """Score histogram and sampled/scored/dropped/failed/held-timeout counters."""

    def __init__(self, meter_provider: metrics.MeterProvider | None = None) -> None:
        meter = metrics.get_meter("tracescore.online", meter_provider=meter_provider)
        self.meter = meter  # for the instruments of other parts (the conversation scope's)
        self.quality = QualityMetrics([meter])  # the score histogram and the other quality metrics
        self._counters = {
            key: meter.create_counter(name, unit=unit, description=description)
            for key, (name, unit, description) in _COUNTERS.items()
        }
        self._unreadable = meter.create_counter(
            sc.METRIC_UNREADABLE_AGENT_SPANS, unit="{span}",
            description="Spans that look like agent calls but cannot be read: not scored")
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._broken = False
        # `sampled` meter adds waiting for a thread other than the agent's (see `sampled`)
        self._pending: collections.deque[tuple[str, str | None]] = collections.deque()

    def after_fork(self) -> None:
        """In a forked child: a lock a parent thread held at fork would never be released."""
        self._lock = threading.Lock()

    def _bump(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._counts[key] += n

    def _count(self, key: str, attrs: dict[str, str], n: int = 1) -> None:
        """Add `n` to the in-process count `key` and to its metric counter."""
        self.flush_pending()
        self._bump(key, n)
        self._counters[key].add(n, attrs)

    @_guarded
    def sampled(self, scorer_id: str, agent: str | None) -> None:
        """Count a sampled call; the count and its meter add wait for `flush_pending`, which
        `snapshot` and the scoring threads call before any other count, so the agent's thread
        only appends to a deque."""
        self._pending.append((scorer_id, agent))

    @_guarded
    def flush_pending(self) -> None:
        """Count the waiting `sampled` calls and add them to their meter counter."""
        pending = self._pending
        counter = self._counters["sampled"]
        while pending:
            try:
                scorer_id, agent = pending.popleft()
            except IndexError:  # another thread took the last one
                return
            self._bump("sampled")
            counter.add(1, _attrs(scorer_id, agent))

    @_guarded
    def scored(self, scorer_id: str, agent: str | None, score: float) -> None:
        self._count("scored", _attrs(scorer_id, agent))

    @_guarded
    def result(self, attrs: Any, agent: str | None, error: str | None) -> None:
        """The quality metrics of one finished run (its result event's attributes)."""
        self.quality.result(attrs, agent, error)

    @_guarded
    def failed(self, scorer_id: str, agent: str | None, error_type: str) -> None:
        self._count("failed", {**_attrs(scorer_id, agent), sc.ERROR_TYPE: error_type})

    @_guarded
    def dropped(self, scorer_id: str, agent: str | None, reason: str, n: int = 1) -> None:
        self._bump(f"dropped.{reason}", n)
        self._count("dropped", {**_attrs(scorer_id, agent), _REASON: reason}, n)
        self.quality.unscored(scorer_id, agent, reason, n)

    @_guarded
    def held_timeout(self, agent: str | None) -> None:
        self._count("held_timeout", _attrs(None, agent))

    @_guarded
    def unreadable(self, framework: str, reason: str) -> None:
        """A span that looks like a `framework` agent call, not read for `reason`."""
        self._bump(f"unreadable.{framework}.{reason}")
        self._unreadable.add(1, {sc.TS_UNREADABLE_FRAMEWORK: framework,
                                 sc.TS_UNREADABLE_REASON: reason})

    def snapshot(self) -> dict[str, int]:
        self.flush_pending()
        with self._lock:
            return dict(self._counts)


def _attrs(scorer_id: str | None, agent: str | None) -> dict[str, str]:
    attrs: dict[str, str] = {}
    if scorer_id is not None:
        attrs[sc.TS_SCORER_ID] = scorer_id
    if agent is not None:
        attrs[sc.GEN_AI_AGENT_NAME] = agent
    return attrs
