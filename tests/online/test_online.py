"""ScoringSpanProcessor mechanics: sampling, filters, holding, sinks, faults, flush and shutdown.

Agent calls go through the real hand-off contract (`notify_agent_call` just before the agent
span ends, as the decorators do) on a private SDK TracerProvider; spans are checked in an
in-memory exporter. The small scorers below are test doubles for the scorer contract that let
a test hold a run open (gate) or make it fail; the end-to-end tests use the real scorers.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from _redis import RedisServer, redis
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import format_span_id

from tracescore import _semconv as sc
from tracescore._content import serialize
from tracescore._exceptions import ConfigurationError, ScorerError
from tracescore.instrument._calls import AgentCall, notify_agent_call
from tracescore.online import OnlineScorer, RecognisedCall, ScoringSpanProcessor
from tracescore.online._hold import HoldTable
from tracescore.online._listener import LISTENERS
from tracescore.online._processor import core_of, stashed
from tracescore.online._sampling import is_sampled
from tracescore.scoring._base import JudgeUsage, Scorer, ScoreResult


# --- test doubles of the scorer contract ------------------------------------------------------------
class LengthScorer(Scorer):
    """Scores len(output)/10; optionally waits on a gate or fails."""

    uses_judge = True

    def __init__(self, id: str = "length", *, gate: threading.Event | None = None,
                 fail: BaseException | None = None, cost: float | None = None) -> None:
        self.id = id
        self.name = id.title()
        self.gate = gate
        self.fail = fail
        self.cost = cost
        self.calls: list[dict[str, Any]] = []

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None) -> ScoreResult:
        self.calls.append({"input": input, "output": output, "ground_truth": ground_truth,
                           "run_id": run_id})
        while self.gate is not None and not self.gate.is_set():
            await asyncio.sleep(0.002)
        if self.fail is not None:
            raise self.fail
        return ScoreResult(
            run_id=run_id or "x", scorer_id=self.id, scorer_name=self.name,
            score=len(str(output)) / 10, label="long" if len(str(output)) > 5 else "short",
            reason=f"The score is {len(str(output)) / 10} because of its length.",
            preprocess_prompt="Split: <<output>>", preprocess_step_result={"statements": [output]},
            analyze_prompt="Judge the statements", analyze_step_result={"results": ["yes"]},
            generate_reason_prompt="Explain", usage=JudgeUsage(
                model="stub-judge", calls=3, input_tokens=30, output_tokens=12, cost_usd=self.cost,
                latency_ms=1.5,
            ),
        )


# --- harness -----------------------------------------------------------------------------------------
class Harness:
    """A private provider -> ScoringSpanProcessor -> SimpleSpanProcessor(in-memory) pipeline."""

    def __init__(self, scorers: Sequence[Any], downstream: SpanProcessor | None = None,
                 sampler: Any = None, **options: Any) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(sampler=sampler) if sampler else TracerProvider()
        # these tests watch scorer objects in this process; the scoring process has its own
        # tests (test_online_isolation.py)
        options.setdefault("isolation", "thread")
        self.processor = ScoringSpanProcessor(
            downstream or SimpleSpanProcessor(self.exporter), scorers, **options
        )
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("tracescore.test")

    def call(self, output: Any = "hello", *, name: str = "helper", input: Any = "question",
             ground_truth: Any = None, error: BaseException | None = None,
             attributes: dict[str, Any] | None = None) -> ReadableSpan | Any:
        """One agent call as the decorators make it; returns the span (still unexported maybe)."""
        attrs = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: name,
                 **(attributes or {})}
        with self.tracer.start_as_current_span(f"invoke_agent {name}", attributes=attrs) as span:
            notify_agent_call(AgentCall(span=span, name=name, input=input, output=output,
                                        error=error, ground_truth=ground_truth,
                                        attributes=attrs))
        return span

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def agent_spans(self) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith("invoke_agent")]

    def flush(self) -> bool:
        return self.provider.force_flush(30_000)

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError("condition not reached")
            time.sleep(0.005)

    def close(self) -> None:
        self.provider.shutdown()


@pytest.fixture
def make() -> Iterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def factory(scorers: Sequence[Any], **kwargs: Any) -> Harness:
        harness = Harness(scorers, **kwargs)
        made.append(harness)
        return harness

    yield factory
    for harness in made:
        harness.close()
    live = LISTENERS.live()
    assert not any(h.processor in live for h in made)  # shutdown unregistered them


def results(span: ReadableSpan) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for e in span.events if e.name == sc.GEN_AI_EVALUATION_RESULT]


def unscored(span: ReadableSpan) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for e in span.events if e.name == sc.TS_UNSCORED]


def steps(span: ReadableSpan) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for e in span.events if e.name == sc.TS_EVALUATION_STEP]


def assert_exactly_once(harness: Harness, spans: Sequence[Any]) -> None:
    exported = Counter(s.context.span_id for s in harness.agent_spans())
    expected = {s.get_span_context().span_id for s in spans}
    assert set(exported) == expected
    assert set(exported.values()) == {1}


# --- span sink -----------------------------------------------------------------------------------------
def test_sampled_span_is_held_then_exported_once_with_its_score_events(make) -> None:
    scorer = LengthScorer()
    h = make([scorer])
    span = h.call("hello world", input="What?")
    assert h.flush()
    (exported,) = h.agent_spans()
    assert exported.context.span_id == span.get_span_context().span_id
    (result,) = results(exported)
    assert result[sc.GEN_AI_EVALUATION_NAME] == "Length"
    assert result[sc.TS_SCORER_ID] == "length"
    assert result[sc.GEN_AI_EVALUATION_SCORE_VALUE] == pytest.approx(1.1)
    assert result[sc.GEN_AI_EVALUATION_SCORE_LABEL] == "long"
    assert result[sc.GEN_AI_EVALUATION_EXPLANATION].startswith("The score is 1.1")
    assert result[sc.TS_RUN_ID] == scorer.calls[0]["run_id"]
    assert result[sc.TS_SAMPLING_RATE] == 1.0
    assert result[sc.TS_JUDGE_MODEL] == "stub-judge"
    assert result[sc.TS_SCORER_VERSION] == scorer.version  # which scorer, options and judge
    assert (result[sc.TS_JUDGE_CALLS], result[sc.TS_JUDGE_INPUT_TOKENS],
            result[sc.TS_JUDGE_OUTPUT_TOKENS]) == (3, 30, 12)
    assert [s[sc.TS_STEP_NAME] for s in steps(exported)] == ["preprocess", "analyze", "reason"]
    assert steps(exported)[0][sc.TS_STEP_PROMPT] == "Split: <<output>>"
    assert steps(exported)[0][sc.TS_STEP_RESULT] == serialize({"statements": ["hello world"]})
    # the scorer saw the real in-process input/output; the span keeps its own attributes
    assert scorer.calls[0]["input"] == "What?" and scorer.calls[0]["output"] == "hello world"
    assert exported.attributes[sc.GEN_AI_AGENT_NAME] == "helper"
    assert exported.end_time is not None and exported.status.status_code.name == "UNSET"
    stats = h.processor.stats()
    assert (stats["sampled"], stats["scored"], stats["failed"], stats["held"]) == (1, 1, 0, 0)


def test_offered_spans_are_scored_or_marked_unscored_and_exported_once(make) -> None:
    # spans read elsewhere: offer() scores a recognised one, offer_unscored() says why not
    h = make([OnlineScorer(LengthScorer(), agents=["reader"])])
    provider = TracerProvider()  # not the harness's: these spans never reach on_end
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("elsewhere")
    for name in ("invoke_agent reader", "invoke_agent other", "invoke_agent mute"):
        tracer.start_span(name, attributes={sc.GEN_AI_AGENT_NAME: name.split()[1]}).end()
    read, other, mute = memory.get_finished_spans()
    call = RecognisedCall(convention="genai", agent="reader", input="q?", output="hello world")
    assert h.processor.offer(read, call)
    assert not h.processor.offer(other, RecognisedCall("genai", "other", "q?", "hello"))
    h.processor.offer_unscored(mute, "reader", "no_llm_calls")
    assert h.flush()
    by_name = {s.name: s for s in h.spans()}
    assert len(h.spans()) == 3
    assert results(by_name["invoke_agent reader"])[0][sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.1
    assert by_name["invoke_agent other"].events == ()
    (why,) = unscored(by_name["invoke_agent mute"])
    assert why[sc.TS_UNSCORED_REASON] == "no_llm_calls" and why[sc.TS_SCORER_ID] == "length"
    stats = h.processor.stats()
    assert (stats["sampled"], stats["scored"], stats["dropped.no_llm_calls"]) == (1, 1, 1)


def test_held_span_is_not_exported_before_its_score(make) -> None:
    gate = threading.Event()
    h = make([LengthScorer(gate=gate)])
    h.call()
    assert h.agent_spans() == []
    assert h.processor.stats()["held"] == 1
    gate.set()
    assert h.flush()
    assert len(results(h.agent_spans()[0])) == 1


def test_unsampled_and_non_agent_spans_are_exported_at_once(make) -> None:
    scorer = LengthScorer()
    h = make([OnlineScorer(scorer, rate=0.0)])
    span = h.call()
    with h.tracer.start_as_current_span("execute_tool search"):
        pass
    names = [s.name for s in h.spans()]  # no flush: exported synchronously on end
    assert names == ["invoke_agent helper", "execute_tool search"]
    assert h.spans()[0].events == ()
    assert h.flush() and scorer.calls == []
    assert_exactly_once(h, [span])


def test_traces_not_sampled_by_the_tracer_are_never_scored(make) -> None:
    scorer = LengthScorer()
    h = make([scorer], sampler=ALWAYS_OFF)
    for _ in range(5):
        h.call()
    assert h.flush()
    assert scorer.calls == [] and h.spans() == [] and h.processor.stats()["sampled"] == 0


def test_sampling_rate_follows_the_trace_id(make) -> None:
    scorer = LengthScorer()
    h = make([OnlineScorer(scorer, rate=0.3)])
    spans = [h.call() for _ in range(300)]
    assert h.flush()
    expected = {s.get_span_context().span_id for s in spans
                if is_sampled(s.get_span_context().trace_id, 0.3)}
    scored = {s.context.span_id for s in h.agent_spans() if results(s)}
    assert scored == expected and 30 < len(expected) < 150
    assert all(results(s)[0][sc.TS_SAMPLING_RATE] == 0.3 for s in h.agent_spans() if results(s))
    assert_exactly_once(h, spans)


def test_the_listener_filter_wants_at_span_start_only_what_a_scorer_may_sample(make) -> None:
    from opentelemetry import context as otel_context

    from tracescore.instrument import _calls

    h = make([OnlineScorer(LengthScorer("a"), rate=0.3), OnlineScorer(LengthScorer("b"), rate=0.1)])
    spans = [h.tracer.start_span("invoke_agent helper") for _ in range(300)]
    try:
        wanted = {s.get_span_context().span_id for s in spans if LISTENERS.wants_call(s)}
        expected = {s.get_span_context().span_id for s in spans
                    if is_sampled(s.get_span_context().trace_id, 0.3)}
        assert wanted == expected and 30 < len(wanted) < 150  # the higher rate decides
        assert any(_calls.wants_agent_call(s) for s in spans)
        token = otel_context.attach(otel_context.set_value(sc.CTX_EVAL_RUN_ID, "eval-run"))
        try:  # inside run_evals the eval scores its calls itself
            assert not any(LISTENERS.wants_call(s) for s in spans)
        finally:
            otel_context.detach(token)
    finally:
        for s in spans:
            s.end()
    off = make([LengthScorer()], sampler=ALWAYS_OFF)
    assert not LISTENERS.wants_call(off.tracer.start_span("invoke_agent helper"))


def test_nested_rates_score_subsets_of_each_other(make) -> None:
    broad, narrow = LengthScorer("broad"), LengthScorer("narrow")
    h = make([OnlineScorer(broad, rate=0.5), OnlineScorer(narrow, rate=0.1)])
    for _ in range(300):
        h.call()
    assert h.flush()
    by = {sid: {s.context.span_id for s in h.agent_spans()
                if any(r[sc.TS_SCORER_ID] == sid for r in results(s))} for sid in ("broad", "narrow")}
    assert by["narrow"] < by["broad"]


def test_filters_by_agent_attributes_and_predicate(make) -> None:
    by_agent, by_attr, by_pred = LengthScorer("a"), LengthScorer("b"), LengthScorer("c")

    def broken(call: AgentCall) -> bool:
        raise RuntimeError("predicate bug")

    h = make([
        OnlineScorer(by_agent, agents=["support"]),
        OnlineScorer(by_attr, attributes={"tier": "gold"}),
        OnlineScorer(by_pred, predicate=lambda call: "refund" in str(call.input)),
        OnlineScorer(LengthScorer("d"), predicate=broken),
    ])
    h.call(name="support", input="hi")
    h.call(name="sales", input="please refund", attributes={"tier": "gold"})
    h.call(name="sales", input="hi", attributes={"tier": "silver"})
    assert h.flush()
    assert [c["input"] for c in by_agent.calls] == ["hi"]
    assert [c["input"] for c in by_attr.calls] == ["please refund"]
    assert [c["input"] for c in by_pred.calls] == ["please refund"]
    assert len(h.agent_spans()) == 3


def test_ground_truth_from_the_call_or_a_reference_dataset(make) -> None:
    from_call, from_map, from_fn = LengthScorer("a"), LengthScorer("b"), LengthScorer("c")
    h = make([
        OnlineScorer(from_call),
        OnlineScorer(from_map, reference={"capital of France?": "Paris", '{"q":1}': "one",
                                          '{"user":"ann@example.com"}': "two"}),
        OnlineScorer(from_fn, reference=lambda question: f"expected for {question}"),
    ])
    h.call(input="capital of France?", ground_truth="Paris (given)")
    h.call(input="capital of France?")
    h.call(input={"q": 1})
    h.call(input={"user": "ann@example.com"})  # keys are matched before any redaction
    assert h.flush()
    assert [c["ground_truth"] for c in from_call.calls] == ["Paris (given)", None, None, None]
    assert [c["ground_truth"] for c in from_map.calls] == ["Paris (given)", "Paris", "one", "two"]
    assert [c["ground_truth"] for c in from_fn.calls][1] == "expected for capital of France?"


def test_failed_agent_calls_are_not_scored(make) -> None:
    scorer = LengthScorer()
    h = make([scorer])
    span = h.call(output=None, error=ValueError("agent failed"))
    assert h.flush() and scorer.calls == []
    assert_exactly_once(h, [span])


def test_rate_limit_caps_scored_calls_and_counts_the_rest(make) -> None:
    scorer = LengthScorer()
    h = make([OnlineScorer(scorer, rate_limit_per_minute=3)])
    spans = [h.call() for _ in range(10)]
    assert h.flush()
    assert len(scorer.calls) == 3
    stats = h.processor.stats()
    assert stats["dropped.rate_limited"] == 7 and stats["scored"] == 3
    assert_exactly_once(h, spans)


def test_cost_budget_stops_judge_scoring_when_spent(make) -> None:
    scorer = LengthScorer(cost=0.4)
    h = make([OnlineScorer(scorer, budget_usd_per_hour=1.0)])
    for _ in range(4):
        h.call()
        assert h.flush()
    assert len(scorer.calls) == 2  # 0.8 spent; a third (~0.4 more) would exceed 1.0
    assert h.processor.stats()["dropped.budget_exhausted"] == 2
    assert results(h.agent_spans()[0])[0][sc.TS_JUDGE_COST_USD] == pytest.approx(0.4)


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    yield server
    server.stop()


def test_fleet_limits_hold_across_processors_sharing_one_redis(make, redis_server) -> None:
    """Two scoring processors (two replicas' worth) share one Redis: 5 runs a minute in all, and
    a judge spend of $1 an hour; the refused runs count as rate_limited."""
    from tracescore.online._fleet_limits import FleetLimiter

    scorers = [LengthScorer(cost=0.15), LengthScorer(cost=0.15)]
    harnesses = [make([OnlineScorer(scorer, fleet_limits=FleetLimiter(
        redis_server.url, "length", requests_per_minute=5, budget_usd_per_hour=1.0))])
        for scorer in scorers]
    for _ in range(6):
        for h in harnesses:
            h.call()
            assert h.flush()
    assert sum(len(s.calls) for s in scorers) == 5
    assert sum(h.processor.stats()["dropped.rate_limited"] for h in harnesses) == 7
    totals = redis.Redis.from_url(redis_server.url).hget("{tracescore:length}:totals", "usd")
    assert float(totals or 0) == pytest.approx(5 * 0.15)


# --- failures and limits -----------------------------------------------------------------------------------
def test_scorer_failure_is_an_event_with_error_type(make) -> None:
    failure = ScorerError("reply is not JSON", scorer_id="length", step="analyze",
                          partial={"preprocess_prompt": "Split", "preprocess_step_result": {"s": 1}},
                          raw_reply="not json {")
    h = make([LengthScorer(fail=failure)])
    span = h.call()
    assert h.flush()
    (exported,) = h.agent_spans()
    (result,) = results(exported)
    assert result[sc.ERROR_TYPE] == "ScorerError"
    assert result[sc.TS_FAILED_STEP] == "analyze"
    assert sc.GEN_AI_EVALUATION_SCORE_VALUE not in result
    assert "reply is not JSON" in result[sc.GEN_AI_EVALUATION_EXPLANATION]
    assert [s[sc.TS_STEP_NAME] for s in steps(exported)] == ["preprocess", "analyze"]
    assert steps(exported)[1][sc.TS_STEP_RESULT] == "not json {"
    assert h.processor.stats()["failed"] == 1
    assert_exactly_once(h, [span])


class _UnprintableError(Exception):
    def __str__(self) -> str:
        raise ValueError("no text for this error")


def test_a_scorer_error_that_cannot_be_printed_is_still_a_failure_event(make) -> None:
    h = make([LengthScorer("broken", fail=_UnprintableError())])
    span = h.call()
    assert h.flush()
    (exported,) = h.agent_spans()
    assert unscored(exported) == []
    (result,) = results(exported)
    assert result[sc.ERROR_TYPE] == "_UnprintableError"
    assert h.processor.stats()["failed"] == 1
    assert_exactly_once(h, [span])


def test_scorer_timeout_is_a_failure_event(make) -> None:
    h = make([OnlineScorer(LengthScorer(gate=threading.Event()), timeout_s=0.05)])
    h.call()
    assert h.flush()
    (result,) = results(h.agent_spans()[0])
    assert result[sc.ERROR_TYPE] == "TimeoutError"


def test_slow_scoring_beyond_max_wait_exports_unscored_and_late_result_goes_elsewhere(make) -> None:
    gate = threading.Event()
    h = make([OnlineScorer(LengthScorer(gate=gate), sinks=("span", "carrier"))], max_wait_s=0.05)
    span = h.call()
    h.wait_for(lambda: len(h.agent_spans()) == 1)
    (exported,) = h.agent_spans()
    assert results(exported) == []
    (why,) = unscored(exported)
    assert why[sc.TS_UNSCORED_REASON] == "timeout" and why[sc.TS_SCORER_ID] == "length"
    assert h.processor.stats()["held_timeout"] == 1
    gate.set()
    assert h.flush()
    carriers = [s for s in h.spans() if s.name == "evaluation Length"]
    assert len(carriers) == 1 and len(results(carriers[0])) == 1
    assert_exactly_once(h, [span])  # the late result did not export the agent span again


class _SlowScorer(LengthScorer):
    """Takes `delay` seconds per run; records when each run started."""

    def __init__(self, delay: float) -> None:
        super().__init__("slow")
        self.delay = delay
        self.started = 0

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None) -> ScoreResult:
        self.started += 1
        await asyncio.sleep(self.delay)
        return await super().arun(input=input, output=output, run_id=run_id)


def test_a_run_that_cannot_land_before_its_span_leaves_never_starts(make) -> None:
    # one run at a time, 0.3 s each, spans held 1 s: the runs started from 0.9 s on would be
    # cut off when their spans leave; admission starts only those that can still land
    slow = _SlowScorer(0.3)
    h = make([slow], max_wait_s=1.0, concurrency=1)
    for _ in range(8):
        h.call()
    h.wait_for(lambda: len(h.agent_spans()) == 8)  # scored, or timed out
    landed = sum(1 for span in h.agent_spans() if results(span))
    stats = h.processor.stats()
    assert 2 <= landed < 8
    assert slow.started == landed  # every run started landed: none spent in vain
    assert stats["dropped"] == stats["held_timeout"] == 8 - landed  # counted as before
    assert {r[sc.TS_UNSCORED_REASON] for s in h.agent_spans() for r in unscored(s)} == {"timeout"}


def test_one_slow_scorer_does_not_hide_a_fast_ones_result(make) -> None:
    h = make([LengthScorer("fast"), LengthScorer("slow", gate=threading.Event())],
             max_wait_s=0.05, shutdown_timeout_s=0.05)
    h.call()
    h.wait_for(lambda: len(h.agent_spans()) == 1)
    (exported,) = h.agent_spans()
    assert [r[sc.TS_SCORER_ID] for r in results(exported)] == ["fast"]
    assert [u[sc.TS_SCORER_ID] for u in unscored(exported)] == ["slow"]


def test_burst_overflows_the_queue_every_span_arrives_once_and_drops_are_counted(make) -> None:
    gate = threading.Event()
    scorer = LengthScorer(gate=gate)
    h = make([scorer], queue_size=20, concurrency=2, max_held_spans=10_000)
    spans: list[Any] = []
    lock = threading.Lock()

    def burst() -> None:
        mine = [h.call() for _ in range(750)]
        with lock:
            spans.extend(mine)

    threads = [threading.Thread(target=burst) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = h.processor.stats()
    dropped = stats["dropped.queue_full"]
    assert dropped >= 3000 - 22 and stats["sampled"] == 3000
    full = [s for s in h.agent_spans() if unscored(s)]
    assert len(full) == dropped
    assert {u[sc.TS_UNSCORED_REASON] for s in full for u in unscored(s)} == {"queue_full"}
    gate.set()
    assert h.flush()
    assert h.processor.stats()["scored"] == 3000 - dropped
    assert_exactly_once(h, spans)


def test_held_span_limit_exports_extra_spans_unscored(make) -> None:
    gate = threading.Event()
    h = make([LengthScorer(gate=gate)], max_held_spans=5, queue_size=100)
    spans = [h.call() for _ in range(20)]
    early = h.agent_spans()
    assert len(early) == 15
    assert {u[sc.TS_UNSCORED_REASON] for s in early for u in unscored(s)} == {"held_overflow"}
    gate.set()
    assert h.flush()
    assert sum(1 for s in h.agent_spans() if results(s)) == 5
    assert h.processor.stats()["dropped.held_overflow"] == 15
    assert_exactly_once(h, spans)


def test_held_overflow_spends_no_judge_run_on_a_score_that_has_nowhere_to_go(make) -> None:
    gate = threading.Event()
    span_only = LengthScorer("span-only", gate=gate)
    carrier = LengthScorer("carrier-only")
    h = make([span_only, OnlineScorer(carrier, sinks=["carrier"])], max_held_spans=1)
    spans = [h.call("first"), h.call("second")]  # the second finds the held table full
    gate.set()
    assert h.flush()
    assert [c["output"] for c in span_only.calls] == ["first"]
    assert [c["output"] for c in carrier.calls] == ["first", "second"]
    stats = h.processor.stats()
    assert stats["sampled"] == 4 and stats["dropped.held_overflow"] == 1
    assert stats["scored"] + stats["dropped"] == stats["sampled"]
    assert_exactly_once(h, spans)


class _PerTraceSpanIds(RandomIdGenerator):
    """Span ids unique within a trace only (a legal generator): every root span gets id 1."""

    def generate_span_id(self) -> int:
        return 1


def test_held_spans_of_different_traces_with_the_same_span_id_are_each_exported(make) -> None:
    gate = threading.Event()
    h = make([LengthScorer(gate=gate)])
    h.tracer.id_generator = _PerTraceSpanIds()
    spans = [h.call("first"), h.call("second")]
    assert len({s.get_span_context().span_id for s in spans}) == 1
    gate.set()
    assert h.flush()
    exported = Counter((s.context.trace_id, s.context.span_id) for s in h.agent_spans())
    assert exported == Counter(
        (s.get_span_context().trace_id, s.get_span_context().span_id) for s in spans
    )
    assert sorted(r[sc.GEN_AI_EVALUATION_SCORE_VALUE] for s in h.agent_spans()
                  for r in results(s)) == [0.5, 0.6]


def test_shutdown_with_jobs_in_flight_exports_everything_once(make) -> None:
    gate = threading.Event()  # never opened: the judge hangs
    carrier = LengthScorer("carrier-only", gate=gate)
    h = make([LengthScorer(gate=gate), OnlineScorer(carrier, sinks=["carrier"])],
             concurrency=2, shutdown_timeout_s=0.1)
    spans = [h.call() for _ in range(10)]
    h.provider.shutdown()
    assert all(unscored(s)[0][sc.TS_UNSCORED_REASON] == "shutdown" for s in h.agent_spans()
               if unscored(s))
    assert_exactly_once(h, spans)
    stats = h.processor.stats()
    assert stats["dropped.shutdown"] == 20 and stats["scored"] == 0
    h.processor.shutdown()  # idempotent
    after = h.call()  # after shutdown: no scoring, no exception
    assert after is not None and h.processor.stats()["sampled"] == 20


class _GatedDownstream(SimpleSpanProcessor):
    """Exports synchronously; an agent span's export first waits for `release`."""

    def __init__(self, exporter: SpanExporter) -> None:
        super().__init__(exporter)
        self.exporting, self.release, self.shut = threading.Event(), threading.Event(), threading.Event()

    def on_end(self, span: ReadableSpan) -> None:
        if span.name.startswith("invoke_agent"):
            self.exporting.set()
            self.release.wait(30)
        super().on_end(span)

    def shutdown(self) -> None:
        self.shut.set()
        super().shutdown()


class _AnnouncedWaits:
    """The hold table's `wait_released`, announcing when someone starts waiting on it."""

    def __init__(self, held: HoldTable) -> None:
        self._wait_released = held.wait_released
        self.waiting = threading.Event()

    def __call__(self, timeout: float) -> bool:
        self.waiting.set()
        return self._wait_released(timeout)


def test_shutdown_does_not_close_downstream_under_a_span_being_released(make) -> None:
    # the timer has taken a held span past its max wait and is exporting it when shutdown comes
    exporter = InMemorySpanExporter()
    downstream = _GatedDownstream(exporter)
    h = make([LengthScorer(gate=threading.Event())], downstream=downstream, max_wait_s=0.05,
             shutdown_timeout_s=0.1)
    held = core_of(h.processor).held
    waits = held.wait_released = _AnnouncedWaits(held)  # type: ignore[method-assign]
    span = h.call()
    assert downstream.exporting.wait(20)
    closing = threading.Thread(target=h.processor.shutdown)
    closing.start()
    # the export goes on once shutdown waits for it (its wait is bounded: 1 s) or, unfixed, once
    # shutdown has closed the exporter under it; the order below says which
    deadline = time.monotonic() + 20
    while not (waits.waiting.wait(0.005) or downstream.shut.is_set()):
        assert time.monotonic() < deadline
    downstream.release.set()
    closing.join(20)
    assert [s.context.span_id for s in exporter.get_finished_spans()] == [
        span.get_span_context().span_id
    ]


_EXIT_SCRIPT = """
import asyncio, sys
import tracescore
from tracescore.scoring import JudgeUsage, ScoreResult

class Resolving:  # like a judge call on a fresh connection: a DNS lookup in the loop's executor
    id = "resolving"
    name = "Resolving"
    uses_judge = False

    async def arun(self, *, input, output, ground_truth=None, run_id=None):
        await asyncio.sleep(0.2)  # still running when the program ends
        await asyncio.get_running_loop().getaddrinfo("localhost", 80)
        return ScoreResult(run_id=run_id or "r", scorer_id=self.id, scorer_name=self.name,
                           score=1.0, label="ok", reason=None, preprocess_prompt=None,
                           preprocess_step_result=None, analyze_prompt=None,
                           analyze_step_result=None, generate_reason_prompt=None,
                           usage=JudgeUsage(model=None))

tracescore.configure(exporter="file", file_path=sys.argv[1], scorers=[Resolving()], batch=False)

@tracescore.agent
def helper(question):
    return "answer"

helper("question")
"""


def test_scoring_pending_at_interpreter_exit_can_still_resolve_names(tmp_path) -> None:
    # At exit the stdlib thread pools refuse new work, and asyncio resolves host names in one.
    script, out = tmp_path / "agent.py", tmp_path / "spans.jsonl"
    script.write_text(_EXIT_SCRIPT)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    subprocess.run([sys.executable, str(script), str(out)], env=env, check=True, timeout=120)
    events = [
        {a["key"]: next(iter(a["value"].values())) for a in event.get("attributes", [])}
        for line in out.read_text().splitlines()
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
        for event in span.get("events", [])
        if event["name"] == sc.GEN_AI_EVALUATION_RESULT
    ]
    assert len(events) == 1
    assert sc.ERROR_TYPE not in events[0], events[0]
    assert events[0][sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0


def test_flush_waits_for_pending_scoring(make) -> None:
    h = make([LengthScorer()], concurrency=3)
    spans = [h.call() for _ in range(50)]
    assert h.flush()
    assert all(len(results(s)) == 1 for s in h.agent_spans())
    assert_exactly_once(h, spans)


def test_flush_timeout_exports_held_spans_unscored(make) -> None:
    gate = threading.Event()
    h = make([LengthScorer(gate=gate)])
    span = h.call()
    assert h.provider.force_flush(50) is False
    (exported,) = h.agent_spans()
    assert unscored(exported)[0][sc.TS_UNSCORED_REASON] == "flush"
    gate.set()
    assert h.flush()
    assert_exactly_once(h, [span])


class _FlakyProcessor(SimpleSpanProcessor):
    """Raises from on_end for the first `n` spans it receives, then exports normally."""

    def __init__(self, exporter: SpanExporter, n: int) -> None:
        super().__init__(exporter)
        self.n = n

    def on_end(self, span: ReadableSpan) -> None:
        if self.n > 0:
            self.n -= 1
            raise RuntimeError("exporter down")
        super().on_end(span)


class _FailingExporter(SpanExporter):
    def __init__(self) -> None:
        self.attempts = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.attempts += len(spans)
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        pass


def test_failing_downstream_never_reaches_the_agent_or_stops_the_worker(make) -> None:
    exporter = InMemorySpanExporter()
    h = make([LengthScorer()], downstream=_FlakyProcessor(exporter, n=2))
    for _ in range(5):
        h.call()
    assert h.flush()
    assert len(exporter.get_finished_spans()) == 3
    assert all(results(s) for s in exporter.get_finished_spans())


def test_a_failing_downstream_does_not_cost_a_carrier_score_or_its_budget(make) -> None:
    exporter = InMemorySpanExporter()
    carrier = LengthScorer("carrier-only")
    online = OnlineScorer(carrier, sinks="carrier", budget_usd_per_hour=1.0)
    h = make([online], downstream=_FlakyProcessor(exporter, n=1))
    h.call("first")  # its export fails: the agent does not see it, its scoring still runs
    assert h.flush()
    h.call("second")
    assert h.flush()
    assert [c["output"] for c in carrier.calls] == ["first", "second"]
    assert online._budget is not None and online._budget._in_flight == 0
    assert h.processor.stats()["scored"] == 2


def test_failing_exporter_is_handled_by_the_export_processor(make) -> None:
    exporter = _FailingExporter()
    h = make([LengthScorer()], downstream=SimpleSpanProcessor(exporter))
    for _ in range(5):
        h.call()
    assert h.flush()
    assert exporter.attempts == 5 and h.processor.stats()["scored"] == 5


# --- carrier, log and metrics sinks --------------------------------------------------------------------
def test_carrier_sink_exports_a_linked_child_span_and_does_not_hold(make) -> None:
    gate = threading.Event()
    h = make([OnlineScorer(LengthScorer(gate=gate), sinks="carrier")])
    span = h.call("hello world")
    (agent_span,) = h.agent_spans()  # exported at once, without events
    assert agent_span.events == ()
    gate.set()
    assert h.flush()
    (carrier,) = [s for s in h.spans() if s.name == "evaluation Length"]
    ctx = span.get_span_context()
    assert carrier.context.trace_id == ctx.trace_id
    assert carrier.parent.span_id == ctx.span_id
    assert [link.context.span_id for link in carrier.links] == [ctx.span_id]
    assert carrier.attributes[sc.TS_EVALUATED_SPAN_ID] == format_span_id(ctx.span_id)
    assert carrier.attributes[sc.GEN_AI_AGENT_NAME] == "helper"
    assert carrier.resource == agent_span.resource
    assert results(carrier)[0][sc.GEN_AI_EVALUATION_SCORE_VALUE] == pytest.approx(1.1)
    assert carrier.start_time <= carrier.end_time


def test_log_sink_emits_evaluation_records_tied_to_the_agent_span(make) -> None:
    log_exporter = InMemoryLogRecordExporter()
    loggers = LoggerProvider()
    loggers.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
    scorer = LengthScorer()
    h = make([OnlineScorer(scorer, sinks=["log"])], logger_provider=loggers)
    span = h.call()
    assert h.flush()
    (agent_span,) = h.agent_spans()
    assert agent_span.events == ()
    records = [r.log_record for r in log_exporter.get_finished_logs()]
    main = [r for r in records if r.event_name == sc.GEN_AI_EVALUATION_RESULT]
    assert len(main) == 1 and len(records) == 4  # + preprocess, analyze, reason steps
    ctx = span.get_span_context()
    assert (main[0].trace_id, main[0].span_id) == (ctx.trace_id, ctx.span_id)
    assert main[0].attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] == pytest.approx(0.5)
    assert main[0].attributes[sc.TS_SCORER_VERSION] == scorer.version  # provenance, as on spans


def test_log_sink_without_a_logger_provider_is_a_no_op(make) -> None:
    h = make([OnlineScorer(LengthScorer(), sinks=["log", "span"])])
    h.call()
    assert h.flush()
    assert len(results(h.agent_spans()[0])) == 1


def test_metrics_histogram_and_counters(make) -> None:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    h = make([LengthScorer("good"), LengthScorer("bad", fail=RuntimeError("judge down"))],
             meter_provider=meters)
    for _ in range(3):
        h.call("hello world", name="support")
    assert h.flush()
    points: dict[str, list[Any]] = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                points[metric.name] = list(metric.data.data_points)
    sampled = {p.attributes[sc.TS_SCORER_ID]: p.value for p in points[sc.METRIC_EVALUATION_SAMPLED]}
    assert sampled == {"good": 3, "bad": 3}
    (scored,) = points[sc.METRIC_EVALUATION_SCORED]
    assert scored.value == 3 and scored.attributes[sc.GEN_AI_AGENT_NAME] == "support"
    (failed,) = points[sc.METRIC_EVALUATION_FAILED]
    assert failed.value == 3 and failed.attributes[sc.ERROR_TYPE] == "RuntimeError"
    (histogram,) = points[sc.METRIC_EVALUATION_SCORE]
    assert histogram.count == 3 and histogram.sum == pytest.approx(3.3)
    meters.shutdown()


# --- other instrumentations, isolation, configuration -------------------------------------------------
def test_genai_invoke_agent_spans_of_other_instrumentations_are_opt_in(make) -> None:
    import json

    messages_in = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Capital?"}]}])
    messages_out = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Paris"}]}])
    attrs = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: "other",
             sc.GEN_AI_INPUT_MESSAGES: messages_in, sc.GEN_AI_OUTPUT_MESSAGES: messages_out}
    for enabled in (False, True):
        scorer = LengthScorer()
        h = make([scorer], score_genai_spans=enabled)
        tracer = h.provider.get_tracer("some.other.instrumentation")
        with tracer.start_as_current_span("invoke_agent other", attributes=attrs):
            pass
        assert h.flush()
        if enabled:
            assert scorer.calls[0]["input"] == [{"role": "user", "content": "Capital?"}]
            assert scorer.calls[0]["output"] == "Paris"
            assert len(results(h.agent_spans()[0])) == 1
        else:
            assert scorer.calls == [] and len(h.agent_spans()) == 1


