"""Differential tests on rounding ties for the code scorers that aggregate and round: trajectory
accuracy (code) and the trajectory scorer's efficiency, weighted sum and sub-agent average, given
runs built so that the exact score lies on a rounding boundary (x.xx5), or within 1e-12 of one,
must give the reference's numbers (@mastra/evals through Node.js, tests/mastra/trajectory.mjs).

Each generator draws the shape of a run and its expectation (matched and missing steps, extra
and repeated steps, budgets and how far they are overrun, failing tools and their retries,
weights, sub-agents), computes the exact score with fractions (weights and budgets read as the
decimals they are written as), and keeps only the cases on a tie: there the order of the float
operations decides the side. Parts that are rounded before they are combined (a dimension's
score, a sub-agent's score) are kept off ties, so the whole's exact value is known.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from _helpers import npm_project
from test_reference_ties import dec, on_a_tie
from test_reference_trajectory import _camel, _reference, _their_expectation, _their_step

from tracescore.scoring import create_trajectory_accuracy_scorer, create_trajectory_scorer

MASTRA = Path(__file__).resolve().parents[1] / "mastra"
TIES = 150  # tie cases per generator
ATTEMPTS = 40_000  # draws per generator at most
Case = dict[str, Any]
Made = tuple[Case, Fraction | None]  # None: a rounded part is on a tie, the draw is dropped
_WEIGHTS = (0, 0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.7, 1, 1.5, 2, 3)
_DEFAULT = {"accuracy": dec(0.4), "efficiency": dec(0.3), "tool_failures": dec(0.2),
            "blacklist": dec(0.1)}


def half_up(exact: Fraction) -> Fraction | None:
    """`exact` to two decimals, None when it is on (or within 1e-12 of) a tie."""
    return None if on_a_tie(exact) else Fraction(math.floor(exact * 100 + Fraction(1, 2)), 100)


def _tool(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": "tool_call", **extra}


def _interleave(rng: random.Random, kept: list[dict[str, Any]],
                others: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`others` inserted at random places, `kept` keeping its order."""
    run = list(kept)
    for step in others:
        run.insert(rng.randrange(len(run) + 1), step)
    return run


# --- the code trajectory accuracy scorer: matched / expected, less penalties --------------------
def _accuracy(rng: random.Random) -> Made:
    n = rng.randint(1, 40)
    k = rng.randint(0, n)
    ordering = rng.choice(("relaxed", "strict", "unordered"))
    allow = rng.random() < 0.5
    pairs = rng.choice((0, 0, 1, 2, 3))  # names the run repeats
    expected = [f"e{i}" for i in range(n)]
    matched = set(rng.sample(range(n), k))
    repeated = [_tool(f"r{j}") for j in range(pairs) for _ in range(2)]
    if ordering == "strict":  # position i matches expected[i]; extra steps past the end
        tail = repeated + [_tool(f"x{n + j}") for j in range(rng.choice((0, 0, 1, 2, 3, 5)))]
        rng.shuffle(tail)
        run = [_tool(expected[i] if i in matched else f"x{i}") for i in range(n)] + tail
    else:
        run = _interleave(rng, [_tool(expected[i]) for i in sorted(matched)],
                          repeated + [_tool(f"x{j}") for j in range(rng.choice((0, 1, 3)))])
        if ordering == "unordered":
            rng.shuffle(run)
    score = Fraction(k, n)
    if ordering == "strict" and len(run) > n:
        score = max(Fraction(0), score - Fraction(len(run) - n, n) * dec(0.5))
    if not allow and pairs:
        score = max(Fraction(0), score - pairs * dec(0.1))
    item = {"steps": expected, "ordering": ordering, "allow_repeated_steps": allow}
    return {"scorer": "trajectory-accuracy", "run": run, "item": item}, min(Fraction(1), score)


# --- efficiency: the mean of the step, token and time budget checks and redundant calls ---------
def _over(used: int, limit: int) -> Fraction:
    return Fraction(1) if used <= limit else max(Fraction(0), 1 - Fraction(used - limit, limit))


