"""Quality metrics of online scoring: score histogram, pass/fail results (raw and weighted by the
sampling rate), judge calls, latency, tokens, cost and errors, and unscored calls by reason.

Recorded from the `gen_ai.evaluation.result` attributes a run produced, so that the collector
config `collector_config/quality-metrics.yaml`, reading the same attributes from log records,
makes the same series. The names, units and attributes are in docs/watching-quality.md.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.util.types import AttributeValue

from tracescore import _semconv as sc
from tracescore.online._rectifier_gauges import RECTIFIER, RECTIFIER_STDERR, RectifierGauges
from tracescore.online._rectifiers import Rectifier

RESULTS = "tracescore.evaluation.results"
RESULTS_WEIGHTED = "tracescore.evaluation.results.weighted"
SCORE = sc.METRIC_EVALUATION_SCORE
UNSCORED = "tracescore.evaluation.unscored"
JUDGE_CALLS = "tracescore.judge.calls"
JUDGE_ERRORS = "tracescore.judge.errors"
JUDGE_DURATION = "tracescore.judge.duration"
JUDGE_TOKENS = "tracescore.judge.tokens"
JUDGE_COST = "tracescore.judge.cost_usd"
NAMES = (RESULTS, RESULTS_WEIGHTED, SCORE, UNSCORED, JUDGE_CALLS, JUDGE_ERRORS, JUDGE_DURATION,
         JUDGE_TOKENS, JUDGE_COST, RECTIFIER, RECTIFIER_STDERR)

OUTCOME = "tracescore.evaluation.outcome"  # pass | fail
TOKEN_TYPE = "gen_ai.token.type"  # input | output (the GenAI conventions' attribute)
PASS, FAIL = "pass", "fail"
# the best band of every built-in scorer's labels (higher-is-worse scorers included: a result
# labelled non_toxic passes); any other label fails; a result without a label passes at >= 0.5
PASSING_LABELS = frozenset({
    "pass", "relevant", "similar", "faithful", "grounded", "non_toxic", "unbiased", "correct",
    "complete", "consistent", "covered", "appropriate", "on_track", "satisfied",
})
UNLABELLED_PASS_AT = 0.5
MIN_RATE = 1e-9  # a smaller sampling rate weighs as this one (1/rate stays finite)
SCORE_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

Attributes = Mapping[str, AttributeValue]


def outcome(attrs: Attributes) -> str:
    """`pass` or `fail` of a result: by its label, else by its score."""
    label = attrs.get(sc.GEN_AI_EVALUATION_SCORE_LABEL)
    if label is not None:
        return PASS if label in PASSING_LABELS else FAIL
    score = attrs.get(sc.GEN_AI_EVALUATION_SCORE_VALUE)
    return PASS if isinstance(score, (int, float)) and score >= UNLABELLED_PASS_AT else FAIL


def weight(rate: object) -> float:
    """How many calls one result sampled at `rate` stands for (1/rate; 1 when unknown)."""
    if isinstance(rate, (int, float)) and not isinstance(rate, bool) and 0 < rate <= 1:
        return 1.0 / max(float(rate), MIN_RATE)
    return 1.0


def with_agent(events: Sequence[tuple[str, dict[str, Any]]], agent: str | None
               ) -> list[tuple[str, dict[str, Any]]]:
    """`events` with the agent's name on the result event (a log record has no span to say it)."""
    if agent is None or not events or sc.GEN_AI_AGENT_NAME in events[0][1]:
        return list(events)
    (name, attrs), rest = events[0], events[1:]
    return [(name, {**attrs, sc.GEN_AI_AGENT_NAME: agent}), *rest]