def test_recognise_option_scores_spans_of_a_user_mapping_with_their_ground_truth(make) -> None:
    scorer = LengthScorer()
    mapping = {"name": "mine", "input": "q", "output": "a", "ground_truth": "expected",
               "agent": "who", "attributes": {"kind": "agent"}}
    h = make([scorer], recognise=[mapping])
    tracer = h.provider.get_tracer("some.other.instrumentation")
    for kind in ("agent", "tool"):
        with tracer.start_as_current_span("step", attributes={
                "q": "Capital?", "a": "Paris", "expected": "Paris", "who": "geo", "kind": kind}):
            pass
    assert h.flush()
    assert scorer.calls == [{"input": "Capital?", "output": "Paris", "ground_truth": "Paris",
                             "run_id": scorer.calls[0]["run_id"]}]
    (scored,) = [s for s in h.spans() if results(s)]
    assert scored.attributes["kind"] == "agent"


@pytest.mark.parametrize("recognise, message", [
    (["langchain"], "unknown convention 'langchain'"),
    ([{"input": "q"}], r"ScoringSpanProcessor recognise\[0\]\.output is required"),
    ("genai", "must be a list"),
])
def test_bad_recognise_option_is_a_configuration_error(recognise: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ScoringSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()), [LengthScorer()],
                             recognise=recognise)


