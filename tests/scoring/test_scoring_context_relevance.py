"""Context relevance through real litellm over HTTP to the stub judge: formula, penalties,
context sources, edges; and the offline judge's lexical version."""

from __future__ import annotations

from typing import Any

import pytest
from _helpers import STUB_JUDGE, user_prompt
from hypothesis import given
from hypothesis import strategies as st

from tracescore import ConfigurationError, ScorerError, create_context_relevance_scorer
from tracescore.scoring import ContextRelevanceScorer
from tracescore.scoring._registry import create_scorer
from tracescore.scoring.context_relevance import RELEVANCE_WEIGHTS, context_relevance_score
from tracescore.testing import StubLLMServer

QUERY = "What are the benefits of exercise?"
RESPONSE = "Regular exercise improves cardiovascular health and mental wellbeing."
CONTEXT = ["Exercise strengthens the heart and improves blood circulation.",
           "A balanced diet is important for overall health.",
           "Regular physical activity reduces stress and anxiety levels."]


def make_scorer(stub: StubLLMServer, **options: Any) -> ContextRelevanceScorer:
    return create_context_relevance_scorer(
        api_base=stub.base_url, **STUB_JUDGE, **options)


def evaluation(level: str, used: bool, index: int = 0) -> dict[str, Any]:
    return {"context_index": index, "relevanceLevel": level, "wasUsed": used,
            "reasoning": f"{level} {used}"}


def script(stub: StubLLMServer, evaluations: list[dict[str, Any]], missing: list[str],
           reason: str = "The score is X because of the evaluations.") -> None:
    stub.enqueue({"evaluations": evaluations, "missingContext": missing,
                  "overallAssessment": "summary"})
    stub.enqueue({"reason": reason})


REFERENCE_CASES = [
    # (levels and use, missing context, penalties, scale, expected)
    ([("high", True), ("none", False), ("high", True)], [], None, 1, 0.67),  # reference example
    ([("high", True)], [], None, 1, 1.0),
    ([("high", False)], [], None, 1, 0.9),  # one unused high-relevance piece: -0.1
    ([("medium", True), ("low", False)], [], None, 1, 0.5),
    ([("high", True), ("high", True)], ["a", "b"], None, 1, 0.7),  # 2 missing: -0.3
    ([("high", True)], ["a", "b", "c", "d"], None, 1, 0.5),  # missing capped at 0.5
    ([("none", False)], ["a"], None, 1, 0.0),  # never below 0
    ([("high", False), ("medium", True)], [], None, 10, 7.5),
    ([("high", False)], ["a"], {"unusedHighRelevanceContext": 0.2, "missingContextPerItem": 0.3},
     1, 0.5),
]


@pytest.mark.parametrize(("pieces", "missing", "penalties", "scale", "expected"),
                         REFERENCE_CASES)
def test_reference_cases_through_litellm(stub_llm: StubLLMServer, pieces: list[tuple[str, bool]],
                                         missing: list[str], penalties: dict[str, float] | None,
                                         scale: float, expected: float) -> None:
    context = [f"context piece {i}" for i in range(len(pieces))]
    evaluations = [evaluation(level, used, i) for i, (level, used) in enumerate(pieces)]
    script(stub_llm, evaluations, missing, reason=f"The score is {expected} because reasons.")
    result = make_scorer(stub_llm, scale=scale, penalties=penalties).run(
        input=QUERY, output=RESPONSE, context=context)
    assert result.score == expected
    assert result.reason == f"The score is {expected} because reasons."
    step = result.analyze_step_result
    assert step["evaluations"] == [{**e, "contextPiece": c} for e, c in zip(evaluations, context)]
    assert step["missingContext"] == missing and step["overallAssessment"] == "summary"
    assert result.preprocess_prompt is None  # no preprocess step, as in the reference
    analyze, reason = (user_prompt(r) for r in stub_llm.requests)
    assert f"<query>\n{QUERY}\n</query>" in analyze
    assert f"<response>\n{RESPONSE}\n</response>" in analyze
    assert "\n".join(f"[{i}] {c}" for i, c in enumerate(context)) in analyze
    assert f'start exactly with "The score is {expected:g} because"' in reason


@given(st.lists(st.tuples(st.sampled_from(list(RELEVANCE_WEIGHTS)), st.booleans()), max_size=12),
       st.integers(0, 6), st.sampled_from([1, 2, 10, 0.5]))