class QualityMetrics:
    """The instruments on one or more meters (the gateway adds one its /metrics reads).

    The result and unscored counts, the ones every call may add to, are summed here under one
    lock and reported by observable counters when a reader collects (a dict update per call
    instead of two SDK measurements); the histograms and the judge's counters, recorded only
    when a scorer ran, are ordinary instruments."""

    def __init__(self, meters: Iterable[Meter]) -> None:
        self._results = _Totals(_RESULT_KEYS)
        self._weighted = _Totals(_RESULT_KEYS)
        self._unscored = _Totals(_UNSCORED_KEYS)
        self._sets: list[_Instruments] = []
        self._scorers: dict[str, str] = {}
        self._rectifiers = RectifierGauges()
        for meter in meters:
            self.add_meter(meter)

    def add_meter(self, meter: Meter) -> None:
        """Record on `meter` too (its counts from the start: they are cumulative)."""
        self._sets = [*self._sets, _Instruments(meter, self._results, self._weighted,
                                                self._unscored)]
        self._rectifiers.register(meter)

    def add_rectifiers(self, rectifiers: Iterable[Rectifier]) -> None:
        """Export these label corrections as the rectifier gauges."""
        self._rectifiers.add(rectifiers)

    def describe(self, scorers: Iterable[Any]) -> None:
        """Remember each online scorer's name, for the unscored counts by scorer id."""
        for online in scorers:
            self._scorers[online.scorer_id] = online.scorer_name
            self._rectifiers.add(getattr(online, "rectifiers", None) or ())

    def result(self, attrs: Attributes, agent: str | None, error: str | None) -> None:
        """One finished run: its `gen_ai.evaluation.result` attributes (and the error type)."""
        get = attrs.get
        name = get(sc.GEN_AI_EVALUATION_NAME)
        score = get(sc.GEN_AI_EVALUATION_SCORE_VALUE)
        version = get(sc.TS_SCORER_VERSION)
        if error is None and isinstance(score, (int, float)):
            key = (name, agent, version, get(sc.GEN_AI_EVALUATION_SCORE_LABEL), outcome(attrs))
            self._results.add(key, 1)
            self._weighted.add(key, weight(get(sc.TS_SAMPLING_RATE)))
            base = _present(((sc.GEN_AI_EVALUATION_NAME, name), (sc.GEN_AI_AGENT_NAME, agent),
                             (sc.TS_SCORER_VERSION, version)))
            for ins in self._sets:
                ins.score.record(float(score), base)
        calls = get(sc.TS_JUDGE_CALLS)
        if error is None and not (isinstance(calls, int) and calls > 0):
            return  # no judge ran: nothing more to count
        judge = _present(((sc.GEN_AI_EVALUATION_NAME, name),
                          (sc.GEN_AI_REQUEST_MODEL, get(sc.TS_JUDGE_MODEL))))
        latency_ms = get(sc.TS_JUDGE_LATENCY_MS)
        cost = get(sc.TS_JUDGE_COST_USD)
        tokens = [(kind, get(key)) for kind, key in
                  (("input", sc.TS_JUDGE_INPUT_TOKENS), ("output", sc.TS_JUDGE_OUTPUT_TOKENS))]
        for ins in self._sets:
            if error is not None:
                ins.errors.add(1, {**judge, sc.ERROR_TYPE: error})
            if isinstance(calls, int) and calls > 0:
                ins.calls.add(calls, judge)
                if isinstance(latency_ms, (int, float)):
                    ins.duration.record(latency_ms / 1000.0, judge)
            for kind, count in tokens:
                if isinstance(count, int) and count > 0:
                    ins.tokens.add(count, {**judge, TOKEN_TYPE: kind})
            if isinstance(cost, (int, float)) and cost > 0:
                ins.cost.add(float(cost), judge)

    def unscored(self, scorer_id: str, agent: str | None, reason: str, n: int = 1) -> None:
        """`n` sampled calls of scorer `scorer_id` left unscored for `reason`."""
        self._unscored.add((self._scorers.get(scorer_id, scorer_id), agent, reason), n)


_RESULT_KEYS = (sc.GEN_AI_EVALUATION_NAME, sc.GEN_AI_AGENT_NAME, sc.TS_SCORER_VERSION,
                sc.GEN_AI_EVALUATION_SCORE_LABEL, OUTCOME)
_UNSCORED_KEYS = (sc.GEN_AI_EVALUATION_NAME, sc.GEN_AI_AGENT_NAME, sc.TS_UNSCORED_REASON)


def _present(pairs: Iterable[tuple[str, Any]]) -> dict[str, AttributeValue]:
    return {key: value for key, value in pairs if value is not None}


class _Totals:
    """Cumulative sums by attribute values (None: the attribute is absent), read by callbacks."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        self._keys = keys
        self._lock = threading.Lock()
        self._sums: dict[tuple[Any, ...], float] = {}

    def add(self, values: tuple[Any, ...], amount: float) -> None:
        with self._lock:
            self._sums[values] = self._sums.get(values, 0) + amount

    def observe(self, options: CallbackOptions) -> list[Observation]:
        with self._lock:
            sums = list(self._sums.items())
        return [Observation(total, _present(zip(self._keys, values))) for values, total in sums]


class _Instruments:
    """The quality instruments on one meter."""

    def __init__(self, meter: Meter, results: _Totals, weighted: _Totals,
                 unscored: _Totals) -> None:
        meter.create_observable_counter(
            RESULTS, [results.observe], unit="{evaluation}",
            description="Scored results, by outcome and label")
        meter.create_observable_counter(
            RESULTS_WEIGHTED, [weighted.observe], unit="{call}",
            description="Calls the scored results stand for (each counts 1/sampling rate)")
        meter.create_observable_counter(
            UNSCORED, [unscored.observe], unit="{evaluation}",
            description="Sampled calls left unscored, by reason")
        self.score = meter.create_histogram(
            SCORE, unit="1", description="Online evaluation scores",
            explicit_bucket_boundaries_advisory=list(SCORE_BUCKETS))
        self.calls = meter.create_counter(
            JUDGE_CALLS, unit="{call}", description="Judge (LLM) calls made by scorers")
        self.errors = meter.create_counter(
            JUDGE_ERRORS, unit="{evaluation}",
            description="Scorer runs that failed (judge or scorer error), by error type")
        self.duration = meter.create_histogram(
            JUDGE_DURATION, unit="s", description="Judge time of one scorer run",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS))
        self.tokens = meter.create_counter(
            JUDGE_TOKENS, unit="{token}", description="Judge tokens, by gen_ai.token.type")
        self.cost = meter.create_counter(
            JUDGE_COST, unit="{USD}", description="Judge cost in US dollars")