def test_each_processor_scores_only_its_own_providers_spans(make) -> None:
    a, b = LengthScorer("a"), LengthScorer("b")
    ha, hb = make([a]), make([b])
    ha.call(input="for a")
    hb.call(input="for b")
    assert ha.flush() and hb.flush()
    assert [c["input"] for c in a.calls] == ["for a"]
    assert [c["input"] for c in b.calls] == ["for b"]


def test_a_processor_keeps_nothing_for_calls_of_a_provider_it_never_served(make) -> None:
    idle_online = OnlineScorer(LengthScorer("idle"), rate_limit_per_minute=1)
    idle = make([idle_online])  # no span ever starts on its provider
    busy = make([LengthScorer("busy")])
    busy.call(output="x" * 100_000)
    assert busy.flush()
    assert stashed(idle.processor) == 0  # nothing stashed that no on_end would ever take
    assert idle_online._limiter is not None and idle_online._limiter.try_acquire()


@pytest.mark.parametrize("kwargs, message", [
    ({"rate": 1.5}, "rate must be within"),
    ({"rate": "0.5"}, "rate must be a number"),
    ({"sinks": ["span", "kafka"]}, "sinks must be one or more"),
    ({"sinks": []}, "sinks must be one or more"),
    ({"agents": [""]}, "agents must be non-empty"),
    ({"attributes": ["tier"]}, "attributes must be a mapping"),
    ({"predicate": 3}, "predicate must be callable"),
    ({"rate_limit_per_minute": 0}, "rate_limit_per_minute must be > 0"),
    ({"budget_usd_per_hour": -1}, "budget_usd_per_hour must be >= 0"),
    ({"reference": 3}, "reference must be a mapping or a callable"),
    ({"timeout_s": 0}, "timeout_s must be > 0"),
])
def test_online_scorer_validates_at_construction(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        OnlineScorer(LengthScorer(), **kwargs)


def test_processor_validates_at_construction() -> None:
    before = LISTENERS.live()
    downstream = SimpleSpanProcessor(InMemorySpanExporter())
    with pytest.raises(ConfigurationError, match="non-empty string `id`"):
        ScoringSpanProcessor(downstream, [object()])
    with pytest.raises(ConfigurationError, match="own id; duplicated: length"):
        ScoringSpanProcessor(downstream, [LengthScorer(), LengthScorer()])
    with pytest.raises(ConfigurationError, match="at least one scorer"):
        ScoringSpanProcessor(downstream, [])
    with pytest.raises(ConfigurationError, match="queue_size must be an integer >= 1"):
        ScoringSpanProcessor(downstream, [LengthScorer()], queue_size=0)
    with pytest.raises(ConfigurationError, match="max_wait_s must be > 0"):
        ScoringSpanProcessor(downstream, [LengthScorer()], max_wait_s=0)
    with pytest.raises(ConfigurationError, match="downstream SpanProcessor"):
        ScoringSpanProcessor(object(), [LengthScorer()])  # type: ignore[arg-type]
    assert LISTENERS.live() == before  # nothing half-built was registered


def test_a_single_scorer_is_accepted_and_defaults_are_span_sink_rate_one() -> None:
    processor = ScoringSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()), LengthScorer())
    try:
        (online,) = processor.scorers
        assert (online.rate, set(online.sinks)) == (1.0, {"span"})
    finally:
        processor.shutdown()


