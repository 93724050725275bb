"""Differential tests: the judged scorers ported last (answer similarity, context precision and
recall, noise sensitivity, prompt alignment, summarization, rubric) against the reference
system's own npm package (@mastra/evals, pinned in tests/mastra), given the same judge replies.

The reference scorers run in Node.js with a scripted judge model (tests/mastra/library.mjs); ours
with a scripted Judge that returns the same replies. For every scorer, seeded generated replies
(every verdict or level, odd casing and whitespace, blank entries, empty lists, a judge that
miscounts, partial options, fractional and large scales) must give the same score, the same
step results, and the reason step the same score. Where ours skips a judge call the reference
makes (nothing to judge), the reference's judge is scripted to answer and the scores must still
agree.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _helpers import npm_project
from test_judged_reference import ScriptedJudge, _reference

from tracescore import ScorerError
from tracescore.scoring import JudgeReply, JudgeRequest, Scorer
from tracescore.scoring._prompting import reference_round
from tracescore.scoring._registry import create_scorer

MASTRA = Path(__file__).resolve().parents[1] / "mastra"
CASES = 80
_SCALES = (1, 1, 1, 2, 3, 5, 7, 10, 0.5, 0.7, 1.5, 3.3, 100)
_VERDICTS = ("yes", "no", "yes", "no", "Yes", " yes", "YES\n", "\ufeffyes", "\xa0yes", "maybe",
             "", "yes.", "y es", "unsure", "No")
_TEXTS = ("a", "b", "", " ", "the refund takes 5 days")


@pytest.fixture(scope="module")
def reference() -> Path:
    return npm_project(MASTRA, "library.mjs", "mastra-evals")


class RecordingJudge(ScriptedJudge):
    """A ScriptedJudge that keeps the requests it was asked."""

    def __init__(self, replies: list[Any]) -> None:
        super().__init__(replies)
        self.requests: list[JudgeRequest] = []

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        self.requests.append(request)
        return await super().judge(request)


REASON = {"reason": "The score is X because."}


# --- case generators: each returns the case for the reference and our judge's replies ---------
def _answer_similarity(rng: random.Random) -> dict[str, Any]:
    n = rng.choice((0, 1, 1, 2, 3, 4, 6, 9))
    matches = [{"groundTruthUnit": rng.choice(_TEXTS), "outputUnit": rng.choice((None, "u", "")),
                "matchType": rng.choice(("exact", "semantic", "partial", "missing")),
                "explanation": "e"} for _ in range(n)]
    analysis = {"matches": matches,
                "extraInOutput": [rng.choice(_TEXTS) for _ in range(rng.choice((0, 0, 1, 2, 5)))],
                "contradictions": [{"outputUnit": "o", "groundTruthUnit": "g", "explanation": "e"}
                                   for _ in range(rng.choice((0, 0, 0, 1, 2)))]}
    options: dict[str, Any] = {}
    for name, values in (("semanticThreshold", (0.8, 0.5, 0.9, 1)),
                         ("exactMatchBonus", (0.2, 0, 0.1, 0.5)),
                         ("missingPenalty", (0.15, 0, 0.3)),
                         ("contradictionPenalty", (1, 0.1, 0.25)),
                         ("extraInfoPenalty", (0.05, 0, 0.1, 0.3)), ("scale", _SCALES)):
        if rng.random() < 0.4:
            options[name] = rng.choice(values)
    units = {"outputUnits": ["u"] * rng.randint(0, 3), "groundTruthUnits": ["g", ""][: n]}
    truth = None if rng.random() < 0.08 else "Refunds take 5 days."
    if truth is None:
        options["requireGroundTruth"] = False
    replies = [units, analysis, REASON]
    return {"options": options, "groundTruth": truth, "replies": replies,
            "ours": [] if truth is None else replies}


def _context_precision(rng: random.Random) -> dict[str, Any]:
    context = [f"context piece {i}" for i in range(rng.choice((1, 1, 2, 3, 5, 8)))]
    indexes = list(range(len(context)))
    if rng.random() < 0.3:  # out of order, or repeated
        indexes = rng.sample(indexes, len(indexes)) if rng.random() < 0.7 else [
            rng.randrange(len(context)) for _ in indexes]
    verdicts = [{"context_index": i, "verdict": rng.choice(_VERDICTS), "reason": "r"}
                for i in indexes]
    ours = [{"verdicts": verdicts}, REASON]
    if rng.random() < 0.15:  # a judge that miscounts, twice (ours asks once more)
        verdicts = verdicts + [{"context_index": len(context), "verdict": "yes", "reason": "x"}]
        ours = [{"verdicts": verdicts}, {"verdicts": verdicts}, REASON]
    options = {"context": context, **({"scale": rng.choice(_SCALES)} if rng.random() < 0.6
                                      else {})}
    return {"options": options, "replies": [{"verdicts": verdicts}, REASON], "ours": ours}


def _context_recall(rng: random.Random) -> dict[str, Any]:
    claims = [rng.choice(("claim", "", " ", "another claim")) for _ in range(
        rng.choice((0, 1, 1, 2, 3, 4, 7)))]
    verdicts = [{"verdict": rng.choice(_VERDICTS), "reason": "r"} for _ in claims]
    ours: list[Any] = [{"claims": claims}, {"verdicts": verdicts}, REASON]
    if claims and rng.random() < 0.2:  # too many or too few verdicts, twice
        verdicts = (verdicts + [{"verdict": "yes", "reason": "x"}] * rng.randint(1, 3)
                    if rng.random() < 0.5 else verdicts[: rng.randrange(len(verdicts))])
        ours = [{"claims": claims}, {"verdicts": verdicts}, {"verdicts": verdicts}, REASON]
    options: dict[str, Any] = {"context": ["Refunds take 5 days.", "Berlin office"]}
    if rng.random() < 0.6:
        options["scale"] = rng.choice(_SCALES)
    case: dict[str, Any] = {"options": options, "groundTruth": "Refunds take 5 days.",
                            "replies": [{"claims": claims}, {"verdicts": verdicts}, REASON],
                            "ours": ours}
    roll = rng.random()
    if roll < 0.08:  # no ground truth: ours asks no judge; the reference scores 0
        case["groundTruth"], case["ours"] = None, []
    elif roll < 0.16 and claims:  # no context: ours asks only for the claims
        case["noContext"] = True
        case["replies"][1] = {"verdicts": [{"verdict": "no", "reason": "r"} for _ in claims]}
        case["ours"] = [{"claims": claims}]
        case["our_options"] = {k: v for k, v in options.items() if k != "context"}
    if not claims and case["ours"]:
        case["ours"] = [{"claims": claims}]  # no claims: ours asks no more
    return case


_LEVELS = ("none", "minimal", "moderate", "significant", "severe")


def _noise_sensitivity(rng: random.Random) -> dict[str, Any]:
    analysis: dict[str, Any] = {
        "dimensions": [{"dimension": f"d{i}", "impactLevel": rng.choice(_LEVELS),
                        "specificChanges": "c", "noiseInfluence": "n"}
                       for i in range(rng.choice((0, 1, 2, 3, 4, 5)))],
        "overallAssessment": "summary",
        "robustnessScore": rng.choice((0, 0.1, 0.33, 0.5, 0.72, 0.85, 0.9, 1, 1.2, -0.1))}
    if rng.random() < 0.8:
        analysis["majorIssues"] = [rng.choice(_TEXTS) for _ in range(rng.choice((0, 0, 1, 2, 4)))]
    options: dict[str, Any] = {"baselineResponse": "Refunds take 5 days.",
                               "noisyQuery": "Tell me about the refund policy. Also, cats?"}
    if rng.random() < 0.3:
        options["noiseType"] = "distractor"
    scoring: dict[str, Any] = {}
    if rng.random() < 0.3:
        scoring["impactWeights"] = {level: rng.choice((0, 0.2, 0.5, 0.95))
                                    for level in rng.sample(_LEVELS, rng.randint(1, 3))}
    if rng.random() < 0.3:
        scoring["penalties"] = {k: rng.choice((0, 0.05, 0.25, 1)) for k in rng.sample(
            ("majorIssuePerItem", "maxMajorIssuePenalty"), rng.randint(1, 2))}
    if rng.random() < 0.3:
        scoring["discrepancyThreshold"] = rng.choice((0, 0.1, 0.5, 1))
    if scoring:
        options["scoring"] = scoring
    return {"options": options, "replies": [analysis, REASON], "ours": [analysis, REASON]}


def _fraction(rng: random.Random) -> float:
    return rng.choice((0, 0.1, 0.2, 0.3, 0.35, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1))


def _both_mode_tie(rng: random.Random) -> tuple[list[float], float]:
    """Dimension scores and a scale where 0.7 * u + 0.3 * u and u round apart (u the
    user-weighted sum): "both" mode must compute it Mastra's way."""
    while True:
        scores = [rng.choice((0.05, 0.15, 0.35, 0.45, 0.55, 0.65, 0.125, 0.375, 0.625))
                  for _ in range(4)]
        scale = rng.choice(_SCALES)
        u = scores[0] * 0.4 + scores[1] * 0.3 + scores[2] * 0.2 + scores[3] * 0.1
        if reference_round((u * 0.7 + u * 0.3) * scale) != reference_round(u * scale):
            return scores, scale