def test_score_formula(pieces: list[tuple[str, bool]], missing: int, scale: float) -> None:
    evaluations = [{"relevanceLevel": level, "wasUsed": used} for level, used in pieces]
    got = context_relevance_score(evaluations, ["m"] * missing, scale)
    if not pieces:
        assert got == (0.0 if missing else 1.0)  # the reference: unscaled, no evaluations
        return
    mean = sum(RELEVANCE_WEIGHTS[level] for level, _ in pieces) / len(pieces)
    unused = sum(1 for level, used in pieces if level == "high" and not used)
    exact = max(0.0, mean - 0.1 * unused - min(0.15 * missing, 0.5)) * scale
    assert abs(got - exact) <= 0.005 + 1e-9


def test_no_context_scores_scale_without_the_judge(stub_llm: StubLLMServer) -> None:
    result = make_scorer(stub_llm, scale=5).run(input=QUERY, output=RESPONSE, context=["  "])
    assert result.score == 5.0 and result.label == "relevant"
    assert "no context was given" in result.reason
    assert "judge was not called" in result.analyze_step_result["skipped"]
    assert stub_llm.requests == []


def test_no_evaluations_scores_by_missing_context(stub_llm: StubLLMServer) -> None:
    for missing, expected in (([], 1.0), (["the dosage"], 0.0)):
        stub_llm.enqueue({"evaluations": [], "missingContext": missing,
                          "overallAssessment": "s"})
        stub_llm.enqueue({"evaluations": [], "missingContext": missing,
                          "overallAssessment": "s"})  # asked again: the count is off
        stub_llm.enqueue({"reason": "The score is X because."})
        result = make_scorer(stub_llm, scale=10).run(input=QUERY, output=RESPONSE,
                                                     context=CONTEXT[:1])
        assert result.score == expected  # not scaled, as in the reference
        assert result.analyze_step_result["mismatch"]["context_pieces"] == 1


def test_context_sources_in_order(stub_llm: StubLLMServer) -> None:
    seen: list[Any] = []

    def extractor(input: Any, output: Any) -> list[str]:
        seen.append((input, output))
        return ["extracted"]

    script(stub_llm, [evaluation("high", True)], [])
    result = make_scorer(stub_llm, options={"contextExtractor": extractor,
                                            "context": ["option"]}).run(
        input=QUERY, output=RESPONSE, context=["call"])
    assert "[0] extracted" in user_prompt(stub_llm.requests[0]) and seen == [(QUERY, RESPONSE)]
    assert result.analyze_step_result["context"]["source"] == "context_extractor"
    script(stub_llm, [evaluation("high", True)], [])
    make_scorer(stub_llm, context=["option"]).run(input=QUERY, output=RESPONSE, context=["call"])
    assert "[0] option" in user_prompt(stub_llm.requests[2])


def test_a_bad_relevance_level_fails_the_analyze_step(stub_llm: StubLLMServer) -> None:
    for _ in range(2):  # native JSON, then the schema in the prompt
        stub_llm.enqueue({"evaluations": [evaluation("very high", True)], "missingContext": [],
                          "overallAssessment": "s"})
    with pytest.raises(ScorerError) as info:
        make_scorer(stub_llm, max_retries=0).run(input=QUERY, output=RESPONSE, context=["c"])
    assert info.value.step == "analyze" and info.value.scorer_id == "context-relevance"


@pytest.mark.parametrize(("options", "message"), [
    ({"context": []}, "context cannot be an empty list"),
    ({"context_extractor": 3}, "context_extractor must be callable"),
    ({"penalties": {"unusedHigh": 0.1}}, "unknown option 'unusedHigh'"),
    ({"penalties": {"missingContextPerItem": 2}}, "penalties.missing_context_per_item must be"),
    ({"penalties": [0.1]}, "penalties must be a mapping"),
])
def test_configuration_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        create_context_relevance_scorer(model="tracescore/offline", **options)


def test_offline_judge_by_word_overlap() -> None:
    scorer = create_context_relevance_scorer(model="tracescore/offline")
    result = scorer.run(input=QUERY, output="Exercise strengthens the heart and reduces stress.",
                        context=CONTEXT)
    levels = [(e["relevanceLevel"], e["wasUsed"])
              for e in result.analyze_step_result["evaluations"]]
    # piece 2 is about exercise too, but shares no word with the query: a lexical limit
    assert levels == [("high", True), ("none", False), ("none", False)]
    assert result.score == 0.33
    assert result.analyze_step_result["missingContext"] == []
    assert "cannot tell what context is missing" in result.analyze_step_result["offline_method"]


def test_by_name() -> None:
    scorer = create_scorer("context_relevance", {"penalties": {"maxMissingContextPenalty": 0.2}})
    assert isinstance(scorer, ContextRelevanceScorer)
    assert scorer.penalties["max_missing_context_penalty"] == 0.2