def _efficiency_run(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any], Fraction]:
    """A run of model calls then tool calls, an expectation with budgets, its efficiency."""
    calls = rng.randint(0, 4)
    tokens = [(rng.randrange(0, 400), rng.randrange(0, 400)) for _ in range(calls)]
    run = [{"name": "gpt", "type": "llm_call", "model": "gpt", "input_tokens": i,
            "output_tokens": o, "duration_ms": rng.choice((0, 5, 120, 900))} for i, o in tokens]
    redundant = 0
    for i in range(rng.randint(1 if not calls else 0, 10)):
        if run and run[-1]["type"] == "tool_call" and rng.random() < 0.3:
            run.append(dict(run[-1]))  # the same call again: redundant
            redundant += 1
        else:
            run.append(_tool(f"t{i}", duration_ms=rng.choice((0, 10, 40, 250, 1000))))
    budgets: dict[str, Any] = {}
    checks: list[Fraction] = []
    if rng.random() < 0.7:
        budgets["max_steps"] = rng.randint(1, len(run) + 2)
        checks.append(_over(len(run), budgets["max_steps"]))
    if calls and rng.random() < 0.5:
        budgets["max_total_tokens"] = rng.choice((50, 100, 200, 400, 800, 1000))
        checks.append(_over(sum(i + o for i, o in tokens), budgets["max_total_tokens"]))
    if rng.random() < 0.5:
        budgets["max_total_duration_ms"] = rng.choice((100, 200, 400, 500, 1000, 2000, 4000))
        duration = sum(int(s["duration_ms"]) for s in run)
        checks.append(_over(duration, budgets["max_total_duration_ms"]))
    if rng.random() < 0.8:
        checks.append(max(Fraction(0), 1 - redundant * dec(0.2)))
    else:
        budgets["no_redundant_calls"] = False
    if not budgets:
        budgets["no_redundant_calls"] = True
    return run, budgets, sum(checks, Fraction(0)) / len(checks) if checks else Fraction(1)


def _efficiency(rng: random.Random) -> Made:
    run, budgets, exact = _efficiency_run(rng)
    return {"scorer": "trajectory", "run": run, "item": budgets}, exact


# --- the weighted sum of accuracy, efficiency, tool failures and blacklist ----------------------
def _weighted(rng: random.Random) -> Made:
    n = rng.choice((1, 2, 3, 4, 5, 6, 7, 8, 10, 20))
    k = rng.randint(0, n)
    expected = [f"e{i}" for i in range(n)]
    run = [_tool(f"e{i}") for i in sorted(rng.sample(range(n), k))]
    retries, limit = rng.choice((0, 0, 1, 2, 3, 4, 5, 6)), rng.choice((0, 1, 2))
    run += [_tool("flaky", arguments={"attempt": i}, **({"error": "timeout"} if i < retries
                                                         else {}))
            for i in range(retries + 1 if retries else 0)]
    redundant = rng.choice((0, 0, 1, 2))
    run += [_tool("again") for _ in range(redundant + 1 if redundant else 0)]
    item: dict[str, Any] = {"steps": expected, "max_retries_per_tool": limit}
    parts: dict[str, Fraction | None] = {"accuracy": half_up(Fraction(k, n))}
    if rng.random() < 0.8:
        checks = [max(Fraction(0), 1 - redundant * dec(0.2))]
        if rng.random() < 0.6:
            item["max_steps"] = rng.randint(1, len(run) + 1)
            checks.append(_over(len(run), item["max_steps"]))
        else:
            item["no_redundant_calls"] = True
        parts["efficiency"] = half_up(sum(checks, Fraction(0)) / len(checks))
    if retries:
        parts["tool_failures"] = max(Fraction(0), 1 - max(0, retries - limit) * dec(0.2))
    if rng.random() < 0.5:
        item["blacklisted_tools"] = ["delete_all"]  # never called
        parts["blacklist"] = Fraction(1)
    weights = {key: rng.choice(_WEIGHTS) for key in _DEFAULT if rng.random() < 0.7}
    if any(value is None for value in parts.values()):
        return {}, None
    used = {key: dec(weights[key]) if key in weights else _DEFAULT[key] for key in parts}
    total = sum(used.values(), Fraction(0))
    exact = sum((used[key] * value for key, value in parts.items() if value is not None),
                Fraction(0)) / total if total else Fraction(1)
    return {"scorer": "trajectory", "run": run, "item": item, "weights": weights}, exact


