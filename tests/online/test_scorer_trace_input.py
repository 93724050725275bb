"""A scorer's trace input: the call's tool calls and retrieved context reach scorers that take
them, and scorers written before they existed keep working."""

from __future__ import annotations

import asyncio
from typing import Any

from tracescore import Scorer, ScoreResult, ToolCall, create_tool_call_accuracy_scorer
from tracescore.scoring._base import trace_kwargs

CALLS = (ToolCall(name="search", arguments={"q": "refund"}, result="policy text"),
         ToolCall(name="refund", arguments={"order": 7}, error="denied"))


class _Legacy(Scorer):
    """A user scorer written against the input/output-only contract."""

    id = name = "legacy"
    uses_judge = False

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None) -> ScoreResult:
        return ScoreResult(run_id=run_id or "r", scorer_id=self.id, scorer_name=self.name,
                           score=float(len(str(output))))


class _Seeing(_Legacy):
    id = name = "seeing"

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None, tool_calls: Any = (), context: Any = ()) -> ScoreResult:
        return ScoreResult(run_id=run_id or "r", scorer_id=self.id, scorer_name=self.name,
                           score=float(len(tool_calls) * 10 + len(context)),
                           preprocess_step_result={"tools": [c.name for c in tool_calls],
                                                   "context": list(context)})


class _Catchall(_Legacy):
    id = name = "catchall"

    async def arun(self, **kwargs: Any) -> ScoreResult:
        return ScoreResult(run_id="r", scorer_id=self.id, scorer_name=self.name, score=0.0,
                           preprocess_step_result=sorted(kwargs))


def test_a_scorer_that_names_the_trace_keywords_gets_them() -> None:
    result = _Seeing().run(input="q", output="a", tool_calls=CALLS, context=["doc one"])
    assert result.score == 21.0
    assert result.preprocess_step_result == {"tools": ["search", "refund"], "context": ["doc one"]}


def test_a_scorer_written_before_the_trace_keywords_still_runs() -> None:
    assert trace_kwargs(_Legacy(), CALLS, ["c"]) == {}
    assert _Legacy().run(input="q", output="abc", tool_calls=CALLS, context=["c"]).score == 3.0


def test_keyword_catchall_gets_both() -> None:
    assert trace_kwargs(_Catchall(), CALLS, ["c"]) == {"tool_calls": CALLS, "context": ("c",)}
    result = asyncio.run(_Catchall().arun(input="q", output="a", **trace_kwargs(_Catchall(), CALLS, [])))
    assert result.preprocess_step_result == ["context", "input", "output", "tool_calls"]


def test_tool_call_accuracy_reads_the_recorded_calls_first() -> None:
    scorer = create_tool_call_accuracy_scorer(expected_tool_order=["search", "refund"], strict_mode=True)
    assert scorer.run(input="q", output="Your refund was denied.", tool_calls=CALLS).score == 1.0
    assert scorer.run(input="q", output="Your refund was denied.").score == 0.0
