"""Differential tests: the code checks against the reference system's own `checks.*`
(@mastra/evals, pinned in tests/mastra), on seeded generated outputs and tool calls, at both
scopes (the call's tool calls, and the same calls as a run's steps)."""

from __future__ import annotations

import json
import random
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from _helpers import npm_project

from tracescore.scoring import ToolCall
from tracescore.scoring._registry import create_scorer

MASTRA = Path(__file__).resolve().parents[1] / "mastra"
CASES = 150
_WORDS = ("Sunny", "sunny", "72°F", "rain", "Error", "error:", "the", "The", " ", "  ", "",
          "12", "°C", "fox", "Fox  jumps")
_TOOLS = ("search", "fetch", "summarize", "refund")
_PATTERNS = (r"\d{1,3}°[FC]", r"^sun", r"error", r"[A-Z]\w+", r"\s{2}", r"rain$", r".*")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@pytest.fixture(scope="module")
def reference() -> Path:
    return npm_project(MASTRA, "checks.mjs", "mastra-evals")


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(_WORDS) + rng.choice(("", " ")) for _ in range(rng.randrange(5)))


def _case(rng: random.Random, check: str) -> dict[str, Any]:
    """(reference positional args, our options) of one generated check."""
    args: list[Any]
    ours: dict[str, Any]
    case_options = {"ignore_case": rng.random() < 0.6}
    theirs_options = {"ignoreCase": case_options["ignore_case"]}
    if check in ("includes", "excludes", "equals"):
        expected = _text(rng)
        args, ours = [expected, theirs_options], {"expected": expected, **case_options}
    elif check == "similarity":
        expected = _text(rng)
        threshold = rng.choice((None, 0, 0.3, 0.5, 1))
        options = {**theirs_options, **({} if threshold is None else {"threshold": threshold})}
        args, ours = [expected, options], {"expected": expected, "threshold": threshold,
                                           **case_options}
    elif check == "matches":
        pattern, flags, exact = rng.choice(_PATTERNS), rng.choice(("", "i")), rng.random() < 0.3
        args, ours = [pattern, flags, {"exact": exact}], {"pattern": pattern, "flags": flags,
                                                          "exact": exact}
    elif check in ("calledTool", "didNotCall"):
        tool = rng.choice(_TOOLS)
        times = rng.choice((None, 0, 1, 2, 3))
        if check == "didNotCall" or times is None:
            args, ours = [tool], {"tool_name": tool}
        else:
            args, ours = [tool, {"times": times}], {"tool_name": tool, "times": times}
    elif check == "toolOrder":
        order = [rng.choice(_TOOLS) for _ in range(rng.randrange(4))]
        args, ours = [order], {"expected_order": order}
    elif check == "maxToolCalls":
        limit = rng.randrange(5)
        args, ours = [limit], {"max": limit}
    else:
        args, ours = [], {}
    texts = [_text(rng) for _ in range(rng.choice((1, 1, 2, 3)))]
    tools = [{"name": rng.choice(_TOOLS), "failed": rng.random() < 0.2}
             for _ in range(rng.choice((0, 0, 1, 2, 3, 5)))]
    return {"check": check, "args": args, "ours": ours, "texts": texts, "tools": tools}


CHECKS = ("includes", "excludes", "equals", "matches", "similarity", "calledTool", "didNotCall",
          "toolOrder", "maxToolCalls", "usedNoTools", "noToolErrors")


@pytest.mark.parametrize("check", CHECKS)
def test_checks_equal_the_reference(reference: Path, check: str) -> None:
    rng = random.Random(f"check-{check}")
    cases = [_case(rng, check) for _ in range(CASES)]
    done = subprocess.run(["node", str(reference)], capture_output=True, check=True, timeout=120,
                          input=json.dumps({"cases": cases}).encode())
    theirs = json.loads(done.stdout)
    name = "check-" + _snake(check).replace("_", "-")
    scores = set()
    for case, their in zip(cases, theirs, strict=True):
        assert "error" not in their, their
        output = [{"role": "assistant", "content": t} for t in case["texts"]]
        calls = [ToolCall(name=t["name"], error="failed" if t["failed"] else None)
                 for t in case["tools"]]
        steps = [{"name": t["name"], "type": "tool_call", **({"error": "x"} if t["failed"] else {})}
                 for t in case["tools"]]
        options = {k: v for k, v in case["ours"].items() if v is not None}
        for scope, kwargs in (("call", {"tool_calls": calls}), ("run", {"trajectory": steps})):
            scorer = create_scorer(name, {**options, "scope": scope})
            ours = scorer.run(input="q", output=output, **kwargs)
            step = ours.preprocess_step_result
            expected = {_snake(k): v for k, v in their["preprocess"].items()
                        if k != "pattern" and v is not None}
            assert (ours.score, {k: step[k] for k in expected}) == (their["score"], expected), \
                (case, their, scope)
        scores.add(their["score"])
    assert len(scores) >= 2  # the generated cases reach both outcomes
