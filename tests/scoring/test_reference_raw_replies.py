"""Differential tests on raw judge replies: validation may refuse a reply, it must never change
the number a reply gives.

For every judged scorer, valid judge replies (the tie generators' and a few more) are bent the
ways judges bend them: blank strings in lists, empty lists, missing and extra fields, numbers and
booleans written as strings, verdicts in odd casing and whitespace, nulls. Each case goes to the
reference (@mastra/evals, tests/mastra/replies.mjs) twice: through its own output schema as in
production ("checked"), and straight into its score step with no schema ("raw"). Ours runs the
same replies through our reply validation and our score step. Ours must either give a number the
reference gives for that reply, or refuse it with a clear ScorerError (a failed score with its
reason); never another number, and never a number where the reference has none.
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _helpers import npm_project
from test_reference_ties import JUDGED, LIBRARY, REASON, TRAJECTORY, _ours, _their_case

from tracescore._exceptions import ScorerError
from tracescore.scoring import (
    JudgedScorer,
    JudgeReply,
    JudgeRequest,
    JudgeUsage,
    ToolCall,
    create_multi_turn_judge_scorer,
)
from tracescore.scoring._registry import create_scorer

MASTRA = Path(__file__).resolve().parents[1] / "mastra"
CASES = 120  # per scorer; every fourth is left as the judge wrote it
Case = dict[str, Any]
_CRASHES = ("TypeError", "KeyError", "AttributeError", "IndexError", "ZeroDivisionError")
_STEPS = {3: ("preprocess", "analyze", "reason"), 2: ("analyze", "reason"), 1: ("analyze",)}


class StepJudge:
    """A Judge answering each step with its scripted reply, the same reply when a step asks
    again (a re-ask after a miscount gets the same bent reply), validated as usual."""

    model = "scripted-judge"

    def __init__(self, replies: list[Any]) -> None:
        self.by_step = dict(zip(_STEPS[len(replies)], replies, strict=True))
        self.asked: list[str] = []

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        self.asked.append(request.step)
        data = copy.deepcopy(self.by_step.get(request.step, {}))
        return JudgeReply(data=request.validate(data), raw=json.dumps(data),
                          usage=JudgeUsage(model=self.model, calls=1), prompt=request.prompt)


# --- valid cases for the scorers the tie generators leave out -----------------------------------
def _rubric(rng: random.Random) -> tuple[Case, Any]:
    n = rng.randint(1, 5)
    criteria = [{"description": f"criterion {i}", "required": rng.random() < 0.5}
                for i in range(n)]
    graded = [{"criterion": f"criterion {i}", "satisfied": rng.random() < 0.7,
               "required": criteria[i]["required"], "reasoning": "r"} for i in range(n)]
    return {"scorer": "rubric", "criteria": criteria, "options": {"scale": rng.choice((1, 5))},
            "replies": [{"criteria": graded, "overallAssessment": "summary"}]}, None


def _multi_turn(rng: random.Random) -> tuple[Case, Any]:
    turns = [rng.choice(("Sunny in London.", "Take an umbrella.", "Yes."))
             for _ in range(rng.randint(1, 4))]
    return {"scorer": "multi-turn-judge", "turns": turns,
            "options": {"criterion": "The agent gave a forecast.",
                        "options": {"scale": rng.choice((1, 2, 0.5))}},
            "replies": [{"satisfied": rng.random() < 0.5, "reasoning": "Turn 2 says."}]}, None


GENERATORS: dict[str, Callable[[random.Random], tuple[Case, Any]]] = {
    **JUDGED, **LIBRARY, **TRAJECTORY, "rubric": _rubric, "multi-turn-judge": _multi_turn}


# --- the ways a judge bends a reply -------------------------------------------------------------
def _spots(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """Every (path, value) inside a reply, the reply itself included."""
    found = [(path, value)]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _spots(inner, (*path, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            found += _spots(inner, (*path, i))
    return found


def _bent(rng: random.Random, value: Any) -> Any:
    """`value` as a careless judge might write it."""
    if isinstance(value, bool):
        return rng.choice((str(value).lower(), str(value), int(value), None, "yes"))
    if isinstance(value, (int, float)):
        return rng.choice((str(value), None, f" {value} ", [value]))
    if isinstance(value, str):
        return rng.choice((value.upper(), f" {value} ", f"\t{value.title()}\n", "", "  ",
                           None, 1, [value], f"{value}."))
    if isinstance(value, list):
        if value and all(isinstance(v, str) for v in value):
            blank = [*value]
            blank.insert(rng.randrange(len(blank) + 1), rng.choice(("", " ", "\n")))
            return rng.choice((blank, [], [""], None, value[1:], ", ".join(value)))
        if not value:
            return rng.choice(([""], [" "], None, [{}], ""))
        return rng.choice(([], None, value[1:], value + value[-1:], [{}] + value, {"0": value}))
    if isinstance(value, dict):
        bent = dict(value)
        if bent and rng.random() < 0.5:
            del bent[rng.choice(list(bent))]  # a missing field
        else:
            bent[rng.choice(("extra", "notes", "confidence"))] = rng.choice(("x", 1, None, []))
        return bent
    return rng.choice(("", 0, [], {}))  # null


def bend(rng: random.Random, replies: list[Any]) -> list[Any]:
    """The replies with one to three changes, the reason step's reply left alone."""
    replies = copy.deepcopy(replies)
    judged = [i for i, reply in enumerate(replies) if reply != REASON]
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        index = rng.choice(judged)
        path, value = rng.choice(_spots(replies[index]))
        new = _bent(rng, value)
        if not path:
            replies[index] = new
            continue
        parent = replies[index]
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = new
    return replies


