"""Faithfulness through real litellm over HTTP to the stub judge: steps, formula, context, edges;
and the offline judge's lexical version."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _helpers import STUB_JUDGE, script_claims, user_prompt
from hypothesis import given
from hypothesis import strategies as st

from tracescore import ConfigurationError, ScorerError, create_faithfulness_scorer
from tracescore.scoring import FaithfulnessScorer
from tracescore.scoring._registry import create_scorer
from tracescore.scoring.faithfulness import faithfulness_score
from tracescore.testing import StubLLMServer

QUESTION = "Tell me about the Model S."
TESLA = ("The Tesla Model S was launched in 2012. The car has a maximum range of 375 miles and "
         "comes with advanced autopilot features.")


def make_scorer(stub: StubLLMServer, **options: Any) -> FaithfulnessScorer:
    return create_faithfulness_scorer(
        api_base=stub.base_url, **STUB_JUDGE, **options)


REFERENCE_CASES = [
    # (verdicts, scale, expected): supported / claims * scale, rounded to 2 decimals
    (["yes", "no", "unsure"], 1, 0.33),  # the reference's own Tesla example
    (["yes"], 1, 1.0),
    (["yes", "yes", "unsure"], 1, 0.67),
    (["no", "unsure"], 1, 0.0),
    (["yes", "yes", "no"], 10, 6.67),
    (["yes", "Yes", " yes"], 1, 0.33),  # only an exact "yes" counts, as in the reference
]


@pytest.mark.parametrize(("verdicts", "scale", "expected"), REFERENCE_CASES)
def test_reference_cases_through_litellm(stub_llm: StubLLMServer, verdicts: list[str],
                                         scale: float, expected: float) -> None:
    claims = [f"claim {i}" for i in range(len(verdicts))]
    script_claims(stub_llm, claims, verdicts, reason=f"The score is {expected} because reasons.")
    result = make_scorer(stub_llm, scale=scale).run(input=QUESTION, output="Some answer.",
                                                    context=[TESLA])
    assert result.score == expected
    assert result.reason == f"The score is {expected} because reasons."
    assert result.preprocess_step_result == {"claims": claims}
    assert result.analyze_step_result["verdicts"] == [
        {"claim": c, "verdict": v, "reason": f"verdict {v}"} for c, v in zip(claims, verdicts)]
    assert result.analyze_step_result["context"] == {"source": "call", "pieces": 1, "left_out": 0}
    preprocess, analyze, reason = (user_prompt(r) for r in stub_llm.requests)
    assert "<output>\nSome answer.\n</output>" in preprocess
    assert f"<context>\n[0] {TESLA}\n</context>" in analyze
    assert all(json.dumps(c) in analyze for c in claims)
    assert f'start exactly with "The score is {expected:g} because"' in reason
    assert (result.preprocess_prompt, result.analyze_prompt, result.generate_reason_prompt) == (
        preprocess, analyze, reason)
    formats = [r["response_format"]["json_schema"]["schema"]["required"] for r in stub_llm.requests]
    assert formats == [["claims"], ["verdicts"], ["reason"]]


@given(st.lists(st.sampled_from(["yes", "no", "unsure", "Yes", ""]), max_size=40),
       st.sampled_from([1, 2, 3, 5, 7, 10, 100, 0.5]))
def test_score_formula(verdicts: list[str], scale: float) -> None:
    """The reference: supported / total * scale, then Math.round((x + EPSILON) * 100) / 100."""
    got = faithfulness_score([{"verdict": v} for v in verdicts], scale)
    if not verdicts:
        assert got == 0
        return
    exact = verdicts.count("yes") / len(verdicts) * scale
    assert abs(got - exact) <= 0.005 + 1e-9
    assert round(got * 100) == pytest.approx(got * 100)


def test_the_context_option_overrides_the_calls_context(stub_llm: StubLLMServer) -> None:
    script_claims(stub_llm, ["c"], ["yes"])
    result = make_scorer(stub_llm, options={"context": ["from the option"]}).run(
        input=QUESTION, output="c.", context=["from the call"])
    analyze = user_prompt(stub_llm.requests[1])
    assert "[0] from the option" in analyze and "from the call" not in analyze
    assert result.analyze_step_result["context"]["source"] == "option"


def test_context_is_redacted_and_capped_together(stub_llm: StubLLMServer) -> None:
    secret = "sk-proj-" + "A1b2C3d4" * 4
    script_claims(stub_llm, ["c"], ["unsure"])
    pieces = [f"key {secret}", "x" * 150, "y" * 150, "z" * 150]
    result = make_scorer(stub_llm, max_judge_input_chars=200).run(
        input=QUESTION, output="c.", context=pieces)
    analyze = user_prompt(stub_llm.requests[1])
    assert secret not in analyze and "[0] key " in analyze
    assert "[1] xxx" in analyze and "[2]" not in analyze  # past the shared budget: left out
    assert result.judge_input_truncated
    assert result.analyze_step_result["context"] == {"source": "call", "pieces": 4,
                                                     "left_out": 2}


def test_no_claims_scores_zero_without_analyze(stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue({"claims": []})
    result = make_scorer(stub_llm).run(input=QUESTION, output="Hmm?", context=[TESLA])
    assert result.score == 0.0 and result.label == "unfaithful"
    assert result.analyze_step_result == {"verdicts": []}
    assert result.analyze_prompt is None and result.generate_reason_prompt is None
    assert "makes no claims" in result.reason
    assert len(stub_llm.requests) == 1


def test_empty_output_scores_zero_without_calling_the_judge(stub_llm: StubLLMServer) -> None:
    for output in ("", "  \n", None):
        result = make_scorer(stub_llm).run(input=QUESTION, output=output, context=[TESLA])
        assert result.score == 0.0
        assert "judge was not called" in result.preprocess_step_result["skipped"]
        assert result.usage.calls == 0
    assert stub_llm.requests == []


def test_no_context_scores_zero_after_extracting_claims(stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue({"claims": ["a", "b"]})
    result = make_scorer(stub_llm).run(input=QUESTION, output="a. b.", context=["", "  "])
    assert result.score == 0.0
    assert result.reason.startswith("The score is 0 because no context was given")
    assert [v["verdict"] for v in result.analyze_step_result["verdicts"]] == ["unsure", "unsure"]
    assert "judge was not called" in result.analyze_step_result["skipped"]
    assert len(stub_llm.requests) == 1


def test_a_wrong_verdict_count_is_asked_again_then_recorded(stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue({"claims": ["a", "b"]})
    stub_llm.enqueue({"verdicts": [{"verdict": "yes", "reason": "r"}]})
    stub_llm.enqueue({"verdicts": [{"verdict": "yes", "reason": "r"}]})
    stub_llm.enqueue({"reason": "The score is 1 because r."})
    result = make_scorer(stub_llm).run(input=QUESTION, output="a. b.", context=[TESLA])
    assert "a previous reply gave 1 verdicts for 2 claims" in user_prompt(stub_llm.requests[2])
    assert result.analyze_step_result["mismatch"]["claims"] == 2
    assert result.score == 1.0  # the score uses the verdicts received, as the reference does


def test_a_failing_step_is_a_scorer_error_naming_it(stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue({"claims": ["a"]})
    for _ in range(4):
        stub_llm.enqueue("not json at all")
    with pytest.raises(ScorerError) as info:
        make_scorer(stub_llm, max_retries=0).run(input=QUESTION, output="a.", context=[TESLA])
    assert info.value.step == "analyze" and info.value.scorer_id == "faithfulness"
    assert info.value.partial["preprocess_step_result"] == {"claims": ["a"]}


def test_offline_judge_checks_claims_lexically() -> None:
    """The reference's Tesla example: supported, contradicted (another number), speculative."""
    scorer = create_faithfulness_scorer(model="tracescore/offline")
    result = scorer.run(input=QUESTION, context=[TESLA], output=(
        "The Tesla Model S was launched in 2012. The Tesla Model S has a range of 405 miles. "
        "The car might get software updates."))
    assert [v["verdict"] for v in result.analyze_step_result["verdicts"]] == ["yes", "no", "unsure"]
    assert result.score == 0.33
    assert result.reason.startswith("The score is 0.33 because 1 of 3 claims is supported")
    assert "lexical" in result.analyze_step_result["offline_method"]
    assert result.usage.model == "tracescore/offline"


