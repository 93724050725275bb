"""Code scorers beyond the reference numbers: options, ground truth, labels, shapes, errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tracescore import (
    ConfigurationError,
    KeywordCoverageScorer,
    ScorerError,
    TextualDifferenceScorer,
    ToolCallAccuracyScorer,
    create_keyword_coverage_scorer,
    create_textual_difference_scorer,
    create_tool_call_accuracy_scorer,
)
from tracescore.scoring.difference import sequence_ratio
from tracescore.scoring.keywords import extract_keywords
from tracescore.scoring.tools import tool_call_names

CODE_SCORERS = (TextualDifferenceScorer, KeywordCoverageScorer)


def test_textual_difference_result() -> None:
    result = create_textual_difference_scorer(scale=10).run(
        input="hello world", output="hello there world", run_id="r1")
    assert result.run_id == "r1" and result.scorer_id == "textual-difference"
    assert result.score == pytest.approx(10 * 2 * 11 / 28)
    assert result.preprocess_step_result == {
        "ratio": 2 * 11 / 28, "confidence": 1 - 6 / 17, "changes": 1, "length_diff": 6 / 17,
        "compared_with": "input"}
    assert result.label == "partially_similar" and result.usage.calls == 0
    assert "1 word change," in (result.reason or "")
    json.dumps(result.to_dict())


def test_keyword_coverage_result() -> None:
    result = create_keyword_coverage_scorer().run(
        input="What is the capital of France?", output="Paris is the capital.")
    assert result.preprocess_step_result["reference_keywords"] == ["capital", "france"]
    assert result.preprocess_step_result["response_keywords"] == ["paris", "capital"]
    assert result.analyze_step_result == {"total_keywords": 2, "matched_keywords": 1}
    assert result.score == 0.5 and result.label == "partially_covered"
    assert result.reason == "The output contains 1 of the 2 keywords of the input."


def test_keywords_follow_keyword_extractor() -> None:
    assert extract_keywords("Hello, World! The 123 quick http://X.com. _ @ 3d brown quick") == [
        "world", "quick", "http://X.com.", "3d", "brown"]
    assert extract_keywords("<p>'Tis</p>  the “season”") == ["tis", "season"]
    assert extract_keywords("") == [] and extract_keywords("the a of 42") == []


def test_no_input_keywords_scores_one() -> None:
    result = create_keyword_coverage_scorer(scale=5).run(input="the of it", output="anything")
    assert result.score == 5 and result.label == "covered"
    assert result.reason == "The input has no keywords to cover."


@pytest.mark.parametrize("scorer_type", CODE_SCORERS)
def test_ground_truth_replaces_the_input(scorer_type: type) -> None:
    result = scorer_type().run(input="unrelated question", output="Paris, France",
                               ground_truth={"text": "paris france"})
    assert result.score == (1.0 if scorer_type is KeywordCoverageScorer else
                            sequence_ratio("paris france", "Paris, France"))
    assert result.preprocess_step_result["compared_with"] == "ground_truth"


@pytest.mark.parametrize("scorer_type", CODE_SCORERS)
def test_chat_shapes_and_errors(scorer_type: type) -> None:
    scorer = scorer_type()
    chat = scorer.run(input=[{"role": "user", "content": "capital of France"}],
                      output={"messages": [{"role": "assistant", "content": "capital of France"}]})
    assert chat.score == 1.0
    with pytest.raises(ScorerError) as info:
        scorer.run(input="q", output={"a": "x", "b": "y"})
    assert info.value.step == "preprocess" and info.value.scorer_id == scorer.id


@pytest.mark.parametrize("factory", [create_textual_difference_scorer,
                                     create_keyword_coverage_scorer])
@pytest.mark.parametrize(("kwargs", "message"), [
    ({"scale": 0}, "scale must be"), ({"options": {"colour": 1}}, "unknown option 'colour'")])
def test_configuration_errors(factory, kwargs, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        factory(**kwargs)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(CODE_SCORERS), st.text(max_size=80), st.text(max_size=80))
def test_in_range_and_identical_is_full(scorer_type: type, a: str, b: str) -> None:
    scorer = scorer_type(scale=2)
    assert 0 <= scorer.run(input=a, output=b).score <= 2
    assert scorer.run(input=a, output=a).score == 2


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=80), st.text(max_size=80))
def test_sequence_ratio_is_symmetric(a: str, b: str) -> None:
    assert sequence_ratio(a, b) == sequence_ratio(b, a)


async def test_arun_and_run_agree() -> None:
    for scorer_type in CODE_SCORERS:
        scorer = scorer_type()
        assert (await scorer.arun(input="a b c", output="a c")).score == \
            scorer.run(input="a b c", output="a c").score


# --- tool-call accuracy -------------------------------------------------------------------------

_SHAPES = {
    "openai messages": [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "search", "arguments": "{}"}},
        {"id": "2", "type": "function", "function": {"name": "refund", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "1", "content": "found"}],
    "chat completion": {"choices": [{"message": {"role": "assistant", "tool_calls": [
        {"function": {"name": "search"}}, {"function": {"name": "refund"}}]}}]},
    "content parts": {"messages": [{"role": "assistant", "content": [
        {"type": "text", "text": "let me look"}, {"type": "tool_use", "name": "search", "input": {}},
        {"type": "tool-call", "toolName": "refund", "args": {}}]}]},
    "names": {"text": "done", "tool_calls": ["search", "refund"]},
    "invocations": {"role": "assistant", "content": "x",
                    "toolInvocations": [{"toolName": "search"}, {"toolName": "refund"}]},
}


@pytest.mark.parametrize("shape", list(_SHAPES))
def test_tool_calls_are_read_from_every_output_shape(shape: str) -> None:
    assert tool_call_names(_SHAPES[shape]) == ["search", "refund"]


def test_tool_calls_from_a_pydantic_response() -> None:
    import litellm

    response = litellm.ModelResponse(choices=[{"message": {"role": "assistant", "content": None,
        "tool_calls": [{"id": "1", "type": "function",
                        "function": {"name": "search", "arguments": "{}"}}]}}])
    assert tool_call_names(response) == ["search"]


@pytest.mark.parametrize(("options", "calls", "score"), [
    ({"expected_tool": "search"}, ["search", "refund"], 1),
    ({"expected_tool": "search", "strict_mode": True}, ["search", "refund"], 0),
    ({"expected_tool": "search", "strict_mode": True}, ["search"], 1),
    ({"expected_tool": "search"}, [], 0),
    ({"expected_tool_order": ["search", "refund"]}, ["search", "email", "refund"], 1),
    ({"expected_tool_order": ["search", "refund"], "strict_mode": True},
     ["search", "email", "refund"], 0),
    ({"expected_tool_order": ["search", "refund"]}, ["refund", "search", "refund"], 0),
    ({"expected_tool": "email", "expected_tool_order": ["search"]}, ["search"], 1),
])
def test_tool_call_rules(options: dict, calls: list[str], score: float) -> None:
    result = create_tool_call_accuracy_scorer(**options).run(
        input="q", output={"text": "a", "tool_calls": calls})
    assert result.score == score and result.label == ("correct" if score else "incorrect")
    assert result.preprocess_step_result["actual_tools"] == calls
    assert result.reason.startswith("Expected the tool")


def test_a_plain_text_output_has_no_tool_calls() -> None:
    result = ToolCallAccuracyScorer(expected_tool="search").run(input="q", output="an answer")
    assert result.score == 0 and result.reason == "Expected the tool search; the agent called no tool."


@pytest.mark.parametrize(("kwargs", "message"), [
    ({}, "expected_tool or expected_tool_order is required"),
    ({"expected_tool_order": []}, "expected_tool or expected_tool_order is required"),
    ({"expected_tool_order": "search"}, "expected_tool_order must be a list"),
    ({"expected_tool": 3}, "expected_tool must be a tool name"),
    ({"expected_tool": "x", "strict_mode": "yes"}, "strict_mode must be True or False"),
    ({"options": {"expectedTool": "x", "colour": 1}}, "unknown option 'colour'"),
])
def test_tool_call_configuration_errors(kwargs, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        create_tool_call_accuracy_scorer(**kwargs)


_KEYWORD_ALPHABET = st.sampled_from(
    ["the", "Paris", "ΣΟΦΟΣ", "Σ", "ΑΣ", "42", "'", '"', ".", ",", "(", ")", "“", "’", "_", "#",
     "@", "İ", "é", "𝄞", " ", "\t", "\n", "\xa0", "\ufeff", "\u2028", "\x85", "\x1c", "<b>", ">"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_KEYWORD_ALPHABET, max_size=40).map("".join))
@example("ΑΣ\ufeffΣΟΦΟΣ")  # a final sigma is final in its word, not across U+FEFF
def test_whole_text_route_equals_word_by_word(text: str) -> None:
    from tracescore.scoring import keywords

    cleaned = keywords._HTML_TAG.sub("", text).strip(keywords.JS_WHITESPACE)
    expected = keywords._keywords_by_word(cleaned) if cleaned else []
    assert extract_keywords(text) == expected


def test_recorded_tool_calls_in_the_input_count_when_the_output_has_none() -> None:
    from tracescore import run_evals

    scorer = create_tool_call_accuracy_scorer(expected_tool_order=["search", "refund"])
    items: list[dict[str, Any]] = [
        {"input": {"prompt": "refund order 7", "tool_calls": ["search", "refund"]}},
        {"input": {"prompt": "refund order 8", "tool_calls": [{"name": "refund"}]}}]
    result = run_evals(items, [scorer], lambda item: "Done.")
    assert [r.scores["tool-call-accuracy"].score for r in result.items] == [1.0, 0.0]
    # calls in the output take precedence
    assert scorer.run(input=items[0]["input"], output={"tool_calls": ["refund"]}).score == 0