# --- sub-agents: 0.7 * the run's own score + 0.3 * the average of the sub-agents' scores --------
def _sub_agents(rng: random.Random) -> Made:
    agents, absent = rng.randint(1, 5), rng.choice((0, 0, 0, 1, 2))
    run: list[dict[str, Any]] = []
    expected: list[Any] = []
    scores: list[Fraction | None] = []
    for a in range(agents + absent):
        n = rng.choice((1, 2, 3, 4, 5, 6, 7, 8, 10))
        k = rng.randint(0, n)
        names = [f"c{i}" for i in range(n)]
        expected.append({"name": f"agent{a}", "type": "agent", "steps": {"steps": names}})
        if a < agents:
            children = [_tool(f"c{i}") for i in sorted(rng.sample(range(n), k))]
            run.append({"name": f"agent{a}", "type": "agent", "steps": children})
            scores.append(half_up(Fraction(k, n)))
        else:
            scores.append(Fraction(0))  # an expected sub-agent the run never called
    missing = rng.choice((0, 0, 1, 3))  # expected top-level tools the run did not call
    expected += [f"tool{i}" for i in range(missing)]
    own = half_up(Fraction(agents, agents + absent + missing))
    if own is None or any(score is None for score in scores):
        return {}, None
    average = sum((s for s in scores if s is not None), Fraction(0)) / len(scores)
    exact = dec(0.7) * own + dec(0.3) * average
    return {"scorer": "trajectory", "run": run, "item": {"steps": expected}}, exact


def _sub_agent_level(rng: random.Random) -> Made:
    """One sub-agent whose own weighted score (accuracy and a step budget) is on a tie: its
    rounded score is what the whole averages."""
    n, extra = rng.randint(1, 12), rng.randint(0, 6)
    k = rng.randint(0, n)
    children = _interleave(rng, [_tool(f"c{i}") for i in sorted(rng.sample(range(n), k))],
                           [_tool(f"x{j}") for j in range(extra)])
    limit = rng.randint(1, len(children) + 1)
    child = {"steps": [f"c{i}" for i in range(n)], "max_steps": limit,
             "no_redundant_calls": rng.random() < 0.5}
    accuracy = half_up(Fraction(k, n))
    checks = [_over(len(children), limit)] + ([Fraction(1)] if child["no_redundant_calls"] else [])
    efficiency = half_up(sum(checks, Fraction(0)) / len(checks))
    weights = {key: rng.choice(_WEIGHTS[1:]) for key in ("accuracy", "efficiency")}
    if accuracy is None or efficiency is None:
        return {}, None
    exact = (dec(weights["accuracy"]) * accuracy + dec(weights["efficiency"]) * efficiency) \
        / (dec(weights["accuracy"]) + dec(weights["efficiency"]))
    run = [{"name": "planner", "type": "agent", "steps": children}]
    item = {"steps": [{"name": "planner", "steps": child}]}
    return {"scorer": "trajectory", "run": run, "item": item, "weights": weights}, exact


GENERATORS: dict[str, Callable[[random.Random], Made]] = {
    "accuracy": _accuracy, "efficiency": _efficiency, "weighted": _weighted,
    "sub-agents": _sub_agents, "sub-agent-level": _sub_agent_level}


def ties(name: str, make: Callable[[random.Random], Made]) -> Iterator[Case]:
    """The first TIES generated cases of `make` whose exact score is on a tie."""
    rng, found = random.Random(f"trajectory-ties-{name}"), 0
    for _ in range(ATTEMPTS):
        case, exact = make(rng)
        if exact is not None and on_a_tie(exact):
            found += 1
            yield {**case, "generator": name, "exact": str(exact)}
            if found == TIES:
                return