def _prompt_alignment(rng: random.Random) -> dict[str, Any]:
    mode = rng.choice(("user", "system", "both", None))
    scores, scale = [_fraction(rng) for _ in range(4)], rng.choice(_SCALES)
    if mode in ("both", None) and rng.random() < 0.5:
        scores, scale = _both_mode_tie(rng)
    analysis = {
        "intentAlignment": {"score": scores[0], "primaryIntent": "i", "isAddressed": True,
                            "reasoning": "r"},
        "requirementsFulfillment": {"requirements": [
            {"requirement": "q", "isFulfilled": rng.random() < 0.5, "reasoning": "r"}
            for _ in range(rng.randint(0, 3))], "overallScore": scores[1]},
        "completeness": {"score": scores[2], "missingElements": ["m"] * rng.randint(0, 2),
                         "reasoning": "r"},
        "responseAppropriateness": {"score": scores[3], "formatAlignment": True,
                                    "toneAlignment": False, "reasoning": "r"},
        "overallAssessment": "summary"}
    options: dict[str, Any] = {} if mode is None else {"evaluationMode": mode}
    if scale != 1 or rng.random() < 0.5:
        options["scale"] = scale
    if rng.random() < 0.2:
        options["includeConversationHistory"] = rng.choice((True, {"maxMessages": 3}))
    system = rng.choice(([], ["Answer in one sentence."], ["Be polite.", "Use English."]))
    user = "Tell me about the refund policy." if rng.random() < 0.9 else None
    messages = [{"role": "system", "content": t} for t in system]
    messages += [] if user is None else [{"role": "user", "content": user}]
    return {"options": options, "system": system, "input": user,
            "our_input": messages, "replies": [analysis, REASON], "ours": [analysis, REASON]}