# --- fork ------------------------------------------------------------------------------------------------
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_starts_its_own_worker_and_leaves_parent_spans_alone(make) -> None:
    gate = threading.Event()
    h = make([LengthScorer(gate=gate)])
    parent_span = h.call("parent")  # held in the parent, its job running in the parent worker
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            gate.set()  # the child's copy of the gate
            h.exporter.clear()
            child_span = h.call("child output")
            ok = h.flush()
            exported = h.agent_spans()
            good = (ok and len(exported) == 1
                    and exported[0].context.span_id == child_span.get_span_context().span_id
                    and len(results(exported[0])) == 1)
            code = 0 if good else 2
        finally:
            os.write(write_fd, bytes([code]))
            os._exit(code)
    os.close(write_fd)
    status = os.read(read_fd, 1)
    os.close(read_fd)
    os.waitpid(pid, 0)
    assert status == bytes([0])
    assert h.agent_spans() == []  # still held in the parent
    gate.set()
    assert h.flush()
    assert_exactly_once(h, [parent_span])
    assert len(results(h.agent_spans()[0])) == 1


def test_forked_child_is_not_blocked_by_locks_another_parent_thread_held_at_fork(make) -> None:
    # A parent thread (e.g. the worker counting a score) may hold the counters', rate limiter's
    # or budget's lock at the moment of fork; that thread does not exist in the child.
    h = make([OnlineScorer(LengthScorer(), rate_limit_per_minute=1000, budget_usd_per_hour=5)])
    online = h.processor.scorers[0]
    locks = [core_of(h.processor).metrics._lock, online._limiter._lock, online._budget._lock]
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        for lock in locks:
            lock.acquire()
        holding.set()
        release.wait(30)
        for lock in locks:
            lock.release()

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(10)
    pid = os.fork()
    if pid == 0:  # child: a deadlocked child is killed by the alarm instead of hanging the run
        code = 1
        try:
            signal.alarm(20)
            h.exporter.clear()
            h.call("child output")
            good = h.flush() and len(results(h.agent_spans()[0])) == 1
            code = 0 if good else 2
        finally:
            os._exit(code)
    release.set()
    holder.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_the_agent_call_listener_lives_only_while_a_processor_does() -> None:
    from tracescore.instrument import _calls

    processor = ScoringSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()), LengthScorer())
    assert LISTENERS.on_agent_call in _calls._listeners
    processor.shutdown()
    assert processor not in LISTENERS.live()
    if not LISTENERS.live():  # no other test left a processor running
        assert LISTENERS.on_agent_call not in _calls._listeners


