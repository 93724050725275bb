"""Process isolation of online scoring (`ScoringSpanProcessor(isolation="process")`): real
scorers run in the spawned scoring process, results and failures come back as span events,
unpicklable jobs run in-thread, a killed child fails its runs and is restarted, shutdown stops it.

One processor (one spawned child) is shared by the module; each test checks its own spans.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError, ScorerError
from tracescore.instrument._calls import AgentCall, notify_agent_call
from tracescore.online import OnlineScorer, ScoringSpanProcessor
from tracescore.scoring import JudgeUsage, Scorer, ScoreResult

QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France."


class LockedError(Exception):
    """An error that cannot be pickled (it carries a lock)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.lock = threading.Lock()


class ProbeScorer(Scorer):
    """Reports the process it ran in (score = its pid); the input picks a failure or a stall."""

    id = "probe"
    name = "Probe"
    uses_judge = False

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None) -> ScoreResult:
        if input == "fail":
            raise ScorerError("reply is not JSON", scorer_id=self.id, step="analyze",
                              raw_reply="not json {")
        if input == "locked":
            raise LockedError("judge connection pool exhausted")
        if input == "stall":
            await asyncio.sleep(120)
        return ScoreResult(run_id=run_id or "", scorer_id=self.id, scorer_name=self.name,
                           score=float(os.getpid()), usage=JudgeUsage(model=None))


class Pipeline:
    """A private provider -> ScoringSpanProcessor(isolation="process") -> in-memory exporter."""

    def __init__(self, shutdown_timeout_s: float = 5.0) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.processor = ScoringSpanProcessor(
            SimpleSpanProcessor(self.exporter),
            [OnlineScorer(ProbeScorer(), agents="probe"),
             OnlineScorer(tracescore.create_content_similarity_scorer(), agents="qa"),
             OnlineScorer(tracescore.create_answer_relevancy_scorer(model="tracescore/offline"),
                          agents="qa")],
            isolation="process", max_wait_s=60, shutdown_timeout_s=shutdown_timeout_s,
        )
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("tracescore.test")

    def call(self, name: str, input: Any, output: Any = ANSWER, ground_truth: Any = None) -> Any:
        attrs = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: name}
        with self.tracer.start_as_current_span(f"invoke_agent {name}", attributes=attrs) as span:
            notify_agent_call(AgentCall(span=span, name=name, input=input, output=output,
                                        ground_truth=ground_truth, attributes=attrs))
        return span

    def exported(self, span: Any) -> list[ReadableSpan]:
        span_id = span.get_span_context().span_id
        return [s for s in self.exporter.get_finished_spans() if s.context.span_id == span_id]

    def wait_exported(self, span: Any, timeout: float = 30.0) -> ReadableSpan:
        deadline = time.monotonic() + timeout
        while not self.exported(span):
            assert time.monotonic() < deadline, "span never exported"
            time.sleep(0.01)
        (exported,) = self.exported(span)
        return exported


def results(span: ReadableSpan) -> dict[str, dict[str, Any]]:
    return {str(e.attributes[sc.TS_SCORER_ID]): dict(e.attributes) for e in span.events
            if e.name == sc.GEN_AI_EVALUATION_RESULT and e.attributes}


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


@pytest.fixture(scope="module")
def pipeline() -> Iterator[Pipeline]:
    shared = Pipeline()
    yield shared
    shared.provider.shutdown()


