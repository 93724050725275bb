"""Public configuration of online scoring: `OnlineScorer` (per scorer) and processor options.

Everything is validated here, at construction, with a clear `ConfigurationError`; the hot path
only reads the prepared fields.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tracescore import _env
from tracescore._exceptions import ConfigurationError
from tracescore._suppress import suppressed
from tracescore.online._fleet_limits import NO_FLEET, FleetLimiter, Reservation
from tracescore.online._isolation import ISOLATIONS
from tracescore.online._metrics import BUDGET, RATE_LIMITED
from tracescore.online._rectifiers import Rectifier, read_rectifiers
from tracescore.online._sampling import CostBudget, RateLimiter, rejection_threshold
from tracescore.scoring._provenance import provenance

if TYPE_CHECKING:
    from tracescore.instrument._calls import AgentCall
    from tracescore.scoring import Scorer

_log = logging.getLogger("tracescore")

SINKS = ("span", "carrier", "log", "phoenix")
_MISSING: Any = object()


@dataclass(frozen=True, eq=False)
class OnlineScorer:
    """A scorer registered for live traffic, with its sampling, filters, limits and sinks.

    - `rate`: fraction of traces scored in [0, 1], decided from the trace id.
    - `agents`: only calls of these agent names (a name or an iterable of names).
    - `attributes`: only agent spans whose attributes equal all of these values.
    - `predicate`: `predicate(call) -> bool` on the `AgentCall` (an exception means "skip").
    - `rate_limit_per_minute`: at most this many scored calls per minute.
    - `budget_usd_per_hour`: stop sampling while the judge spent this much in the last hour
      (scorers that use no judge are never limited by it).
    - `fleet_limits`: a `FleetLimiter` shared through Redis by every replica and process that
      points at the same Redis and scope (requests/min, tokens/min, dollars per hour), checked
      after the limits above, in the scoring worker (the agent never waits on Redis); its
      refusals count as `rate_limited`.
    - `reference`: ground truth for calls without one: a mapping looked up by the call's input
      (or its string form, or the last user message of chat messages), or a callable
      `reference(input) -> ground truth | None`.
    - `sinks`: where results go: any of "span" (default), "carrier", "log", "phoenix" (span
      annotations through Phoenix's REST API; see `PhoenixSink`).
    - `timeout_s`: upper bound of one scorer run (judge retries included).
    - `trace_judge`: each judge call becomes a `chat` span in a trace of its own, linked to the
      evaluated span (None: TRACESCORE_TRACE_JUDGE, default true).
    - `rectifiers`: people's correction of this scorer's pass rate, exported as the
      `tracescore.calibration.rectifier` gauges: a file `tracescore report --rectifiers` wrote
      (its rectifiers of this scorer's name) or `Rectifier` objects.
    """

    scorer: Scorer
    rate: float = 1.0
    agents: Iterable[str] | str | None = None
    attributes: Mapping[str, Any] | None = None
    predicate: Callable[[AgentCall], bool] | None = None
    rate_limit_per_minute: float | None = None
    budget_usd_per_hour: float | None = None
    reference: Mapping[Any, Any] | Callable[[Any], Any] | None = None
    sinks: Iterable[str] | str = ("span",)
    timeout_s: float = 120.0
    fleet_limits: FleetLimiter | None = None
    trace_judge: bool | None = None
    rectifiers: str | os.PathLike[str] | Iterable[Rectifier] | None = None
    _threshold: int = field(init=False, repr=False)
    _limiter: RateLimiter | None = field(init=False, repr=False)
    _budget: CostBudget | None = field(init=False, repr=False)
    _filtered: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        scorer = self.scorer
        scorer_id = getattr(scorer, "id", None)
        if not isinstance(scorer_id, str) or not scorer_id or not callable(
            getattr(scorer, "arun", None)
        ):
            raise ConfigurationError(
                f"OnlineScorer needs a scorer with a non-empty string `id` and an async `arun` "
                f"method, got {scorer!r}"
            )
        rate = _number("rate", self.rate)
        if not 0.0 <= rate <= 1.0:
            raise ConfigurationError(f"OnlineScorer rate must be within [0, 1], got {self.rate!r}")
        set_ = object.__setattr__
        set_(self, "rate", rate)
        set_(self, "agents", _names(self.agents))
        if self.attributes is not None and not isinstance(self.attributes, Mapping):
            raise ConfigurationError(
                f"OnlineScorer attributes must be a mapping of attribute name to value, "
                f"got {self.attributes!r}"
            )
        set_(self, "attributes", dict(self.attributes) if self.attributes else None)
        if self.predicate is not None and not callable(self.predicate):
            raise ConfigurationError(f"OnlineScorer predicate must be callable, got {self.predicate!r}")
        if self.reference is not None and not (
            isinstance(self.reference, Mapping) or callable(self.reference)
        ):
            raise ConfigurationError(
                f"OnlineScorer reference must be a mapping or a callable, got {self.reference!r}"
            )
        set_(self, "sinks", _sinks(self.sinks))
        timeout = _number("timeout_s", self.timeout_s)
        if timeout <= 0:
            raise ConfigurationError(f"OnlineScorer timeout_s must be > 0, got {self.timeout_s!r}")
        set_(self, "timeout_s", timeout)
        if self.trace_judge is not None and not isinstance(self.trace_judge, bool):
            raise ConfigurationError(
                f"OnlineScorer trace_judge must be True, False or None, got {self.trace_judge!r}")
        set_(self, "trace_judge", _env.TRACE_JUDGE.get() if self.trace_judge is None
             else self.trace_judge)
        set_(self, "rectifiers", _rectifiers(self.rectifiers, self.scorer_name))
        limiter = None
        if self.rate_limit_per_minute is not None:
            per_minute = _number("rate_limit_per_minute", self.rate_limit_per_minute)
            if per_minute <= 0:
                raise ConfigurationError(
                    f"OnlineScorer rate_limit_per_minute must be > 0, got {per_minute!r}"
                )
            limiter = RateLimiter(per_minute)
        budget = None
        if self.budget_usd_per_hour is not None:
            usd = _number("budget_usd_per_hour", self.budget_usd_per_hour)
            if usd < 0:
                raise ConfigurationError(f"OnlineScorer budget_usd_per_hour must be >= 0, got {usd!r}")
            if getattr(scorer, "uses_judge", True):
                budget = CostBudget(usd)
        set_(self, "_threshold", rejection_threshold(rate))
        set_(self, "_limiter", limiter)
        set_(self, "_budget", budget)
        set_(self, "_filtered", bool(self.agents or self.attributes or self.predicate))
        provenance(scorer)  # the scorer's version, from its options before any run

    @property
    def threshold(self) -> int:
        """Trace randomness below this is not sampled (from `rate`)."""
        return self._threshold

    @property
    def filtered(self) -> bool:
        """Whether `agents`, `attributes` or `predicate` narrow the calls scored."""
        return self._filtered

    def acquire_rate(self) -> bool:
        """Take one run from the rate limit; False when the limit refuses (or True: no limit)."""
        return self._limiter is None or self._limiter.try_acquire()

    def reserve_budget(self) -> bool:
        """Reserve one run's cost from the budget; False when it is spent (or True: no budget)."""
        return self._budget is None or self._budget.try_reserve()

    def admit(self) -> str | None:
        """Admit one run in the caller's thread (the agent's, or the gateway's; no I/O): take
        the rate limit, then reserve the budget. None when admitted, else the reason it is
        dropped. The fleet's reservation follows in the worker (`admit_fleet`)."""
        if not self.acquire_rate():
            return RATE_LIMITED
        if not self.reserve_budget():
            return BUDGET
        return None

    async def admit_fleet(self) -> Reservation | None:
        """The fleet's reservation of a run `admit` took, in the worker: the Redis round trip
        runs in a thread, so neither the agent nor the worker's other runs wait on it.
        `NO_FLEET` without fleet limits; None when the fleet refuses (counted as rate_limited
        by the caller), the local budget then given back."""
        limiter = self.fleet_limits
        if limiter is None:
            return NO_FLEET
        with suppressed():  # a Redis instrumentation must not trace the limiter's calls
            reservation = await asyncio.to_thread(limiter.admit_run)
        if reservation is None and self._budget is not None:
            self._budget.release()
        return reservation

    def release_budget(self, fleet: Reservation | None = None) -> None:
        """Give back the reservations (local, and `fleet` when the fleet admitted it) of a run
        that will not happen."""
        if self._budget is not None:
            self._budget.release()
        if fleet is not None and self.fleet_limits is not None and fleet is not NO_FLEET:
            self.fleet_limits.release(fleet)

    def settle_budget(self, cost_usd: float | None, fleet: Reservation | None = None) -> None:
        """Settle the reservations (local, and `fleet` when the fleet admitted it) with the
        run's judge cost (None: unknown, counted as zero)."""
        if self._budget is not None:
            self._budget.settle(cost_usd)
        if fleet is not None and self.fleet_limits is not None and fleet is not NO_FLEET:
            self.fleet_limits.settle_run(fleet, cost_usd)

    def after_fork(self) -> None:
        """In a forked child: fresh locks for the limit and budget (a parent thread may hold one)."""
        for state in (self._limiter, self._budget):
            if state is not None:
                state.after_fork()

    @property
    def scorer_id(self) -> str:
        return str(self.scorer.id)

    @property
    def scorer_name(self) -> str:
        name = getattr(self.scorer, "name", None)
        return name if isinstance(name, str) and name else self.scorer_id

    def lookup_reference(self, value: Any) -> Any:
        """Ground truth from `reference` for an input, or None. Never raises."""
        ref = self.reference
        if ref is None:
            return None
        try:
            if isinstance(ref, Mapping):
                try:
                    found = ref.get(value, _MISSING)
                except TypeError:  # unhashable input
                    found = _MISSING
                if found is _MISSING and not isinstance(value, str):
                    from tracescore._content import lookup_key

                    found = ref.get(lookup_key(value), _MISSING)
                if found is _MISSING:  # any shape: by its question text
                    key = reference_key(value)
                    if key is not None:
                        found = ref.get(key, _MISSING)
                return None if found is _MISSING else found
            return ref(value)
        except Exception:  # noqa: BLE001 - a bad reference means "no ground truth"
            _log.warning("tracescore: reference lookup of scorer %r failed", self.scorer_id,
                         exc_info=True)
            return None


@dataclass(frozen=True, slots=True)
class ProcessorOptions:
    """Validated options of `ScoringSpanProcessor` (see its docstring)."""

    max_wait_s: float = 30.0
    max_held_spans: int = 2048
    queue_size: int = 1000
    concurrency: int = 8
    shutdown_timeout_s: float = 30.0
    score_genai_spans: bool = False
    isolation: str = "auto"

    def __post_init__(self) -> None:
        for name in ("max_wait_s", "shutdown_timeout_s"):
            value = _number(name, getattr(self, name))
            if value <= 0:
                raise ConfigurationError(f"ScoringSpanProcessor {name} must be > 0, got {value!r}")
            object.__setattr__(self, name, value)
        for name in ("max_held_spans", "queue_size", "concurrency"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(
                    f"ScoringSpanProcessor {name} must be an integer >= 1, got {value!r}"
                )
        if not isinstance(self.score_genai_spans, bool):
            raise ConfigurationError(
                f"ScoringSpanProcessor score_genai_spans must be a bool, got {self.score_genai_spans!r}"
            )
        if self.isolation not in ISOLATIONS:
            raise ConfigurationError(
                f"ScoringSpanProcessor isolation must be 'auto', 'process' or 'thread', "
                f"got {self.isolation!r}"
            )


def as_online_scorers(scorers: object) -> tuple[OnlineScorer, ...]:
    """Normalize `Scorer | OnlineScorer` items (or one of them) to a tuple of OnlineScorer."""
    if isinstance(scorers, OnlineScorer) or callable(getattr(scorers, "arun", None)):
        scorers = [scorers]
    if isinstance(scorers, (str, bytes)) or not isinstance(scorers, Iterable):
        raise ConfigurationError(
            f"scorers must be a sequence of Scorer or OnlineScorer objects, got {scorers!r}"
        )
    result = tuple(s if isinstance(s, OnlineScorer) else OnlineScorer(s) for s in scorers)
    ids = [s.scorer_id for s in result]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ConfigurationError(
            f"each online scorer needs its own id; duplicated: {', '.join(duplicates)}"
        )
    return result


def reference_key(value: Any) -> str | None:
    """The key a reference is looked up by, whatever the input's shape: its question text (the
    last user text of chat messages in any recorded shape, the `prompt` of an object, the
    string itself), stripped, out of the encodings frameworks record it in (`unwrap_input`);
    None when it has none."""
    from tracescore.online.intake import as_input, unwrap_input
    from tracescore.scoring._inputs import InputError, question_text

    try:
        return question_text(as_input(unwrap_input(value))).strip() or None
    except InputError:
        return None


# What a scorer does without a ground truth, when that changes its verdicts
_FALLBACKS = {
    "content-similarity": "compared the output with the input instead",
    "textual-difference": "compared the output with the input instead",
    "keyword-coverage": "took the keywords of the input instead",
    "completeness": "took the elements of the input instead",
    "tone-consistency": "measured the output's own tone stability instead",
}


def reference_fallback(scorer_id: str, scorer: Any) -> str | None:
    """What `scorer` does without a ground truth, when that changes its verdicts (else None)."""
    from tracescore.scoring._judge_api import OFFLINE_MODEL

    if scorer_id == "answer-relevancy":  # the offline judge's only world knowledge
        model = getattr(getattr(scorer, "judge", None), "model", None)
        return ("the offline judge had no reference answer (it has no world knowledge: it "
                "checks answers against the ground truth)") if model == OFFLINE_MODEL else None
    if scorer_id == "tone-consistency" and getattr(scorer, "reference_tone", None):
        return None
    return _FALLBACKS.get(scorer_id)


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigurationError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ConfigurationError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _names(agents: object) -> frozenset[str] | None:
    if agents is None:
        return None
    if isinstance(agents, str):
        agents = [agents]
    if not isinstance(agents, Iterable):
        raise ConfigurationError(f"OnlineScorer agents must be a name or names, got {agents!r}")
    names = frozenset(agents)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ConfigurationError(
            f"OnlineScorer agents must be non-empty agent names, got {agents!r}"
        )
    return names


def _sinks(sinks: object) -> frozenset[str]:
    if isinstance(sinks, str):
        sinks = [sinks]
    if not isinstance(sinks, Iterable):
        raise ConfigurationError(f"OnlineScorer sinks must be names among {SINKS}, got {sinks!r}")
    chosen = frozenset(sinks)
    unknown = sorted(str(s) for s in chosen - set(SINKS))
    if not chosen or unknown:
        raise ConfigurationError(
            f"OnlineScorer sinks must be one or more of {', '.join(SINKS)}; got {sorted(map(str, chosen))}"
        )
    return chosen


def _rectifiers(value: Any, name: str) -> tuple[Rectifier, ...]:
    """The rectifiers of scorer `name` from a rectifiers file or `Rectifier` objects."""
    if value is None:
        return ()
    if isinstance(value, (str, os.PathLike)):
        found = read_rectifiers(value)
        mine = tuple(r for r in found if r.name == name)
        if not mine:
            names = ", ".join(sorted({r.name for r in found})) or "none"
            raise ConfigurationError(f"OnlineScorer rectifiers: {os.fspath(value)!r} has no "
                                     f"rectifier of scorer {name!r} (it has: {names})")
        return mine
    items = tuple(value) if isinstance(value, Iterable) else (value,)
    if not all(isinstance(r, Rectifier) for r in items):
        raise ConfigurationError("OnlineScorer rectifiers must be a rectifiers file or "
                                 f"Rectifier objects, got {value!r}")
    others = sorted({r.name for r in items if r.name != name})
    if others:
        raise ConfigurationError(f"OnlineScorer rectifiers: scorer {name!r} was given the "
                                 f"rectifier of {others[0]!r}")
    return items
