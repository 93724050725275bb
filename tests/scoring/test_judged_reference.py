"""Differential tests: answer relevancy, toxicity, bias and judged tool-call accuracy against the
reference system's own npm package (@mastra/evals, pinned in tests/mastra), given the same judge
replies.

The reference scorers run in Node.js with a scripted judge model (tests/mastra/judged.mjs); ours
run with a scripted Judge that returns the same replies. Scores and step results must agree on
hundreds of generated verdict lists (odd casing and whitespace, unknown verdicts, empty lists,
fractional and large scales), and `reference_round` must round every generated score as the
reference's `roundToTwoDecimals` does.
"""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _helpers import npm_project

from tracescore.scoring import (
    JudgeReply,
    JudgeRequest,
    JudgeUsage,
    Scorer,
    ToolCall,
    create_answer_relevancy_scorer,
    create_bias_scorer,
    create_tool_call_accuracy_scorer_llm,
    create_toxicity_scorer,
)
from tracescore.scoring._prompting import reference_round

MASTRA = Path(__file__).resolve().parents[1] / "mastra"
CASES_PER_SCORER = 120

# verdict strings a judge might send: the two answers, in odd casing and whitespace (JavaScript's
# trim() differs from Python's strip() on U+FEFF and U+001C), and strings that are neither
_VERDICTS = ("yes", "no", "yes", "no", "YES", "Yes", " yes", "yes ", "\tyes\n", "\ufeffyes",
             "\x1cyes", "\xa0YES", "No", " no ", "maybe", "", "yes.", "y es", "ＹＥＳ", "unsure")
_SCALES = (1, 1, 2, 3, 5, 7, 10, 0.5, 0.7, 1.5, 3.3, 100)


class ScriptedJudge:
    """A Judge that answers each step with the next scripted reply (validated as usual)."""

    model = "scripted-judge"

    def __init__(self, replies: list[Any]) -> None:
        self.replies = list(replies)

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        data = self.replies.pop(0)
        return JudgeReply(data=request.validate(data), raw=json.dumps(data),
                          usage=JudgeUsage(model=self.model, calls=1), prompt=request.prompt)


def _reference(script: Path, payload: dict[str, Any], *args: str) -> Any:
    done = subprocess.run(["node", str(script), *args], input=json.dumps(payload).encode(),
                          capture_output=True, check=True, timeout=600)  # fmt: skip
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def reference() -> Path:
    return npm_project(MASTRA, "judged.mjs", "mastra-evals")


def _relevancy_case(rng: random.Random) -> dict[str, Any]:
    count = rng.choice((1, 1, 2, 3, 4, 5, 6, 7, 8, 12, 24, 40))
    statements = [f"statement {i}" for i in range(count)]
    results = [{"result": rng.choice((*_VERDICTS, "unsure", "Unsure", " unsure\n", "un sure")),
                "reason": f"reason {i}"} for i in range(count)]
    options = {"uncertaintyWeight": rng.choice((0.3, 0.3, 0, 0.25, 0.5, 0.7, 1)),
               "scale": rng.choice(_SCALES)}
    return {"scorer": "answer-relevancy", "options": options,
            "replies": [{"statements": statements}, {"results": results},
                        {"reason": "The score is X because."}]}


def _toxicity_case(rng: random.Random) -> dict[str, Any]:
    verdicts = [{"verdict": rng.choice(_VERDICTS), "reason": f"reason {i}"}
                for i in range(rng.choice((0, 1, 1, 2, 3, 4, 5, 7, 9, 13)))]
    return {"scorer": "toxicity", "options": {"scale": rng.choice(_SCALES)},
            "replies": [{"verdicts": verdicts}, {"reason": "The score is X because."}]}


def _bias_case(rng: random.Random) -> dict[str, Any]:
    opinions = [f"opinion {i}" for i in range(rng.choice((0, 1, 2, 3, 5)))]
    results = [{"result": rng.choice(_VERDICTS), "reason": f"reason {i}"}
               for i in range(rng.choice((0, 1, 1, 2, 3, 4, 6, 8, 11)))]
    return {"scorer": "bias", "options": {"scale": rng.choice(_SCALES)},
            "replies": [{"opinions": opinions}, {"results": results},
                        {"reason": "The score is X because."}]}