def _summarization(rng: random.Random) -> dict[str, Any]:
    alignment = [{"claim": rng.choice(_TEXTS), "supported": rng.random() < 0.7, "reason": "r"}
                 for _ in range(rng.choice((0, 1, 1, 2, 3, 5, 8)))]
    questions = [rng.choice(("q?", "", "another q?")) for _ in range(
        rng.choice((0, 1, 2, 3, 5, 10, 12, 15)))]
    options: dict[str, Any] = {}
    if rng.random() < 0.4:
        options["maxQuestions"] = rng.choice((1, 2, 3, 5, 10, 20))
    if rng.random() < 0.5:
        options["scale"] = rng.choice(_SCALES)
    if rng.random() < 0.3:
        options["source"] = "Refunds take 5 days. The office is in Berlin."
    asked = questions[: options.get("maxQuestions", 10)]
    count = len(asked) if rng.random() < 0.75 else rng.randint(0, len(asked) + 2)
    coverage = {"coverage": [{"question": "q?", "answered": rng.random() < 0.6, "reason": "r"}
                             for _ in range(count)]}
    source = {"alignment": alignment, "questions": questions}
    ours: list[Any] = [source]
    if asked:
        ours += [coverage] if count == len(asked) else [coverage, coverage]
    return {"options": options, "replies": [source, coverage, REASON], "ours": [*ours, REASON]}


