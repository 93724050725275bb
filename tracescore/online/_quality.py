"""Quality metrics of online scoring: score histogram, pass/fail results (raw and weighted by the
sampling rate), judge calls, latency, tokens, cost and errors, and unscored calls by reason.

Recorded from the `gen_ai.evaluation.result` attributes a run produced, so that the collector
config `collector_config/quality-metrics.yaml`, reading the same attributes from log records,
makes the same series. The names, units and attributes are in docs/watching-quality.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from opentelemetry.metrics import Meter
from opentelemetry.util.types import AttributeValue

from tracescore import _semconv as sc

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
         JUDGE_TOKENS, JUDGE_COST)

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
    """The instruments on one or more meters (the gateway adds one its /metrics reads)."""

    def __init__(self, meters: Iterable[Meter]) -> None:
        self._sets = [_Instruments(meter) for meter in meters]
        self._scorers: dict[str, tuple[str, float | None]] = {}

    def add_meter(self, meter: Meter) -> None:
        """Record on `meter` too, from now on."""
        self._sets = [*self._sets, _Instruments(meter)]

    def describe(self, scorers: Iterable[Any]) -> None:
        """Remember each online scorer's name and rate, for the unscored counts by scorer id."""
        for online in scorers:
            self._scorers[online.scorer_id] = (online.scorer_name, getattr(online, "rate", None))

    def result(self, attrs: Attributes, agent: str | None, error: str | None) -> None:
        """One finished run: its `gen_ai.evaluation.result` attributes (and the error type)."""
        name = attrs.get(sc.GEN_AI_EVALUATION_NAME)
        base: dict[str, AttributeValue] = {} if name is None else {sc.GEN_AI_EVALUATION_NAME: name}
        model = attrs.get(sc.TS_JUDGE_MODEL)
        judge = dict(base) if model is None else {**base, sc.GEN_AI_REQUEST_MODEL: model}
        if agent is not None:
            base[sc.GEN_AI_AGENT_NAME] = agent
        version = attrs.get(sc.TS_SCORER_VERSION)
        if version is not None:
            base[sc.TS_SCORER_VERSION] = version
        score = attrs.get(sc.GEN_AI_EVALUATION_SCORE_VALUE)
        calls = attrs.get(sc.TS_JUDGE_CALLS)
        tokens = [(kind, attrs.get(key)) for kind, key in
                  (("input", sc.TS_JUDGE_INPUT_TOKENS), ("output", sc.TS_JUDGE_OUTPUT_TOKENS))]
        cost = attrs.get(sc.TS_JUDGE_COST_USD)
        latency_ms = attrs.get(sc.TS_JUDGE_LATENCY_MS)
        counted: dict[str, AttributeValue] | None = None
        if error is None and isinstance(score, (int, float)):
            counted = {**base, OUTCOME: outcome(attrs)}
            label = attrs.get(sc.GEN_AI_EVALUATION_SCORE_LABEL)
            if label is not None:
                counted[sc.GEN_AI_EVALUATION_SCORE_LABEL] = label
        stands_for = weight(attrs.get(sc.TS_SAMPLING_RATE))
        for ins in self._sets:
            if counted is not None:
                ins.results.add(1, counted)
                ins.weighted.add(stands_for, counted)
                ins.score.record(float(score), base)  # type: ignore[arg-type]
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
        name, _ = self._scorers.get(scorer_id, (scorer_id, None))
        attrs: dict[str, AttributeValue] = {sc.GEN_AI_EVALUATION_NAME: name,
                                            sc.TS_UNSCORED_REASON: reason}
        if agent is not None:
            attrs[sc.GEN_AI_AGENT_NAME] = agent
        for ins in self._sets:
            ins.unscored.add(n, attrs)


class _Instruments:
    """The quality instruments on one meter."""

    def __init__(self, meter: Meter) -> None:
        self.results = meter.create_counter(
            RESULTS, unit="{evaluation}", description="Scored results, by outcome and label")
        self.weighted = meter.create_counter(
            RESULTS_WEIGHTED, unit="{call}",
            description="Calls the scored results stand for (each counts 1/sampling rate)")
        self.score = meter.create_histogram(
            SCORE, unit="1", description="Online evaluation scores",
            explicit_bucket_boundaries_advisory=list(SCORE_BUCKETS))
        self.unscored = meter.create_counter(
            UNSCORED, unit="{evaluation}", description="Sampled calls left unscored, by reason")
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