def _tool_case(rng: random.Random) -> dict[str, Any]:
    tools = [rng.choice(("search", "get_weather", "refund", "send_email"))
             for _ in range(rng.choice((0, 1, 2, 3, 5)))]
    evaluations = [{"toolCalled": name, "wasAppropriate": rng.random() < 0.6,
                    "reasoning": f"reason {i}"} for i, name in enumerate(tools)]
    if rng.random() < 0.2:  # a judge that evaluates a different number of calls
        evaluations = evaluations[: rng.randrange(len(evaluations) + 1)]
    analysis: dict[str, Any] = {"evaluations": evaluations}
    # blank names count in the reference, and must here (validation keeps them)
    missing = rng.choice((None, [], ["get_weather"], ["refund", "search"], [""], ["", " "]))
    if missing is not None:
        analysis["missingTools"] = missing
    available = [{"id": "search", "description": "Search the web"},
                 {"id": "get_weather", "description": "Current weather for a city"}]
    return {"scorer": "llm-tool-call-accuracy", "tools": tools,
            "options": {"availableTools": available},
            "replies": [analysis, {"reason": "The score is X because."}]}


def _cases(make: Callable[[random.Random], dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [{"input": "Tell me about the new policy.", "output": "Here is what I think of it.",
             **make(rng)} for _ in range(CASES_PER_SCORER)]


def _our_replies(case: dict[str, Any]) -> list[Any]:
    """The case's replies for our scorer: a list reply with the wrong number of items (results
    for the opinions, evaluations for the calls) is asked once more, and given again."""
    replies = list(case["replies"])
    if case["scorer"] == "bias" and \
            len(replies[1]["results"]) != (len(replies[0]["opinions"]) or 1):
        replies.insert(2, replies[1])
    if case["scorer"] == "llm-tool-call-accuracy" and \
            len(replies[0]["evaluations"]) != len(case["tools"]):
        replies.insert(1, replies[0])
    return replies


def _ours(case: dict[str, Any]) -> Scorer:
    judge = ScriptedJudge(_our_replies(case))
    if case["scorer"] == "answer-relevancy":
        return create_answer_relevancy_scorer(model=judge, options=case["options"])
    if case["scorer"] == "toxicity":
        return create_toxicity_scorer(model=judge, options=case["options"])
    if case["scorer"] == "bias":
        return create_bias_scorer(model=judge, options=case["options"])
    return create_tool_call_accuracy_scorer_llm(model=judge, options=case["options"])


@pytest.mark.parametrize(("make", "seed"), [(_relevancy_case, 4), (_toxicity_case, 1),
                                           (_bias_case, 2), (_tool_case, 3)],
                         ids=["answer-relevancy", "toxicity", "bias", "llm-tool-call-accuracy"])
def test_scores_equal_the_reference_for_the_same_judge_replies(
        reference: Path, make: Callable[[random.Random], dict[str, Any]], seed: int) -> None:
    cases = _cases(make, seed)
    theirs = _reference(reference, {"cases": cases})
    mismatches = []
    for case, their in zip(cases, theirs, strict=True):
        assert "error" not in their, their
        calls = [ToolCall(name=name) for name in case.get("tools", [])]
        ours = _ours(case).run(input=case["input"], output=case["output"], tool_calls=calls)
        analyze = dict(ours.analyze_step_result)
        asked_again = len(_our_replies(case)) > len(case["replies"])
        assert ("mismatch" in analyze) == asked_again
        analyze.pop("mismatch", None)
        if case["scorer"] == "llm-tool-call-accuracy":  # the reference keeps an absent list absent
            their["analyze"].setdefault("missingTools", [])
            assert ours.preprocess_step_result["actual_tools"] == \
                their["preprocess"]["actualTools"]
        if ours.score != their["score"] or analyze != their["analyze"]:
            mismatches.append((case["replies"][-2], case["options"], ours.score, their["score"]))
    assert not mismatches, mismatches[:5]
    # the generated cases reach the edges: empty lists, and scores the rounding decides
    scores = {their["score"] for their in theirs}
    assert len(scores) >= 8


def test_reference_round_rounds_every_score_like_the_reference(reference: Path) -> None:
    values = [count / total * scale for total in range(1, 41) for count in range(total + 1)
              for scale in (1, 3, 7, 0.7, 2.5, 10)]
    values += [0.125, 0.625, 1.005, 2.675, 0.285, 1.255, 0.1 + 0.2, 4.35, 1e-9, 0.0, 99.995]
    theirs = _reference(reference, {"values": values}, "round")
    ours = [reference_round(v) for v in values]
    wrong = [(v, o, t) for v, o, t in zip(values, ours, theirs, strict=True) if o != t]
    assert not wrong, wrong[:10]
