"""Datasets give tool calls and context per item: `run_evals` items and `tracescore eval` files
(JSON Lines, JSON, CSV) hand them to scorers that take them; bad values are refused before
anything runs, naming the item (or line) and the key."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracescore
from tracescore import ConfigurationError, Scorer, ScoreResult, ToolCall

SCRIPT = Path(sys.executable).parent / "tracescore"


class Seen(Scorer):
    id = name = "seen"
    uses_judge = False

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None, tool_calls: Any = (), context: Any = ()
                   ) -> ScoreResult:
        return ScoreResult(run_id=run_id or "r", scorer_id=self.id, scorer_name=self.name,
                           score=float(len(tool_calls)),
                           preprocess_step_result={"tool_calls": list(tool_calls),
                                                   "context": list(context)})


class Legacy(Scorer):
    id = name = "legacy"
    uses_judge = False

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None) -> ScoreResult:
        return ScoreResult(run_id=run_id or "r", scorer_id=self.id, scorer_name=self.name,
                           score=1.0)


def test_run_evals_hands_each_items_tool_calls_and_context_to_scorers_that_take_them() -> None:
    data: list[dict[str, Any]] = [
        {"input": "Refund order 7", "topic": "refunds",
         "tool_calls": ["lookup_order", {"name": "refund", "arguments": {"order": 7},
                                         "error": "denied", "call_id": "c2"}],
         "context": ["Refunds above 100 EUR need a manager."]},
        {"input": "Hello"},
    ]
    result = tracescore.run_evals(data, [Seen(), Legacy()], target=lambda q: "ok")
    first, second = result.items
    seen = first.scores["seen"].preprocess_step_result
    assert seen == {"tool_calls": [ToolCall(name="lookup_order"),
                                   ToolCall(name="refund", arguments={"order": 7},
                                            error="denied", call_id="c2")],
                    "context": ["Refunds above 100 EUR need a manager."]}
    assert first.metadata == {"topic": "refunds"}
    assert second.scores["seen"].preprocess_step_result == {"tool_calls": [], "context": []}
    assert first.scores["legacy"].score == second.scores["legacy"].score == 1.0


BAD_TOOL_CALLS = st.one_of(
    st.text(max_size=5), st.integers(), st.dictionaries(st.text(max_size=3), st.integers()),
    st.lists(st.one_of(st.integers(), st.just(""), st.just({}), st.just({"name": 3}),
                       st.just({"name": "x", "unknown": 1}), st.just({"name": "x", "error": 5})),
             min_size=1, max_size=3),
)
BAD_CONTEXT = st.one_of(st.text(max_size=5), st.integers(), st.just({"a": "b"}),
                        st.lists(st.one_of(st.integers(), st.none()), min_size=1, max_size=3))


@settings(max_examples=60, deadline=None)
@given(index=st.integers(0, 3), key=st.sampled_from(["tool_calls", "context"]), data=st.data())
def test_a_bad_value_is_refused_before_anything_runs_naming_item_and_key(
        index: int, key: str, data: st.DataObject) -> None:
    bad = data.draw(BAD_TOOL_CALLS if key == "tool_calls" else BAD_CONTEXT)
    items: list[dict[str, Any]] = [{"input": f"q{i}"} for i in range(4)]
    items[index][key] = bad
    called: list[Any] = []
    with pytest.raises(ConfigurationError) as raised:
        tracescore.run_evals(items, [Seen()], target=called.append)
    assert f"item {index}: '{key}'" in str(raised.value)
    assert called == []


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACESCORE_"))}
    env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_COLOR": "1",
                "OTEL_TRACES_EXPORTER": "none", "COLUMNS": "200"})
    return subprocess.run([str(SCRIPT), *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=120, check=False)


ROWS = [
    {"input": "Refund order 7", "tool_calls": ["lookup_order", "refund"]},
    {"input": "Refund order 8", "tool_calls": [{"name": "refund"}]},
]


@pytest.mark.parametrize("dataset", ["items.jsonl", "items.json", "items.csv"])
def test_eval_command_reads_tool_calls_from_every_format(tmp_path: Path, dataset: str) -> None:
    (tmp_path / "agent.py").write_text("def answer(question):\n    return 'Done.'\n")
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (tmp_path / "items.json").write_text(json.dumps(ROWS))
    with (tmp_path / "items.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["input", "tool_calls", "context"])
        writer.writeheader()
        writer.writerows({"input": r["input"], "tool_calls": json.dumps(r["tool_calls"]),
                          "context": ""} for r in ROWS)
    result = run("eval", dataset, "-t", "agent:answer", "-s", "tool-call-accuracy",
                 "--scorer-option", "tool-call-accuracy.expected_tool_order=[lookup_order, refund]",
                 "--output", "out.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    items = json.loads((tmp_path / "out.json").read_text())["items"]
    assert [i["scores"]["tool-call-accuracy"]["score"] for i in items] == [1.0, 0.0]


@pytest.mark.parametrize("name, text, message", [
    ("bad.jsonl", '{"input": "q"}\n{"input": "q", "context": "one text"}\n',
     "bad.jsonl, line 2: 'context' must be a list of texts"),
    ("bad.json", json.dumps([{"input": "q", "tool_calls": [{"arguments": {}}]}]),
     "bad.json, item 0: 'tool_calls'[0] needs a non-empty 'name' string"),
    ("bad.csv", "input,tool_calls\nq,[search\n", "bad.csv, line 2: 'tool_calls' must be a JSON array"),
])
def test_eval_command_refuses_a_bad_dataset_naming_line_and_key(tmp_path: Path, name: str,
                                                                text: str, message: str) -> None:
    (tmp_path / "agent.py").write_text("def answer(question):\n    return 'Done.'\n")
    (tmp_path / name).write_text(text)
    result = run("eval", name, "-t", "agent:answer", "-s", "similarity", cwd=tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr and "Traceback" not in result.stderr
