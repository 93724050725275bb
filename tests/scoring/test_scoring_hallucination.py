"""Hallucination through real litellm over HTTP to the stub judge: steps, formula, context
sources, edges; and the offline judge's lexical version."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _helpers import STUB_JUDGE, script_claims, user_prompt
from hypothesis import given
from hypothesis import strategies as st

from tracescore import ConfigurationError, ScorerError, create_hallucination_scorer
from tracescore.scoring import HallucinationScorer
from tracescore.scoring._registry import create_scorer
from tracescore.scoring.hallucination import hallucination_score
from tracescore.testing import StubLLMServer

QUESTION = "What did SpaceX achieve?"
SPACEX = ["SpaceX achieved its first successful landing in December 2015.",
          "Their reusable rocket technology reduced launch costs by 30%."]


def make_scorer(stub: StubLLMServer, **options: Any) -> HallucinationScorer:
    return create_hallucination_scorer(
        api_base=stub.base_url, **STUB_JUDGE, **options)


REFERENCE_CASES = [
    # (verdicts, scale, expected): hallucinated ("yes") / claims * scale, rounded to 2 decimals
    (["yes", "yes", "no", "yes"], 1, 0.75),  # the reference's own SpaceX example
    (["no", "no"], 1, 0.0),
    (["yes"], 1, 1.0),
    (["yes", "no", "no"], 1, 0.33),
    (["yes", "yes", "no"], 10, 6.67),
    (["Yes", "YES", "no"], 1, 0.0),  # only an exact "yes" counts, as in the reference
]


@pytest.mark.parametrize(("verdicts", "scale", "expected"), REFERENCE_CASES)
def test_reference_cases_through_litellm(stub_llm: StubLLMServer, verdicts: list[str],
                                         scale: float, expected: float) -> None:
    claims = [f"claim {i}" for i in range(len(verdicts))]
    script_claims(stub_llm, claims, verdicts, reason=f"The score is {expected} because reasons.")
    result = make_scorer(stub_llm, scale=scale).run(input=QUESTION, output="Some answer.",
                                                    context=SPACEX)
    assert result.score == expected
    assert result.reason == f"The score is {expected} because reasons."
    assert result.analyze_step_result["verdicts"] == [
        {"statement": c, "verdict": v, "reason": f"verdict {v}"} for c, v in zip(claims, verdicts)]
    _, analyze, reason = (user_prompt(r) for r in stub_llm.requests)
    assert f"<context>\n[0] {SPACEX[0]}\n[1] {SPACEX[1]}\n</context>" in analyze
    assert all(json.dumps(c) in analyze for c in claims)
    assert f'start exactly with "The score is {expected:g} because"' in reason
    schema = stub_llm.requests[1]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["verdicts"]["items"]["properties"]["verdict"]["enum"] == [
        "yes", "no"]
    assert stub_llm.requests[0]["messages"][0]["content"].startswith(
        "You are a careful evaluator of hallucination")


@given(st.lists(st.sampled_from(["yes", "no", "Yes", "unsure"]), max_size=40),
       st.sampled_from([1, 2, 3, 7, 10, 0.5]))
def test_score_formula(verdicts: list[str], scale: float) -> None:
    got = hallucination_score([{"verdict": v} for v in verdicts], scale)
    if not verdicts:
        assert got == 0
        return
    assert abs(got - verdicts.count("yes") / len(verdicts) * scale) <= 0.005 + 1e-9


def test_no_context_makes_every_claim_a_hallucination(stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue({"claims": ["a", "b"]})
    result = make_scorer(stub_llm, scale=5).run(input=QUESTION, output="a. b.")
    assert result.score == 5.0 and result.label == "hallucinated"
    assert result.reason.startswith("The score is 5 because no context was given")
    assert [v["verdict"] for v in result.analyze_step_result["verdicts"]] == ["yes", "yes"]
    assert len(stub_llm.requests) == 1


def test_no_claims_scores_zero(stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue({"claims": []})
    result = make_scorer(stub_llm).run(input=QUESTION, output="Hello!", context=SPACEX)
    assert result.score == 0.0 and result.label == "grounded"
    assert len(stub_llm.requests) == 1


def test_get_context_wins_and_sees_the_run(stub_llm: StubLLMServer) -> None:
    seen: list[dict[str, Any]] = []

    async def get_context(run: dict[str, Any]) -> list[str]:
        seen.append(run)
        return ["from get_context"]

    script_claims(stub_llm, ["c"], ["no"])
    result = make_scorer(stub_llm, options={"getContext": get_context, "context": ["opt"]}).run(
        input=QUESTION, output="c.", context=["call"])
    assert "[0] from get_context" in user_prompt(stub_llm.requests[1])
    assert result.analyze_step_result["context"]["source"] == "get_context"
    assert seen[0]["context"] == ["call"] and seen[0]["output"] == "c."


def test_a_failing_get_context_is_a_scorer_error(stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue({"claims": ["c"]})

    def broken(run: dict[str, Any]) -> list[str]:
        raise RuntimeError("no index")

    with pytest.raises(ScorerError, match="get_context failed: RuntimeError: no index") as info:
        make_scorer(stub_llm, get_context=broken).run(input=QUESTION, output="c.")
    assert info.value.step == "analyze"
    with pytest.raises(ConfigurationError, match="get_context must be callable"):
        make_scorer(stub_llm, get_context="nope")


def test_offline_judge_checks_claims_lexically() -> None:
    scorer = create_hallucination_scorer(model="tracescore/offline")
    result = scorer.run(input=QUESTION, context=SPACEX, output=(
        "SpaceX achieved its first successful landing in December 2015. "
        "Reusable rockets reduced launch costs by 50%. SpaceX will colonise Mars."))
    assert [v["verdict"] for v in result.analyze_step_result["verdicts"]] == ["no", "yes", "yes"]
    assert result.score == 0.67 and result.label == "hallucinated"
    assert result.reason.startswith("The score is 0.67 because 2 of 3 claims are not backed")


def test_by_name() -> None:
    scorer = create_scorer("hallucination", {"scale": 2, "context": ["x"]})
    assert isinstance(scorer, HallucinationScorer) and scorer.context == ["x"]
    assert scorer.model == "tracescore/offline"
