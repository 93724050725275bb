"""Code scorers beyond the reference numbers: options, ground truth, labels, shapes, errors."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracescore import (
    ConfigurationError,
    KeywordCoverageScorer,
    ScorerError,
    TextualDifferenceScorer,
    create_keyword_coverage_scorer,
    create_textual_difference_scorer,
)
from tracescore.scoring.difference import sequence_ratio
from tracescore.scoring.keywords import extract_keywords

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