def _their_case(case: Case) -> Case:
    options: dict[str, Any] = {}
    if "weights" in case:
        options["weights"] = {"toolFailures" if k == "tool_failures" else k: v
                              for k, v in case["weights"].items()}
    return {"scorer": case["scorer"], "options": options,
            "trajectory": {"steps": [_their_step(s) for s in case["run"]]},
            "expected": _their_expectation(case["item"])}


def _nested_scores(nested: list[dict[str, Any]] | None) -> list[Any]:
    return [(n["score"], _nested_scores(n.get("nested"))) for n in nested or []]


@pytest.fixture(scope="module")
def reference() -> Path:
    return npm_project(MASTRA, "trajectory.mjs", "mastra-evals")


def test_code_trajectory_scores_on_rounding_ties_equal_the_reference(reference: Path) -> None:
    cases = [case for name, make in GENERATORS.items() for case in ties(name, make)]
    per_generator = {name: sum(1 for c in cases if c["generator"] == name) for name in GENERATORS}
    assert all(count == TIES for count in per_generator.values()), per_generator
    theirs = _reference(reference, [_their_case(c) for c in cases])
    mismatches = []
    for case, their in zip(cases, theirs, strict=True):
        assert "error" not in their, (case, their)
        if case["scorer"] == "trajectory-accuracy":
            ours = create_trajectory_accuracy_scorer().run(trajectory=case["run"],
                                                           expected_trajectory=case["item"])
            step = ours.preprocess_step_result["comparison"]
            same = _camel(step) == their["preprocess"]["comparison"]
        else:
            ours = create_trajectory_scorer(weights=case.get("weights")).run(
                trajectory=case["run"], expected_trajectory=case["item"])
            step = ours.preprocess_step_result
            same = all(_camel(step[k]) == their["preprocess"].get(c) for k, c in (
                ("accuracy", "accuracy"), ("efficiency", "efficiency"),
                ("blacklist", "blacklist"), ("tool_failures", "toolFailures"))) and \
                _nested_scores(step["nested"]) == _nested_scores(their["preprocess"].get("nested"))
        if ours.score != their["score"] or not same:
            mismatches.append((case["generator"], case["exact"], ours.score, their["score"], case))
    assert not mismatches, mismatches[:3]
    # both sides of a tie occur: the float result is not always rounded the same way
    sides = {(c["generator"], Fraction(c["exact"]) * 100 < Fraction(t["score"]) * 100)
             for c, t in zip(cases, theirs, strict=True) if c["scorer"] == "trajectory"}
    assert len(sides) >= 4, sides


def test_sub_agent_rounding_is_javascripts_math_round() -> None:
    """The trajectory scorer rounds with `Math.round(x * 100) / 100` (no epsilon): generated
    values on, next to and between ties, and the float just below 0.005 (0.49999999999999994
    hundredths, which adding 0.5 in floating point would round up), round as Node rounds them."""
    from tracescore.scoring._trajectory_checks import round_half_up

    rng = random.Random(16)
    values = [0.004999999999999999, 0.005, 0.0, 1.0, 0.995, 0.895, 0.8949999999999999]
    for _ in range(2000):
        tie = (rng.randrange(100) + 0.5) / 100
        values.append(rng.choice((tie, math.nextafter(tie, 0), math.nextafter(tie, 1),
                                  tie * rng.choice((0.7, 0.3, 1 / 3)), rng.random())))
    code = ("let d='';process.stdin.on('data',c=>d+=c).on('end',()=>console.log("
            "JSON.stringify(JSON.parse(d).map(x=>Math.round(x*100)/100))))")
    done = subprocess.run(["node", "-e", code], input=json.dumps(values).encode(),
                          capture_output=True, check=True, timeout=60)
    assert [round_half_up(v) for v in values] == json.loads(done.stdout)