def test_real_scorers_run_in_the_scoring_process_and_score_the_span(pipeline: Pipeline) -> None:
    qa = pipeline.call("qa", QUESTION, ANSWER, ground_truth="Paris is the capital of France!")
    probe = pipeline.call("probe", "hi")
    assert pipeline.processor.force_flush(60_000)
    scores = results(pipeline.wait_exported(qa))
    assert set(scores) == {"content-similarity", "answer-relevancy"}
    assert 0.9 < scores["content-similarity"][sc.GEN_AI_EVALUATION_SCORE_VALUE] < 1.0
    relevancy = scores["answer-relevancy"]
    assert sc.ERROR_TYPE not in relevancy, relevancy
    assert relevancy[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
    (probe_result,) = results(pipeline.wait_exported(probe)).values()
    child_pid = probe_result[sc.GEN_AI_EVALUATION_SCORE_VALUE]
    assert child_pid not in (os.getpid(), 0)
    assert child_pid == pipeline.processor._isolation.child_pid
    stats = pipeline.processor.stats()
    assert stats["scored"] >= 3 and stats["in_thread"] == 0


def test_a_failing_scorer_is_a_failure_event_with_its_error(pipeline: Pipeline) -> None:
    span = pipeline.call("probe", "fail")
    assert pipeline.processor.force_flush(30_000)
    (result,) = results(pipeline.wait_exported(span)).values()
    assert result[sc.ERROR_TYPE] == "ScorerError"  # rebuilt in the parent with its fields
    assert result[sc.TS_FAILED_STEP] == "analyze"
    assert "reply is not JSON" in result[sc.GEN_AI_EVALUATION_EXPLANATION]
    assert sc.GEN_AI_EVALUATION_SCORE_VALUE not in result


def test_an_unpicklable_error_arrives_as_its_type_name_and_message(pipeline: Pipeline) -> None:
    span = pipeline.call("probe", "locked")
    assert pipeline.processor.force_flush(30_000)
    (result,) = results(pipeline.wait_exported(span)).values()
    assert result[sc.ERROR_TYPE] == "TracescoreError"
    assert result[sc.GEN_AI_EVALUATION_EXPLANATION] == (
        "LockedError: judge connection pool exhausted")


def test_an_unpicklable_job_runs_in_the_worker_thread(pipeline: Pipeline) -> None:
    before = pipeline.processor.stats()["in_thread"]
    span = pipeline.call("probe", threading.Lock())  # a lock cannot be pickled
    assert pipeline.processor.force_flush(30_000)
    (result,) = results(pipeline.wait_exported(span)).values()
    assert result[sc.GEN_AI_EVALUATION_SCORE_VALUE] == os.getpid()  # ran here, not in the child
    assert pipeline.processor.stats()["in_thread"] == before + 1


def test_a_killed_child_fails_its_runs_and_the_next_call_restarts_it(pipeline: Pipeline) -> None:
    pipeline.call("probe", "warm")  # make sure a child is up
    assert pipeline.processor.force_flush(30_000)
    old = pipeline.processor._isolation.child_pid
    stalled = pipeline.call("probe", "stall")
    wait_until(lambda: bool(pipeline.processor._isolation._pending))
    time.sleep(0.2)  # let the job reach the child
    os.kill(old, signal.SIGKILL)
    (result,) = results(pipeline.wait_exported(stalled)).values()
    assert result[sc.ERROR_TYPE] == "TracescoreError"
    assert "scoring process exited" in result[sc.GEN_AI_EVALUATION_EXPLANATION]
    assert sc.GEN_AI_EVALUATION_SCORE_VALUE not in result

    after = pipeline.call("probe", "again")
    assert pipeline.processor.force_flush(60_000)
    (result,) = results(pipeline.wait_exported(after)).values()
    new_pid = result[sc.GEN_AI_EVALUATION_SCORE_VALUE]
    assert new_pid not in (old, os.getpid())
    ids = Counter(s.context.span_id for s in pipeline.exporter.get_finished_spans())
    assert set(ids.values()) == {1}  # every span exported exactly once


def test_shutdown_stops_the_child_and_exports_held_spans() -> None:
    own = Pipeline(shutdown_timeout_s=0.5)
    own.call("probe", "hi")
    assert own.processor.force_flush(60_000)
    child = own.processor._isolation._child
    assert child.process.poll() is None
    stalled = own.call("probe", "stall")
    wait_until(lambda: own.processor.stats()["running"] == 1)
    own.provider.shutdown()
    assert child.process.poll() is not None
    exported = own.wait_exported(stalled, timeout=1)
    assert not results(exported)
    assert [e.attributes[sc.TS_UNSCORED_REASON] for e in exported.events
            if e.name == sc.TS_UNSCORED] == ["shutdown"]


def test_isolation_is_validated_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="isolation must be 'auto', 'process' or 'thread'"):
        ScoringSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()), [ProbeScorer()],
                             isolation="subprocess")