class _BrokenResultScorer(LengthScorer):
    async def arun(self, **kwargs: Any) -> Any:
        return object()  # breaks the contract: no score


def test_a_scorer_breaking_the_result_contract_is_a_failure_event(make) -> None:
    h = make([_BrokenResultScorer("broken")])
    span = h.call()
    assert h.flush()
    (result,) = results(h.agent_spans()[0])
    assert result[sc.ERROR_TYPE] == "TypeError"
    assert h.processor.stats()["failed"] == 1
    assert_exactly_once(h, [span])


class _UnreadableUsageResult:
    score = 0.5

    @property
    def usage(self) -> Any:
        raise RuntimeError("usage unavailable")


class _UnreadableUsageScorer(LengthScorer):
    async def arun(self, **kwargs: Any) -> Any:
        return _UnreadableUsageResult()


def test_a_result_whose_usage_cannot_be_read_is_a_failure_event_and_frees_the_budget(make) -> None:
    online = OnlineScorer(_UnreadableUsageScorer("odd"), budget_usd_per_hour=1.0)
    h = make([online])
    span = h.call()
    assert h.flush()
    (exported,) = h.agent_spans()
    assert unscored(exported) == []
    (result,) = results(exported)
    assert result[sc.ERROR_TYPE] == "TypeError"
    assert online._budget is not None and online._budget._in_flight == 0
    assert_exactly_once(h, [span])