def _blanks(rng: random.Random, value: Any) -> Any:
    """Every list emptied, and then about half of them given one blank entry."""
    if isinstance(value, dict):
        return {key: _blanks(rng, inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [rng.choice(("", " "))] if rng.random() < 0.5 else []
    return value


def cases(scorer: str) -> list[Case]:
    """Valid replies (every fourth case), replies with nothing but blank entries (every
    eighth), and replies bent one to three times."""
    rng = random.Random(f"raw-replies-{scorer}")
    made = []
    for i in range(CASES):
        case, _ = GENERATORS[scorer](rng)
        case["valid"] = case["replies"]
        if i % 8 == 1:
            replies = [r if r == REASON else _blanks(rng, r) for r in case["replies"]]
            case = {**case, "replies": replies}
        elif i % 4:
            case = {**case, "replies": bend(rng, case["replies"])}
        made.append({**case, "bent": bool(i % 4)})
    return made


# --- both sides ---------------------------------------------------------------------------------
def their_case(case: Case) -> Case:
    if case["scorer"] in ("rubric", "multi-turn-judge"):
        return {k: v for k, v in case.items() if k not in ("bent", "valid")}
    return _their_case({k: v for k, v in case.items() if k not in ("bent", "valid")})


def our_score(case: Case, judge: StepJudge) -> float | None:
    """Our score, or a ScorerError when our validation refuses the reply."""
    name, options = case["scorer"], case.get("options") or {}
    if name == "multi-turn-judge":
        turns = [{"input": f"question {i}", "output": t} for i, t in enumerate(case["turns"])]
        return create_multi_turn_judge_scorer(
            model=judge, criterion=options["criterion"],
            scale=options["options"]["scale"]).run(turns=turns).score
    if name == "rubric":
        scorer = create_scorer(name, {"model": judge, "criteria": case["criteria"], **options})
    else:
        scorer = _ours(case)
        assert isinstance(scorer, JudgedScorer)
        scorer.judge = judge  # the same scorer, answered step by step
    tools = [ToolCall(name=n) for n in case.get("tools", [])]
    extra = {"trajectory": case["run"]} if "run" in case else {}
    return scorer.run(input=case.get("our_input", "Tell me about the refund policy."),
                      output="Refunds take 5 days.", tool_calls=tools,
                      ground_truth=case.get("groundTruth"), **extra).score


def _emptied(value: Any) -> Any:
    """A reply with every list emptied: what a judge answers when there is nothing to judge."""
    if isinstance(value, dict):
        return {key: _emptied(inner) for key, inner in value.items()}
    return [] if isinstance(value, list) else value


def _reference(payload: list[Case]) -> list[dict[str, Any]]:
    script = npm_project(MASTRA, "replies.mjs", "mastra-evals")
    done = subprocess.run(["node", str(script)], input=json.dumps({"cases": payload}).encode(),
                          capture_output=True, check=True, timeout=600)  # fmt: skip
    results: list[dict[str, Any]] = json.loads(done.stdout)
    return results


Outcome = tuple[Case, float | ScorerError | None, list[dict[str, Any]]]


@pytest.fixture(scope="module")
def compared() -> dict[str, list[Outcome]]:
    """Per scorer: each case, our score (or our refusal), and the reference's results for the
    case and, when ours asked no judge for a step (nothing to judge), for the case with that
    step's reply as a judge gives it when there is nothing to judge (the valid reply with its
    lists emptied): ours never saw the bent one."""
    ours: list[tuple[Case, float | ScorerError | None, int]] = []
    payload: list[Case] = []
    for scorer in sorted(GENERATORS):
        for case in cases(scorer):
            judge = StepJudge(case["replies"])
            try:
                outcome: float | ScorerError | None = our_score(case, judge)
            except ScorerError as exc:
                outcome = exc
            payload.append(their_case(case))
            skipped = [i for i, step in enumerate(_STEPS[len(case["replies"])])
                       if step not in judge.asked and step != "reason"]
            if skipped:
                replies = [_emptied(case["valid"][i]) if i in skipped else r
                           for i, r in enumerate(case["replies"])]
                payload.append(their_case({**case, "replies": replies}))
            ours.append((case, outcome, 2 if skipped else 1))
    theirs = iter(_reference(payload))
    found: dict[str, list[Outcome]] = {}
    for case, outcome, count in ours:
        results = [next(theirs) for _ in range(count)]
        found.setdefault(case["scorer"], []).append((case, outcome, results))
    return found


@pytest.mark.parametrize("scorer", sorted(GENERATORS))
def test_validation_refuses_or_keeps_the_references_number(
        compared: dict[str, list[Outcome]], scorer: str) -> None:
    mismatches: list[tuple[Any, ...]] = []
    scored = 0
    for case, ours, theirs in compared[scorer]:
        numbers = {side["score"] for their in theirs for side in their.values()
                   if "error" not in side}
        if isinstance(ours, ScorerError):
            # a failed score with its reason: the reply's fault named, not a crash of ours
            assert not any(crash in str(ours) for crash in _CRASHES), (str(ours), case)
            # refused only what the reference's own output schema refuses too
            if not case["bent"] or "error" not in theirs[0]["checked"]:
                mismatches.append(("refused", str(ours), theirs, case))
            continue
        scored += 1
        if ours not in numbers:
            mismatches.append(("another number", ours, theirs, case))
    assert not mismatches, mismatches[:3]
    assert scored >= CASES // 4  # the valid replies at least
