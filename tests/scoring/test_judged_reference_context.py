"""Differential tests: faithfulness, hallucination and context relevance against the reference
system's own npm package (@mastra/evals, pinned in tests/mastra), given the same judge replies.

The reference scorers run in Node.js with a scripted judge model (tests/mastra/judged.mjs); ours
with a scripted Judge that returns the same replies. The generated cases cover verdicts in odd
casing and whitespace, unknown verdicts, no claims, no context, a judge that gives the wrong
number of verdicts or evaluations (ours asks once more and gets the same reply again), every
relevance level, missing context, partial penalties and fractional and large scales. Where ours
skips a judge call (no claims, no context), the reference's judge is scripted to answer as the
rubric says (no verdicts; every claim unverified or hallucinated), and the scores must agree.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from _helpers import npm_project
from test_judged_reference import ScriptedJudge, _reference

from tracescore.scoring import (
    Scorer,
    create_context_relevance_scorer,
    create_faithfulness_scorer,
    create_hallucination_scorer,
)

MASTRA = Path(__file__).resolve().parents[1] / "mastra"
CASES_PER_SCORER = 120
_VERDICTS = ("yes", "no", "unsure", "yes", "no", "Yes", " yes", "YES", "maybe", "", "yes.",
             "\ufeffyes")
_SCALES = (1, 1, 2, 3, 5, 7, 10, 0.5, 0.7, 1.5, 3.3, 100)
_LEVELS = ("high", "medium", "low", "none")
# blank entries count in the reference, and must here (validation keeps them)
_MISSING: tuple[list[str] | None, ...] = (None, [], ["the dosage"], ["a", "b"], ["a", "b", "c", "d"],
                                          [""], ["", "a", " "])


@pytest.fixture(scope="module")
def reference() -> Path:
    return npm_project(MASTRA, "judged.mjs", "mastra-evals")


def _claims_case(rng: random.Random, scorer: str) -> dict[str, Any]:
    claims = [f"claim {i}" for i in range(rng.choice((0, 1, 1, 2, 3, 4, 6, 9)))]
    context = [f"context piece {i}" for i in range(rng.choice((1, 1, 2, 3)))]
    if rng.random() < 0.15:
        context = []
    verdicts = [{"verdict": rng.choice(_VERDICTS), "reason": f"r{i}"} for i in range(len(claims))]
    if not context:  # ours skips the judge; the reference's judge answers as the rubric says
        rubric = "unsure" if scorer == "faithfulness" else "yes"
        verdicts = [{"verdict": rubric, "reason": "no context"} for _ in claims]
    ours_replies: list[Any] = [{"claims": claims}, {"verdicts": verdicts}]
    if claims and context and rng.random() < 0.2:  # a judge that miscounts, twice
        verdicts = (verdicts + [{"verdict": "yes", "reason": "extra"}] if rng.random() < 0.5
                    else verdicts[: rng.randrange(len(verdicts))])
        ours_replies = [{"claims": claims}, {"verdicts": verdicts}, {"verdicts": verdicts}]
    if scorer == "hallucination":  # the reference's reply schema requires each statement
        for i, verdict in enumerate(verdicts):
            verdict["statement"] = claims[i] if i < len(claims) else "extra"
    reason = {"reason": "The score is X because."}
    return {"scorer": scorer, "options": {"scale": rng.choice(_SCALES), "context": context},
            "replies": [{"claims": claims}, {"verdicts": verdicts}, reason],
            "ours": [*ours_replies, reason]}


def _context_case(rng: random.Random) -> dict[str, Any]:
    context = [f"context piece {i}" for i in range(rng.choice((1, 1, 2, 3, 5, 8)))]
    evaluations = [{"context_index": i, "contextPiece": piece,
                    "relevanceLevel": rng.choice(_LEVELS), "wasUsed": rng.random() < 0.5,
                    "reasoning": f"r{i}"} for i, piece in enumerate(context)]
    miscount = rng.random() < 0.15
    if miscount:
        evaluations = evaluations[: rng.randrange(len(evaluations))]
    analysis: dict[str, Any] = {"evaluations": evaluations, "overallAssessment": "summary"}
    missing = rng.choice(_MISSING)
    if missing is not None:
        analysis["missingContext"] = missing
    options: dict[str, Any] = {"scale": rng.choice(_SCALES), "context": context}
    if rng.random() < 0.3:
        names = ("unusedHighRelevanceContext", "missingContextPerItem", "maxMissingContextPenalty")
        options["penalties"] = {name: rng.choice((0, 0.05, 0.2, 0.33, 1))
                                for name in rng.sample(names, rng.randint(1, 3))}
    reason = {"reason": "The score is X because."}
    case: dict[str, Any] = {
        "scorer": "context-relevance", "options": options, "replies": [analysis, reason],
        "ours": [analysis, analysis, reason] if miscount else [analysis, reason]}
    if rng.random() < 0.1:  # a call without context: ours asks no judge
        case["reference_options"] = {**options, "context": None, "noContext": True}
        case["options"] = {k: v for k, v in options.items() if k != "context"}
    return case


def _ours(case: dict[str, Any]) -> Scorer:
    judge = ScriptedJudge(case["ours"])
    factory = {"faithfulness": create_faithfulness_scorer,
               "hallucination": create_hallucination_scorer,
               "context-relevance": create_context_relevance_scorer}[case["scorer"]]
    return factory(model=judge, options=case["options"])


def _judged_items(scorer: str, step: Any) -> list[Any]:
    """The per-item judgements of an analyze step result, for comparison."""
    if not step:
        return []
    if scorer == "context-relevance":
        return [(e["relevanceLevel"], e["wasUsed"]) for e in step.get("evaluations", [])]
    return [v["verdict"] for v in step.get("verdicts", [])]


@pytest.mark.parametrize("scorer", ["faithfulness", "hallucination", "context-relevance"])
def test_scores_equal_the_reference_for_the_same_judge_replies(reference: Path,
                                                               scorer: str) -> None:
    rng = random.Random(f"judged1-{scorer}")
    cases = [{"input": "Tell me about the policy.", "output": "Here is the policy.",
              **(_context_case(rng) if scorer == "context-relevance"
                 else _claims_case(rng, scorer))} for _ in range(CASES_PER_SCORER)]
    theirs = _reference(reference, {"cases": [
        {**c, "options": {k: v for k, v in c.get("reference_options", c["options"]).items()
                          if v is not None}} for c in cases]})
    mismatches = []
    for case, their in zip(cases, theirs, strict=True):
        assert "error" not in their, their
        ours = _ours(case).run(input=case["input"], output=case["output"])
        skipped = "skipped" in (ours.analyze_step_result or {})
        same_items = skipped or not case["options"].get("context", True) or (
            _judged_items(scorer, ours.analyze_step_result)
            == _judged_items(scorer, their["analyze"]))
        if ours.score != their["score"] or not same_items:
            mismatches.append((case["replies"], case["options"], ours.score, their["score"]))
    assert not mismatches, mismatches[:3]
    assert len({their["score"] for their in theirs}) >= 8  # the cases reach many scores
