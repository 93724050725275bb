"""evaluation_events: the payload every sink (and offline evals) attaches for one scorer run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tracescore import _semconv as sc
from tracescore._config import reset_content_settings, set_content_capture
from tracescore._exceptions import JudgeError, ScorerError
from tracescore.online import evaluation_events
from tracescore.online._events import unscored_event
from tracescore.scoring import ContentSimilarityScorer, JudgeUsage, ScoreResult


@pytest.fixture(autouse=True)
def _fresh_content_settings() -> Iterator[None]:
    reset_content_settings()
    yield
    reset_content_settings()


def relevancy_result(**overrides: object) -> ScoreResult:
    fields: dict[str, object] = {
        "run_id": "run-1", "scorer_id": "answer-relevancy", "scorer_name": "Answer Relevancy",
        "score": 0.43, "label": "partially_relevant",
        "reason": "The score is 0.43 because one statement is on topic.",
        "preprocess_prompt": "Split <output>Paris. Cats.</output>",
        "preprocess_step_result": {"statements": ["Paris.", "Cats."]},
        "analyze_prompt": "Judge each statement against <input>Capital?</input>",
        "analyze_step_result": {"results": [{"result": "yes", "reason": "r"}]},
        "generate_reason_prompt": "Explain the score 0.43",
        "usage": JudgeUsage(model="openai/gpt-4o-mini", calls=3, input_tokens=300,
                            output_tokens=40, cost_usd=0.0012, latency_ms=812.5),
    }
    fields.update(overrides)
    return ScoreResult(**fields)  # type: ignore[arg-type]


def test_result_event_carries_score_label_explanation_and_tracescore_attributes() -> None:
    events = evaluation_events(relevancy_result(), scorer_id="answer-relevancy",
                               scorer_name="Answer Relevancy", sampling_rate=0.25)
    name, attrs = events[0]
    assert name == sc.GEN_AI_EVALUATION_RESULT
    assert attrs == {
        sc.GEN_AI_EVALUATION_NAME: "Answer Relevancy",
        sc.TS_SCORER_ID: "answer-relevancy",
        sc.TS_SAMPLING_RATE: 0.25,
        sc.GEN_AI_EVALUATION_SCORE_VALUE: 0.43,
        sc.GEN_AI_EVALUATION_SCORE_LABEL: "partially_relevant",
        sc.TS_RUN_ID: "run-1",
        sc.GEN_AI_EVALUATION_EXPLANATION: "The score is 0.43 because one statement is on topic.",
        sc.TS_JUDGE_MODEL: "openai/gpt-4o-mini",
        sc.TS_JUDGE_CALLS: 3,
        sc.TS_JUDGE_INPUT_TOKENS: 300,
        sc.TS_JUDGE_OUTPUT_TOKENS: 40,
        sc.TS_JUDGE_COST_USD: 0.0012,
        sc.TS_JUDGE_LATENCY_MS: 812.5,
    }


def test_one_step_event_per_judge_step_with_prompt_and_result() -> None:
    events = evaluation_events(relevancy_result(), scorer_id="answer-relevancy",
                               scorer_name="Answer Relevancy")
    step_events = events[1:]
    assert {name for name, _ in step_events} == {sc.TS_EVALUATION_STEP}
    steps = [attrs for _, attrs in step_events]
    assert [s[sc.TS_STEP_NAME] for s in steps] == ["preprocess", "analyze", "reason"]
    assert steps[0][sc.TS_STEP_PROMPT] == "Split <output>Paris. Cats.</output>"
    assert steps[0][sc.TS_STEP_RESULT] == '{"statements":["Paris.","Cats."]}'
    assert str(steps[2][sc.TS_STEP_RESULT]).startswith("The score is 0.43")
    assert all(s[sc.TS_SCORER_ID] == "answer-relevancy" for s in steps)


def test_content_capture_off_keeps_scores_and_labels_only() -> None:
    set_content_capture(False)
    events = evaluation_events(relevancy_result(), scorer_id="answer-relevancy",
                               scorer_name="Answer Relevancy")
    assert len(events) == 1
    attrs = events[0][1]
    assert attrs[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 0.43
    assert attrs[sc.GEN_AI_EVALUATION_SCORE_LABEL] == "partially_relevant"
    assert sc.GEN_AI_EVALUATION_EXPLANATION not in attrs
    # the per-call override wins over the global setting
    assert len(evaluation_events(relevancy_result(), scorer_id="a", scorer_name="A",
                                 capture_content=True)) == 4


def test_prompts_and_results_are_redacted_and_truncated() -> None:
    set_content_capture(max_length=40)
    secret = "contact me at jane.doe@example.com, key sk-abcdefghijklmnopqrstuvwx"
    events = evaluation_events(relevancy_result(preprocess_prompt=secret, reason=secret * 3),
                               scorer_id="a", scorer_name="A")
    prompt = events[1][1][sc.TS_STEP_PROMPT]
    explanation = events[0][1][sc.GEN_AI_EVALUATION_EXPLANATION]
    for text in (prompt, explanation):
        assert "jane.doe@example.com" not in text and "sk-abcdefghijklmnop" not in text
    assert "truncated" in explanation


def test_similarity_result_without_judge_prompts() -> None:
    result = ContentSimilarityScorer().run(input="The quick brown fox", output="the quick brown fox")
    events = evaluation_events(result, scorer_id=result.scorer_id, scorer_name=result.scorer_name)
    attrs = events[0][1]
    assert attrs[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
    assert attrs[sc.GEN_AI_EVALUATION_SCORE_LABEL] == "similar"
    assert sc.TS_JUDGE_COST_USD not in attrs  # no judge, no cost
    steps = [a for _, a in events[1:]]
    assert [s[sc.TS_STEP_NAME] for s in steps] == ["preprocess", "analyze"]
    assert all(sc.TS_STEP_PROMPT not in s for s in steps)


def test_failure_event_names_the_error_and_failed_step() -> None:
    cause = JudgeError("HTTP 500 after 3 tries", model="openai/x")
    error = ScorerError("judge failed", scorer_id="answer-relevancy", step="analyze",
                        partial={"preprocess_prompt": "Split it",
                                 "preprocess_step_result": {"statements": ["a"]}},
                        raw_reply="<html>oops</html>")
    error.__cause__ = cause
    events = evaluation_events(None, scorer_id="answer-relevancy", scorer_name="Answer Relevancy",
                               error=error, sampling_rate=1.0, run_id="run-9")
    name, attrs = events[0]
    assert name == sc.GEN_AI_EVALUATION_RESULT
    assert attrs[sc.ERROR_TYPE] == "ScorerError"
    assert attrs[sc.TS_FAILED_STEP] == "analyze"
    assert attrs[sc.TS_RUN_ID] == "run-9"
    assert sc.GEN_AI_EVALUATION_SCORE_VALUE not in attrs
    assert "failed at step 'analyze'" in attrs[sc.GEN_AI_EVALUATION_EXPLANATION]
    steps = [a for _, a in events[1:]]
    assert [s[sc.TS_STEP_NAME] for s in steps] == ["preprocess", "analyze"]
    assert steps[1][sc.TS_STEP_RESULT] == "<html>oops</html>"
    assert steps[1][sc.ERROR_TYPE] == "JudgeError"


def test_any_exception_is_a_failure_event() -> None:
    events = evaluation_events(None, scorer_id="x", scorer_name="X", error=TimeoutError())
    assert events == [(sc.GEN_AI_EVALUATION_RESULT, {
        sc.GEN_AI_EVALUATION_NAME: "X", sc.TS_SCORER_ID: "x", sc.ERROR_TYPE: "TimeoutError",
        sc.GEN_AI_EVALUATION_EXPLANATION: "TimeoutError",
    })]


def test_unscored_event_says_why() -> None:
    assert unscored_event(scorer_id="x", scorer_name="X", reason="timeout", sampling_rate=0.5) == (
        sc.TS_UNSCORED, {sc.GEN_AI_EVALUATION_NAME: "X", sc.TS_SCORER_ID: "x",
                         sc.TS_UNSCORED_REASON: "timeout", sc.TS_SAMPLING_RATE: 0.5})


def test_event_attributes_are_valid_otel_attribute_values() -> None:
    from opentelemetry.attributes import BoundedAttributes

    for events in (
        evaluation_events(relevancy_result(), scorer_id="a", scorer_name="A"),
        evaluation_events(None, scorer_id="a", scorer_name="A", error=ValueError("bad")),
    ):
        for _, attrs in events:
            assert dict(BoundedAttributes(attributes=attrs)) == attrs  # nothing dropped