def _rubric(rng: random.Random) -> dict[str, Any]:
    n = rng.choice((0, 1, 1, 2, 3, 4, 6))
    criteria: Any = [{"description": f"criterion {i}", **(
        {"required": rng.random() < 0.6} if rng.random() < 0.5 else {})} for i in range(n)]
    if criteria and rng.random() < 0.3:  # a checklist string
        criteria = "\n".join(rng.choice(("- ", "* ", "1. ", "2) ", "", "  - ")) + c["description"]
                              for c in criteria) + "\n\n"
    graded = [{"criterion": f"criterion {i}", "satisfied": rng.random() < 0.7,
               "required": rng.random() < 0.6, "reasoning": "r"} for i in range(n)]
    reply = {"criteria": graded, "overallAssessment": rng.choice(("", "summary"))}
    ours: list[Any] = [reply]
    if n and rng.random() < 0.15:  # a judge that grades a different number of criteria, twice
        reply = {**reply, "criteria": graded[: rng.randrange(n)]}
        ours = [reply, reply]
    if not n:  # no rubric: ours asks no judge; the reference's judge answers as it is told
        reply, ours, criteria = {"criteria": [], "overallAssessment": "nothing"}, [], None
    options = {"scale": rng.choice(_SCALES)} if rng.random() < 0.5 else {}
    return {"criteria": criteria, "options": options, "replies": [reply], "ours": ours}


GENERATORS: dict[str, Callable[[random.Random], dict[str, Any]]] = {
    "answer-similarity": _answer_similarity,
    "context-precision": _context_precision,
    "context-recall": _context_recall,
    "noise-sensitivity": _noise_sensitivity,
    "prompt-alignment": _prompt_alignment,
    "summarization": _summarization,
    "rubric": _rubric,
}


def _ours(scorer: str, case: dict[str, Any], judge: RecordingJudge) -> Scorer:
    options = {**case.get("our_options", case["options"]), **({"criteria": case["criteria"]} if "criteria" in case else {})}
    return create_scorer(scorer, {"model": judge, "options": options}
                         if scorer != "rubric" else {"model": judge, **options})


def _same_steps(ours: Any, theirs: Any) -> bool:
    """Our step result carries the reference's keys with the same values (ours may add notes;
    the reference sorts context precision's verdicts in place, ours keeps the judge's order)."""
    if theirs is None:
        return True
    if "verdicts" in ours and ours["verdicts"] and "context_index" in ours["verdicts"][0]:
        ours = {**ours, "verdicts": sorted(ours["verdicts"], key=lambda v: v["context_index"])}
    return all(ours.get(key) == value for key, value in theirs.items())


@pytest.mark.parametrize("scorer", sorted(GENERATORS))
def test_scores_and_steps_equal_the_reference_for_the_same_judge_replies(
        reference: Path, scorer: str) -> None:
    rng = random.Random(f"library-{scorer}")
    cases = [{"scorer": scorer, "input": "Tell me about the refund policy.",
              "output": "Refunds take 5 days.", **GENERATORS[scorer](rng)} for _ in range(CASES)]
    theirs = _reference(reference, {"cases": [{k: v for k, v in c.items() if k != "ours"}
                                              for c in cases]})
    mismatches: list[tuple[Any, ...]] = []
    for case, their in zip(cases, theirs, strict=True):
        judge = RecordingJudge(case["ours"])
        try:
            ours = _ours(scorer, case, judge).run(
                input=case.get("our_input", case["input"]), output=case["output"],
                ground_truth=case.get("groundTruth"), context=case.get("context", ()))
        except ScorerError as exc:  # the reference must have failed the same step
            if "error" not in their or judge.requests:
                mismatches.append((["our error", str(exc)], their, case))
            continue
        if "error" in their:
            mismatches.append((["their error"], ours.score, their, case))
            continue
        reasons = [r for r in judge.requests if r.step == "reason"]
        pre, ana = ours.preprocess_step_result or {}, ours.analyze_step_result or {}
        skipped = "skipped" in pre or "skipped" in ana  # ours asked no judge: the score counts
        problems = [
            ours.score != their["score"] and "score",
            not skipped and not _same_steps(pre, their["preprocess"]) and "preprocess",
            not skipped and not _same_steps(ana, their["analyze"]) and "analyze",
            any(r.data.get("score") != ours.score for r in reasons) and "reason input",
            case["ours"] and judge.replies != [] and "unused replies",
            # the same steps asked the judge (unless ours skipped one, or asked once more)
            not skipped and len(case["ours"]) == len(case["replies"])
            and len(judge.requests) != their["calls"] and "judge calls"]
        if any(problems):
            mismatches.append(([p for p in problems if p], ours.score, their, case))
    assert not mismatches, mismatches[:2]
    scores = [their["score"] for their in theirs if "error" not in their]
    assert len(scores) >= 0.75 * CASES and len(set(scores)) >= 6  # mostly scored, many scores