class _ExplodingMeterProvider:
    """A MeterProvider whose instruments raise on every recording."""

    def get_meter(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def __getattr__(self, name: str) -> Any:
        if name.startswith("create_"):
            return lambda *a, **k: self
        raise AttributeError(name)

    def add(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("meter down")

    record = add


def test_a_broken_meter_never_reaches_the_agent(make) -> None:
    h = make([LengthScorer()], meter_provider=_ExplodingMeterProvider())
    spans = [h.call() for _ in range(3)]
    assert h.flush()
    assert all(len(results(s)) == 1 for s in h.agent_spans())
    assert_exactly_once(h, spans)
    assert h.processor.stats()["scored"] == 3


class _BlockingScorer(LengthScorer):
    """Blocks the worker's event loop (sync wait inside arun) until its gate opens."""

    async def arun(self, **kwargs: Any) -> Any:
        assert self.gate is not None
        self.gate.wait(30)
        return await LengthScorer(self.id).arun(**kwargs)


def test_max_wait_holds_even_when_a_scorer_blocks_the_worker_loop(make) -> None:
    gate = threading.Event()
    h = make([_BlockingScorer(gate=gate)], max_wait_s=0.05)
    span = h.call()
    try:
        h.wait_for(lambda: len(h.agent_spans()) == 1)
        assert unscored(h.agent_spans()[0])[0][sc.TS_UNSCORED_REASON] == "timeout"
    finally:
        gate.set()
    assert h.flush()
    assert_exactly_once(h, [span])