def test_by_name_and_options() -> None:
    scorer = create_scorer("faithfulness", {"scale": 5})
    assert isinstance(scorer, FaithfulnessScorer) and scorer.scale == 5
    assert scorer.model == "tracescore/offline"
    assert create_faithfulness_scorer(model="tracescore/offline",
                                      options={"context": ["a"]}).context == ["a"]
    with pytest.raises(ConfigurationError, match="context must be a list of strings"):
        create_faithfulness_scorer(model="tracescore/offline", context="not a list")
    with pytest.raises(ConfigurationError, match="unknown option 'contxt'"):
        create_faithfulness_scorer(model="tracescore/offline", options={"contxt": []})
    with pytest.raises(ConfigurationError, match="scale"):
        create_faithfulness_scorer(model="tracescore/offline", scale=0)


_NOUNS = ("bridge", "river", "tower", "engine", "library", "harbour", "station", "museum",
          "garden", "factory", "school", "market")


@given(st.lists(st.sampled_from(_NOUNS), min_size=2, max_size=4, unique=True),
       st.integers(2, 5000), st.integers(1, 50))
def test_offline_check_family(nouns: list[str], number: int, delta: int) -> None:
    """Offline: a claim the context states is supported; the same claim with another number is
    contradicted; hedged, it is unsure; about other things, it is unsure."""
    from tracescore.scoring._claims import CONTRADICTED, SUPPORTED, UNVERIFIED, check_claim

    subject, *rest = nouns
    fact = f"The {subject} near the {' and the '.join(rest)} has {number} visitors."
    context = [f"Opening hours vary. {fact}"]
    assert check_claim(fact, context).outcome == SUPPORTED
    assert not check_claim(fact, context).hedged
    changed = fact.replace(str(number), str(number + delta))
    assert check_claim(changed, context).outcome == CONTRADICTED
    assert check_claim(f"The {subject} might close soon.", context).hedged
    assert check_claim("Penguins enjoy cold weather.", context).outcome == UNVERIFIED
