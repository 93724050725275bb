"""The decided divergences from the reference (docs/scorers.md, "Decided divergences"), checked
against the reference system's own npm package (@mastra/evals, pinned in tests/mastra) on
generated cases that hit them: by default each scorer keeps tracescore's documented behaviour,
and `mastra_compat=True` gives the reference's number, with the same step results.

The reference runs in Node.js (tests/mastra/divergences.mjs), given the same data as ours. For
the default, the documented behaviour is the reference's on data that says what ours reads
(an expected step given arguments is a tool call; integers beyond 2**53 that differ stay
different: each is written as a text, on both sides, so that nothing collides).
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
from _helpers import npm_project

from tracescore import ConfigurationError
from tracescore._exceptions import ScorerError
from tracescore.scoring import (
    create_content_similarity_scorer,
    create_tool_call_accuracy_scorer,
    create_trajectory_accuracy_scorer,
    create_trajectory_scorer,
)

MASTRA = Path(__file__).resolve().parents[1] / "mastra"
CASES = 200
BIG = 2**53
_NAMES = ("search", "fetch", "refund")
# arguments, many with integers that doubles cannot tell apart (2**53 + 1 reads as 2**53) or
# cannot hold at all (10**400 reads as Infinity, written null)
_ARGS = ({"q": "rain"}, {"q": "sun"}, {"id": 7}, {"id": BIG}, {"id": BIG + 1}, {"id": BIG + 2},
         {"id": BIG + 3}, {"id": -BIG - 1}, [BIG + 1, 7], [BIG, 7], {"id": 10**400},
         {"id": 10**401})
# each with another that is the same double (a twin)
_TWINS = {json.dumps(x): y for a, b in (({"id": BIG}, {"id": BIG + 1}),
                                         ({"id": BIG + 3}, {"id": BIG + 4}),
                                         ({"id": -BIG - 1}, {"id": -BIG}),
                                         ([BIG + 1, 7], [BIG, 7]),
                                         ({"id": 10**400}, {"id": 10**401}))
          for x, y in ((a, b), (b, a))}
_TYPES = {"tool_call": "tool_call", "llm_call": "model_generation", "agent": "agent_run"}


@pytest.fixture(scope="module")
def reference() -> Path:
    return npm_project(MASTRA, "divergences.mjs", "mastra-evals")


def _reference(script: Path, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    done = subprocess.run(["node", str(script)], input=json.dumps({"cases": cases}).encode(),
                          capture_output=True, check=True, timeout=300)  # fmt: skip
    results: list[dict[str, Any]] = json.loads(done.stdout)
    return results


def _camel_key(key: str) -> str:
    return "".join(w.title() if i else w for i, w in enumerate(key.split("_")))


def _camel(value: Any) -> Any:
    """Our step result in the reference's spelling (camelCase keys, None left out)."""
    if isinstance(value, dict):
        return {_camel_key(k): _camel(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_camel(v) for v in value]
    return value


def _distinct_ints(value: Any) -> Any:
    """Integers beyond 2**53 as texts: what compares exactly, in the reference too."""
    if type(value) is int and abs(value) > BIG:
        return f"int {value}"
    if isinstance(value, dict):
        return {k: _distinct_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_distinct_ints(v) for v in value]
    return value


# --- trajectories: generated runs and expectations, in our dataset format ----------------------
def _step(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    kind = rng.choice(("tool_call",) * 4 + ("llm_call", "agent"))
    step: dict[str, Any] = {"name": rng.choice(_NAMES), "type": kind}  # names shared by types
    if kind == "tool_call" and rng.random() < 0.85:
        step["arguments"] = rng.choice(_ARGS)
    if kind == "agent" and depth == 0:
        step["steps"] = [_step(rng, 1) for _ in range(rng.randrange(1, 4))]
    return step


def _run(rng: random.Random) -> list[dict[str, Any]]:
    steps = [_step(rng) for _ in range(rng.randrange(1, 6))]
    if rng.random() < 0.3:  # the same call twice in a row (a redundant call, or nearly)
        i = rng.randrange(len(steps))
        twin = dict(steps[i])
        if "arguments" in twin and rng.random() < 0.5:
            twin["arguments"] = rng.choice(_ARGS)
        steps.insert(i, twin)
    return steps


def _expected(rng: random.Random, run: list[dict[str, Any]], depth: int = 0) -> list[Any]:
    """Expected steps from the run: most given arguments without a type (the divergence)."""
    steps: list[Any] = []
    for step in run:
        if rng.random() < 0.15:
            continue
        expected: dict[str, Any] = {"name": step["name"]}
        if rng.random() < 0.7:
            given = step.get("arguments", rng.choice(_ARGS))
            expected["arguments"] = rng.choice((given, given, _TWINS.get(json.dumps(given), given),
                                                rng.choice(_ARGS)))
        if rng.random() < 0.3:
            expected["type"] = step["type"]
        if step.get("steps") and depth == 0 and rng.random() < 0.7:
            expected["steps"] = {"steps": _expected(rng, step["steps"], 1)}
        steps.append(expected)
    if rng.random() < 0.3:
        rng.shuffle(steps)
    return steps


def _their_step(step: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"stepType": _TYPES[step["type"]], "name": step["name"]}
    if "arguments" in step:
        out["toolArgs"] = step["arguments"]
    if step["type"] == "tool_call":
        out["success"] = True
    if "steps" in step:
        out["children"] = [_their_step(s) for s in step["steps"]]
    return out


def _their_expected(step: dict[str, Any], documented: bool) -> dict[str, Any]:
    """An expected step for the reference: as given, or as ours reads it (`documented`)."""
    out: dict[str, Any] = {"name": step["name"]}
    kind = step.get("type", "tool_call" if documented and "arguments" in step else None)
    if kind is not None:
        out["stepType"] = _TYPES[kind]
    if "arguments" in step:
        out["toolArgs"] = step["arguments"]
    if "steps" in step:
        out["children"] = _their_expectation(step["steps"], documented)
    return out


def _their_expectation(expectation: dict[str, Any] | None,
                       documented: bool) -> dict[str, Any] | None:
    if expectation is None:
        return None
    out: dict[str, Any] = {}
    for key, value in expectation.items():
        out[_camel_key(key)] = [_their_expected(s, documented) for s in value] if key == "steps" else value
    return out


def _trajectory_case(rng: random.Random, scorer: str) -> dict[str, Any]:
    run = _run(rng)
    item: dict[str, Any] | None = {"steps": _expected(rng, run)}
    ours: dict[str, Any] = {}
    if scorer == "trajectory-accuracy":
        roll = rng.random()
        if roll < 0.12:
            item = None  # no expected steps at all
        elif roll < 0.2:
            item = {"ordering": "strict"}  # an expectation without steps
        elif roll < 0.35:
            ours["expected_trajectory"], item = item["steps"], None  # the scorer's own
        if item is not None and rng.random() < 0.5:
            item["ordering"] = rng.choice(("relaxed", "strict", "unordered"))
    else:
        ours["defaults"] = {"no_redundant_calls": True} if rng.random() < 0.6 else None
    return {"run": run, "item": item, "ours": ours}


def _their_trajectory(case: dict[str, Any], scorer: str, documented: bool) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if "expected_trajectory" in case["ours"]:
        options["expectedTrajectory"] = [_their_expected(s, documented)
                                         for s in case["ours"]["expected_trajectory"]]
    if case["ours"].get("defaults"):
        options["defaults"] = _their_expectation(case["ours"]["defaults"], documented)
    their = {"scorer": scorer, "options": options,
             "trajectory": {"steps": [_their_step(s) for s in case["run"]]},
             "expected": _their_expectation(case["item"], documented)}
    return _distinct_ints(their) if documented else their


def _same_steps(scorer: str, ours: dict[str, Any], their: dict[str, Any]) -> bool:
    if scorer == "trajectory-accuracy":
        return _camel(ours["comparison"]) == their.get("comparison") and \
            ("error" in ours) == ("error" in their)
    return all(_camel(ours[k]) == their.get(k) for k in ("accuracy", "efficiency", "blacklist"))


@pytest.mark.parametrize(("scorer", "seed"), [("trajectory-accuracy", 31), ("trajectory", 32)])
def test_trajectory_divergences_default_and_mastra_compat(reference: Path, scorer: str,
                                                          seed: int) -> None:
    rng = random.Random(seed)
    cases = [_trajectory_case(rng, scorer) for _ in range(CASES)]
    as_given = _reference(reference, [_their_trajectory(c, scorer, False) for c in cases])
    documented = _reference(reference, [_their_trajectory(c, scorer, True) for c in cases])
    create = create_trajectory_accuracy_scorer if scorer == "trajectory-accuracy" \
        else create_trajectory_scorer
    mismatches: list[Any] = []
    refused = differ = 0
    for case, given, ours_by_doc in zip(cases, as_given, documented, strict=True):
        assert "error" not in given and "error" not in ours_by_doc, (case, given)
        options = {k: v for k, v in case["ours"].items() if v is not None}
        compat = create(**options, mastra_compat=True).run(
            trajectory=case["run"], expected_trajectory=case["item"])
        if compat.score != given["score"] or not _same_steps(
                scorer, compat.preprocess_step_result, given["preprocess"]):
            mismatches.append(("compat", case, given, compat.preprocess_step_result))
        try:
            default = create(**options).run(trajectory=case["run"],
                                            expected_trajectory=case["item"])
        except ScorerError as exc:  # no expected steps: refused, where the reference scores 0
            refused += 1
            assert "no expected trajectory" in str(exc)
            assert given["score"] == 0 and "error" in given["preprocess"]
            continue
        differ += default.score != compat.score
        if default.score != ours_by_doc["score"] or not _same_steps(
                scorer, default.preprocess_step_result, ours_by_doc["preprocess"]):
            mismatches.append(("default", case, ours_by_doc, default.preprocess_step_result))
    assert not mismatches, mismatches[:2]
    assert differ >= CASES // 10  # the generated cases hit the divergences
    assert (refused > 0) == (scorer == "trajectory-accuracy")


def test_each_trajectory_divergence_alone() -> None:
    """One run per divergence: each changes the number, and the option gives the other."""
    run = [{"name": "search", "type": "llm_call"},
           {"name": "fetch", "type": "tool_call", "arguments": {"id": BIG}}]
    untyped = [{"name": "search", "arguments": {"q": "rain"}}]
    big = [{"name": "fetch", "type": "tool_call", "arguments": {"id": BIG + 1}}]
    for expected, default, compat in ((untyped, 0.0, 1.0), (big, 0.0, 1.0)):
        for flag, score in ((False, default), (True, compat)):
            assert create_trajectory_accuracy_scorer(
                expected_trajectory=expected, mastra_compat=flag).run(
                trajectory=run).score == score
    assert create_trajectory_accuracy_scorer(mastra_compat=True).run(trajectory=run).score == 0


# --- tool-call accuracy: an empty expected order -----------------------------------------------
def test_empty_tool_order_default_and_mastra_compat(reference: Path) -> None:
    rng = random.Random(33)
    cases: list[dict[str, Any]] = []
    for _ in range(CASES):
        options: dict[str, Any] = {"expectedToolOrder": [], "strictMode": rng.random() < 0.5}
        if rng.random() < 0.3:
            options["expectedTool"] = rng.choice(_NAMES)
        cases.append({"scorer": "tool-call-accuracy", "options": options, "input": "q",
                      "output": "a", "tools": [rng.choice(_NAMES)
                                               for _ in range(rng.choice((0, 1, 1, 2, 3)))]})
    theirs = _reference(reference, cases)
    for case, their in zip(cases, theirs, strict=True):
        output = {"tool_calls": case["tools"]}
        ours = create_tool_call_accuracy_scorer(options=case["options"], mastra_compat=True).run(
            input="q", output=output)
        assert ours.score == their["score"], (case, their)
        step, their_step = ours.preprocess_step_result, their["preprocess"]
        for key in ("expected_tool", "expected_tool_order", "actual_tools", "strict_mode",
                    "has_tool_calls", "correct_tool_called", "correct_order_called"):
            assert step[key] == their_step.get(_camel_key(key)), (key, case)
        if "expectedTool" in case["options"]:  # not a divergence: the default agrees
            assert create_tool_call_accuracy_scorer(options=case["options"]).run(
                input="q", output=output).score == their["score"]
        else:
            with pytest.raises(ConfigurationError, match="expected_tool or expected_tool_order"):
                create_tool_call_accuracy_scorer(options=case["options"])
    assert {t["score"] for t in theirs} == {0, 1}


# --- content similarity: some of its options ---------------------------------------------------
_WORDS = ("The", "quick", "BROWN", "fox", "Jumps", "over", "the", "lazy", "dog", "Café", "x")
_GAPS = (" ", " ", "  ", "\t", "\n", " \u00a0", "\u3000")


def _text(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randrange(1, 8))]
    gaps = [rng.choice(_GAPS) for _ in words]
    text = rng.choice(("", " ", "\n")) + "".join(w + g for w, g in zip(words, gaps))
    return text if rng.random() < 0.5 else text.rstrip()


def _variant(rng: random.Random, text: str) -> str:
    if rng.random() < 0.5:
        text = text.swapcase() if rng.random() < 0.5 else text.lower()
    if rng.random() < 0.5:
        text = " ".join(text.split()) if rng.random() < 0.5 else text.replace(" ", "  \t")
    return text


_PARTIAL: tuple[dict[str, bool] | None, ...] = (None, {}, {"ignoreCase": False}, {"ignoreCase": True}, {"ignoreWhitespace": False},
            {"ignoreWhitespace": True}, {"ignoreCase": False, "ignoreWhitespace": True},
            {"ignoreCase": True, "ignoreWhitespace": False})


def test_partial_similarity_options_default_and_mastra_compat(reference: Path) -> None:
    rng = random.Random(34)
    cases: list[dict[str, Any]] = []
    for _ in range(CASES):
        text = _text(rng)
        cases.append({"scorer": "content-similarity", "options": rng.choice(_PARTIAL),
                      "input": text, "output": _variant(rng, text)})
    given = _reference(reference, cases)
    full = _reference(reference, [  # the options not given at their defaults (ours)
        {**c, "options": {"ignoreCase": True, "ignoreWhitespace": True, **(c["options"] or {})}}
        for c in cases])
    differ = 0
    for case, their, their_full in zip(cases, given, full, strict=True):
        compat = create_content_similarity_scorer(options=case["options"], mastra_compat=True)
        default = create_content_similarity_scorer(options=case["options"])
        for scorer, expected in ((compat, their), (default, their_full)):
            ours = scorer.run(input=case["input"], output=case["output"])
            step = ours.preprocess_step_result
            assert ours.score == expected["score"], (case, expected)
            assert (step["processed_input"], step["processed_output"]) == (
                expected["preprocess"]["processedInput"],
                expected["preprocess"]["processedOutput"]), case
        differ += their["score"] != their_full["score"]
    assert differ >= CASES // 10
