"""The judged scorers ported last, end to end: built by name, judged through real litellm over HTTP
by the local stub judge server, each step's reply scripted. What reaches the judge (and what must
not), the scores and the reasons a user reads."""

from __future__ import annotations

from typing import Any

import pytest

from tracescore.scoring._registry import create_scorer
from tracescore.testing import StubLLMServer

SOURCE = ("The refund policy: refunds take 5 days and go to the original card. Opened items "
          "cannot be refunded. The office is in Berlin.")
SUMMARY = "Refunds take 5 days, go to the original card, and the office is in Munich."


@pytest.fixture
def judge(stub_llm: StubLLMServer) -> dict[str, Any]:
    return {"model": "openai/judge-stub", "api_base": stub_llm.base_url, "api_key": "sk-test",
            "timeout": 10, "max_retries": 0}


def _prompts(stub_llm: StubLLMServer) -> list[str]:
    return [str(r.messages[-1]["content"]) for r in stub_llm.requests]


def test_summarization_never_shows_the_source_to_the_coverage_step(
        stub_llm: StubLLMServer, judge: dict[str, Any]) -> None:
    stub_llm.enqueue({"alignment": [
        {"claim": "Refunds take 5 days", "supported": True, "reason": "stated"},
        {"claim": "Refunds go to the original card", "supported": True, "reason": "stated"},
        {"claim": "The office is in Munich", "supported": False, "reason": "Berlin"}],
        "questions": ["How long do refunds take?", "Can opened items be refunded?",
                      "Where is the office?"]})
    stub_llm.enqueue({"coverage": [
        {"question": "How long do refunds take?", "answered": True, "reason": "5 days"},
        {"question": "Can opened items be refunded?", "answered": False, "reason": "absent"},
        {"question": "Where is the office?", "answered": True, "reason": "Munich"}]})
    stub_llm.enqueue({"reason": "The score is 0.67 because one claim is wrong."})
    scorer = create_scorer("summarization", {**judge, "source": SOURCE, "max_questions": 5})
    result = scorer.run(input="Summarise the policy.", output=SUMMARY)

    assert result.score == 0.67 and result.label == "partial_summary"  # min(2/3, 2/3)
    assert result.reason == "The score is 0.67 because one claim is wrong."
    source_prompt, coverage_prompt, reason_prompt = _prompts(stub_llm)
    assert SOURCE in source_prompt and SUMMARY in source_prompt
    assert "Berlin" not in coverage_prompt and SUMMARY in coverage_prompt  # summary alone
    assert "The office is in Munich" in reason_prompt and "0.67" in reason_prompt
    assert result.usage.calls == 3


def test_prompt_alignment_judges_the_system_prompt_and_rubric_grades_in_one_call(
        stub_llm: StubLLMServer, judge: dict[str, Any]) -> None:
    dimension = {"score": 0.5, "overallScore": 1, "primaryIntent": "refund time",
                 "isAddressed": True, "requirements": [], "missingElements": ["card"],
                 "formatAlignment": True, "toneAlignment": True, "reasoning": "ok"}
    stub_llm.enqueue({"intentAlignment": {**dimension, "score": 1},
                      "requirementsFulfillment": dimension, "completeness": dimension,
                      "responseAppropriateness": {**dimension, "score": 0},
                      "overallAssessment": "Mostly aligned."})
    stub_llm.enqueue({"reason": "The score is 0.78 because the answer is incomplete."})
    messages = [{"role": "system", "content": "Always answer in one sentence."},
                {"role": "user", "content": "How long do refunds take?"}]
    aligned = create_scorer("prompt-alignment", {**judge, "evaluation_mode": "system"})
    result = aligned.run(input=messages, output="Refunds take 5 days.")
    assert result.score == 0.78  # 1*0.35 + 1*0.35 + 0.5*0.15 + 0*0.15 = 0.775, rounded up
    assert "Always answer in one sentence." in _prompts(stub_llm)[0]

    stub_llm.enqueue({"criteria": [
        {"criterion": "Says how long refunds take", "satisfied": True, "required": True,
         "reasoning": "5 days"},
        {"criterion": "Mentions the card", "satisfied": False, "required": True,
         "reasoning": "No card is mentioned."},
        {"criterion": "Is friendly", "satisfied": False, "required": False,
         "reasoning": "Neutral."}], "overallAssessment": "One required criterion is unmet."})
    rubric = create_scorer("rubric", {**judge, "scale": 10, "criteria": [
        "Says how long refunds take", {"description": "Mentions the card"},
        {"description": "Is friendly", "required": False}]})
    graded = rubric.run(input="How long do refunds take?", output="Refunds take 5 days.")
    assert graded.score == 0.0 and graded.label == "not_satisfied"
    assert graded.reason is not None and graded.reason.startswith("Rubric not met: 1 required")
    assert "Mentions the card: No card is mentioned." in graded.reason
    assert graded.usage.calls == 1 and len(stub_llm.requests) == 3  # no reason call


def _grade(request: dict[str, Any]) -> dict[str, Any]:
    """The stub judge of a rubric with one criterion: met when the output names the card."""
    prompt = str(request["messages"][-1]["content"])
    output = prompt.split("<output>\n")[1].split("\n</output>")[0]
    met = "card" in output
    return {"criteria": [{"criterion": "Says where the money goes", "satisfied": met,
                          "required": True, "reasoning": "named" if met else "not named"}],
            "overallAssessment": ""}


def test_calibrate_measures_the_rubric_against_human_labels(
        stub_llm: StubLLMServer, judge: dict[str, Any]) -> None:
    from tracescore import calibrate

    stub_llm.responder = _grade
    items = [{"input": "Where do refunds go?", "output": answer, "label": label}
             for answer, label in (("To your original card.", "pass"), ("Soon.", "fail"),
                                   ("Back to the card you paid with.", "pass"),
                                   ("We never refund.", "pass"))]
    report = calibrate(items, "rubric", scorer_options={
        **judge, "criteria": "- Says where the money goes"})
    assert report.errors == () and [r.score for r in report.rows] == [1.0, 0.0, 1.0, 0.0]
    assert report.agreement.kappa is not None and 0 < report.agreement.kappa < 1  # one miss
