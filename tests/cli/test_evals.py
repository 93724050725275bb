"""run_evals / arun_evals: results, failures as data, concurrency, callbacks, tracing."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError, ScorerError
from tracescore.evals import EvalResult, arun_evals, run_evals
from tracescore.instrument._calls import current_ground_truth
from tracescore.scoring import ContentSimilarityScorer, Scorer, ScoreResult


class WordOverlapScorer(Scorer):
    """A judge-free scorer for these tests: share of ground-truth words found in the output."""

    id = "word-overlap"
    name = "Word Overlap"
    uses_judge = False

    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on = fail_on  # output text that makes the analyze step fail

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None) -> ScoreResult:
        if self.fail_on is not None and output == self.fail_on:
            raise ScorerError("judge reply was not JSON", scorer_id=self.id, step="analyze",
                              partial={"preprocess_step_result": {"words": 1}}, raw_reply="oops")
        expected = set(str(ground_truth or input).lower().split())
        found = expected & set(str(output).lower().split())
        score = len(found) / len(expected) if expected else 0.0
        return ScoreResult(run_id=run_id or "r", scorer_id=self.id, scorer_name=self.name,
                           score=score, label="high" if score >= 0.5 else "low",
                           reason=f"{len(found)} of {len(expected)} words")


DATA = [
    {"input": "capital of france", "ground_truth": "paris is the capital", "topic": "geo"},
    {"input": "author of hamlet", "ground_truth": "shakespeare wrote hamlet", "topic": "books"},
    {"input": "boiling point", "ground_truth": "one hundred degrees", "topic": "science"},
]
ANSWERS = {
    "capital of france": "paris is the capital",
    "author of hamlet": "hamlet was written by shakespeare",
    "boiling point": "i like turtles",
}


def answer(question: str) -> str:
    return ANSWERS[question]


async def aanswer(question: str) -> str:
    await asyncio.sleep(0)
    return ANSWERS[question]


def test_sync_target_scores_every_item_and_keeps_metadata(span_exporter) -> None:
    result = run_evals(DATA, [WordOverlapScorer(), ContentSimilarityScorer()], answer)

    assert isinstance(result, EvalResult)
    assert result.summary.total_items == 3
    assert [item.index for item in result.items] == [0, 1, 2]
    assert [item.output for item in result.items] == [ANSWERS[d["input"]] for d in DATA]
    assert result.items[0].metadata == {"topic": "geo"}
    assert result.items[1].ground_truth == "shakespeare wrote hamlet"
    overlap = [item.scores["word-overlap"].score for item in result.items]
    assert overlap == [1.0, pytest.approx(2 / 3), 0.0]
    assert result.scores["word-overlap"] == pytest.approx(sum(overlap) / 3)
    similarity = [item.scores["content-similarity"].score for item in result.items]
    assert similarity[0] == 1.0 and similarity[2] < 0.3
    assert result.scores["content-similarity"] == pytest.approx(sum(similarity) / 3)
    assert result.failures == () and result.summary.errored_items == 0
    assert result.passed is None  # no thresholds, no verdict
    assert result.summary.passed_items == 3


def test_async_target_gives_the_same_result_as_the_sync_one(span_exporter) -> None:
    sync = run_evals(DATA, WordOverlapScorer(), answer)
    result = asyncio.run(arun_evals(DATA, WordOverlapScorer(), aanswer))
    assert result.scores == sync.scores
    assert [i.output for i in result.items] == [i.output for i in sync.items]


@pytest.mark.parametrize("kind", ["async generator", "sync generator"])
def test_generator_targets_are_drained_and_joined(span_exporter, kind: str) -> None:
    async def astream(question: str):
        for word in ANSWERS[question].split(" "):
            yield word + " "

    def stream(question: str):
        yield from (word + " " for word in ANSWERS[question].split(" "))

    target = astream if kind == "async generator" else stream
    result = run_evals(DATA[:1], WordOverlapScorer(), target)
    assert result.items[0].output == "paris is the capital "
    assert result.scores["word-overlap"] == 1.0


def test_agent_object_with_run_method_is_a_target(span_exporter) -> None:
    class SupportAgent:
        def run(self, question: str) -> str:
            return ANSWERS[question]

    result = run_evals(DATA, WordOverlapScorer(), SupportAgent())
    assert result.name == "SupportAgent"
    assert result.items[0].output == "paris is the capital"


def test_a_failing_target_is_recorded_and_the_other_items_continue(span_exporter) -> None:
    def flaky(question: str) -> str:
        if question == "author of hamlet":
            raise TimeoutError("upstream model timed out")
        return ANSWERS[question]

    result = run_evals(DATA, WordOverlapScorer(), flaky)

    assert result.summary.total_items == 3
    assert result.summary.errored_items == 1 and result.summary.failed_items == 1
    (failure,) = result.failures
    assert (failure.index, failure.step, failure.scorer_id) == (1, "target", None)
    assert failure.error_type == "TimeoutError" and "timed out" in failure.message
    assert result.items[1].scores == {} and not result.items[1].ok
    assert result.items[0].scores["word-overlap"].score == 1.0
    assert result.scores["word-overlap"] == pytest.approx(0.5)  # mean over scored items
    spans = {s.attributes[sc.TS_EVAL_ITEM_INDEX]: s for s in span_exporter.get_finished_spans()}
    assert spans[1].status.status_code is StatusCode.ERROR
    assert spans[1].attributes[sc.ERROR_TYPE] == "TimeoutError"
    assert not any(e.name == sc.GEN_AI_EVALUATION_RESULT for e in spans[1].events)


def test_a_failing_scorer_names_its_step_and_other_scorers_still_count(span_exporter) -> None:
    scorers = [WordOverlapScorer(fail_on="i like turtles"), ContentSimilarityScorer()]
    result = run_evals(DATA, scorers, answer)

    (failure,) = result.failures
    assert (failure.index, failure.step, failure.scorer_id) == (2, "analyze", "word-overlap")
    assert set(result.items[2].scores) == {"content-similarity"}
    assert result.summary.errored_items == 1
    span = next(s for s in span_exporter.get_finished_spans()
                if s.attributes[sc.TS_EVAL_ITEM_INDEX] == 2)
    results = [e for e in span.events if e.name == sc.GEN_AI_EVALUATION_RESULT]
    by_scorer = {e.attributes[sc.TS_SCORER_ID]: e.attributes for e in results}
    assert by_scorer["word-overlap"][sc.ERROR_TYPE] == "ScorerError"
    assert sc.GEN_AI_EVALUATION_SCORE_VALUE not in by_scorer["word-overlap"]
    assert sc.GEN_AI_EVALUATION_SCORE_VALUE in by_scorer["content-similarity"]


def test_thresholds_give_a_verdict() -> None:
    passing = run_evals(DATA, WordOverlapScorer(), answer, thresholds={"word-overlap": 0.5})
    failing = run_evals(DATA, WordOverlapScorer(), answer, thresholds={"word-overlap": 0.9})

    assert passing.passed is True and passing.summary.threshold_results == {"word-overlap": True}
    assert failing.passed is False and failing.summary.threshold_results == {"word-overlap": False}
    # per item: >= 0.9 only the first answer; >= 0.5 the first two
    assert (failing.summary.passed_items, failing.summary.failed_items) == (1, 2)
    assert (passing.summary.passed_items, passing.summary.failed_items) == (2, 1)


def test_a_threshold_on_a_scorer_with_no_scores_fails() -> None:
    def broken(question: str) -> str:
        raise RuntimeError("down")

    result = run_evals(DATA, WordOverlapScorer(), broken, thresholds={"word-overlap": 0.1})
    assert result.scores == {"word-overlap": None}
    assert result.passed is False and len(result.failures) == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"data": [{"question": "x"}]}, "item 0 has no 'input'"),
        ({"data": ["just a string"]}, "item 0 must be a mapping"),
        ({"data": "abc"}, "iterable of items"),
        ({"scorers": []}, "at least one scorer"),
        ({"scorers": [WordOverlapScorer(), WordOverlapScorer()]}, "share the id"),
        ({"thresholds": {"relevancy": 0.5}}, "unknown scorer 'relevancy'"),
        ({"thresholds": {"word-overlap": "high"}}, "must be a number"),
        ({"concurrency": 0}, "positive integer"),
        ({"target": 42}, "target must be callable"),
    ],
)
def test_bad_arguments_raise_before_anything_runs(kwargs: dict[str, Any], message: str) -> None:
    calls: list[str] = []

    def target(question: str) -> str:
        calls.append(question)
        return question

    args: dict[str, Any] = {"data": DATA, "scorers": [WordOverlapScorer()], "target": target}
    args.update(kwargs)
    with pytest.raises(ConfigurationError, match=message):
        run_evals(args.pop("data"), args.pop("scorers"), args.pop("target"), **args)
    assert calls == []


def test_concurrency_is_bounded() -> None:
    active = 0
    peak = 0

    async def target(question: str) -> str:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        for _ in range(5):
            await asyncio.sleep(0)
        active -= 1
        return question

    run_evals([{"input": f"q{i}"} for i in range(10)], WordOverlapScorer(), target, concurrency=3)
    assert peak == 3


def test_sync_targets_run_on_worker_threads_inside_the_item_span(span_exporter) -> None:
    seen: list[tuple[str, int, Any]] = []
    marks: list[Any] = []

    def target(question: str) -> str:
        span = trace.get_current_span()
        seen.append((threading.current_thread().name, span.get_span_context().span_id,
                     current_ground_truth()))
        marks.append(otel_context.get_value(sc.CTX_EVAL_RUN_ID))  # online scoring skips these
        return ANSWERS[question]

    result = run_evals(DATA, WordOverlapScorer(), target, concurrency=2)
    assert marks == [result.run_id] * 3

    spans = {s.context.span_id: s for s in span_exporter.get_finished_spans()}
    assert all(name.startswith("tracescore-eval") for name, _, _ in seen)
    assert {spans[span_id].attributes[sc.TS_EVAL_ITEM_INDEX] for _, span_id, _ in seen} == {0, 1, 2}
    assert sorted(gt for _, _, gt in seen) == sorted(d["ground_truth"] for d in DATA)
    assert {item.trace_id for item in result.items} == {
        format(s.context.trace_id, "032x") for s in spans.values()}


def test_each_item_is_an_agent_span_with_its_score_events(span_exporter) -> None:
    run_evals(DATA, [WordOverlapScorer(), ContentSimilarityScorer()], answer, name="qa-bot")

    spans = sorted(span_exporter.get_finished_spans(),
                   key=lambda s: s.attributes[sc.TS_EVAL_ITEM_INDEX])
    assert [s.name for s in spans] == ["invoke_agent qa-bot"] * 3
    first = spans[0]
    assert first.attributes[sc.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert first.attributes[sc.GEN_AI_AGENT_NAME] == "qa-bot"
    assert "capital of france" in first.attributes[sc.GEN_AI_INPUT_MESSAGES]
    assert "paris is the capital" in first.attributes[sc.GEN_AI_OUTPUT_MESSAGES]
    assert len({s.attributes[sc.TS_EVAL_RUN_ID] for s in spans}) == 1
    results = [e for e in first.events if e.name == sc.GEN_AI_EVALUATION_RESULT]
    assert {e.attributes[sc.TS_SCORER_ID] for e in results} == {"word-overlap",
                                                                "content-similarity"}
    overlap = next(e for e in results if e.attributes[sc.TS_SCORER_ID] == "word-overlap")
    assert overlap.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
    assert overlap.attributes[sc.GEN_AI_EVALUATION_SCORE_LABEL] == "high"
    assert overlap.attributes[sc.GEN_AI_EVALUATION_EXPLANATION] == "4 of 4 words"


def test_on_item_complete_sync_and_async_and_its_failures(span_exporter) -> None:
    seen: list[tuple[str, Any, list[str]]] = []

    def record(item: Mapping[str, Any], output: Any, scores: dict[str, ScoreResult]) -> None:
        seen.append((item["input"], output, sorted(scores)))

    async def arecord(item: Mapping[str, Any], output: Any, scores: dict[str, ScoreResult]) -> None:
        await asyncio.sleep(0)
        record(item, output, scores)
        if item["input"] == "boiling point":
            raise ValueError("dashboard unavailable")

    result = run_evals(DATA, WordOverlapScorer(), answer, on_item_complete=record)
    assert sorted(seen) == sorted((d["input"], ANSWERS[d["input"]], ["word-overlap"])
                                  for d in DATA)
    assert result.failures == ()

    seen.clear()
    result = run_evals(DATA, WordOverlapScorer(), answer, on_item_complete=arecord)
    assert len(seen) == 3
    (failure,) = result.failures
    assert (failure.index, failure.step, failure.error_type) == (2, "on_item_complete",
                                                                  "ValueError")
    assert result.items[2].scores["word-overlap"].score == 0.0  # the score is kept


def test_progress_reports_every_item() -> None:
    calls: list[tuple[int, int]] = []
    run_evals(DATA, WordOverlapScorer(), answer, progress=lambda done, total: calls.append(
        (done, total)))
    assert calls == [(1, 3), (2, 3), (3, 3)]


async def test_sync_run_evals_works_inside_a_running_loop() -> None:
    result = run_evals(DATA, WordOverlapScorer(), aanswer)
    assert result.summary.total_items == 3 and result.failures == ()


def test_to_dict_is_plain_json() -> None:
    result = run_evals(DATA, [WordOverlapScorer(), ContentSimilarityScorer()], answer,
                       thresholds={"content-similarity": 0.2})
    data = json.loads(json.dumps(result.to_dict()))
    assert data["summary"]["total_items"] == 3
    assert data["passed"] is True
    assert data["items"][0]["metadata"] == {"topic": "geo"}
    assert data["items"][0]["scores"]["word-overlap"]["reason"] == "4 of 4 words"
    assert set(data["scores"]) == {"word-overlap", "content-similarity"}


def test_without_content_capture_scores_are_still_exported(span_exporter) -> None:
    from tracescore._config import content_settings, set_content_capture

    before = content_settings()
    set_content_capture(False)
    try:
        result = run_evals(DATA[:1], WordOverlapScorer(), answer)
    finally:
        set_content_capture(before.capture)
    (span,) = span_exporter.get_finished_spans()
    assert sc.GEN_AI_INPUT_MESSAGES not in span.attributes
    assert sc.GEN_AI_OUTPUT_MESSAGES not in span.attributes
    (event,) = [e for e in span.events if e.name == sc.GEN_AI_EVALUATION_RESULT]
    assert event.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
    assert sc.GEN_AI_EVALUATION_EXPLANATION not in event.attributes  # the reason is content
    assert result.items[0].scores["word-overlap"].reason == "4 of 4 words"  # kept in-process


def test_a_decorated_agent_target_nests_under_the_item_span_and_sees_ground_truth(
        span_exporter) -> None:
    import tracescore
    from tracescore.instrument._calls import (
        AgentCall,
        add_agent_call_listener,
        remove_agent_call_listener,
    )

    calls: list[AgentCall] = []
    listener = calls.append  # one bound method object, so removal finds it
    inner = tracescore.agent(name="inner-agent")(answer)
    add_agent_call_listener(listener)
    try:
        run_evals(DATA, WordOverlapScorer(), inner, name="outer")
    finally:
        remove_agent_call_listener(listener)

    spans = span_exporter.get_finished_spans()
    items = {s.context.span_id: s for s in spans if s.name == "invoke_agent outer"}
    agents = [s for s in spans if s.name == "invoke_agent inner-agent"]
    assert len(items) == len(agents) == 3
    assert {a.parent.span_id for a in agents} == set(items)
    assert sorted(c.ground_truth for c in calls) == sorted(d["ground_truth"] for d in DATA)


def test_online_scoring_leaves_agent_calls_inside_run_evals_to_the_eval() -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import tracescore

    exporter = InMemorySpanExporter()
    handle = tracescore.configure(exporter=exporter, batch=False, scorers=[WordOverlapScorer()])
    inner = tracescore.agent(name="inner-agent")(answer)
    try:
        inner("capital of france")  # live traffic: scored online
        run_evals(DATA, WordOverlapScorer(), inner, name="outer")
        assert handle.flush(10)
    finally:
        handle.shutdown(10)

    def scorer_ids(span: Any) -> list[str]:
        return [e.attributes[sc.TS_SCORER_ID] for e in span.events
                if e.name == sc.GEN_AI_EVALUATION_RESULT]

    spans = exporter.get_finished_spans()
    items = {s.context.span_id: s for s in spans if s.name == "invoke_agent outer"}
    agents = [s for s in spans if s.name == "invoke_agent inner-agent"]
    live = [a for a in agents if a.parent is None or a.parent.span_id not in items]
    in_eval = [a for a in agents if a.parent is not None and a.parent.span_id in items]
    assert len(items) == len(in_eval) == 3 and len(live) == 1
    assert scorer_ids(live[0]) == ["word-overlap"]
    assert all(scorer_ids(a) == [] and not a.events for a in in_eval)  # not scored twice
    assert all(scorer_ids(item) == ["word-overlap"] for item in items.values())
