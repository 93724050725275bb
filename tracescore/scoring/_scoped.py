"""What run and conversation scorers share: `run()` with the run, its expected trajectory and
a conversation's turns, and the run and the turns as a judge reads them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tracescore.scoring._base import Scorer, ScoreResult, ScorerInput, ToolCall, run_sync
from tracescore.scoring._inputs import InputError, answer_text, question_text
from tracescore.scoring._runs import (
    Expectation,
    ExpectedStep,
    Run,
    Step,
    Turn,
    as_expectation,
    as_run,
    as_turns,
)

SCOPES = ("call", "run", "conversation")


class ScopedScorer(Scorer):
    """A run or conversation scorer: `run()` also takes the run, its expected trajectory and a
    conversation's turns (lists of names or objects, as in a dataset, or their objects)."""

    def run(self, *, input: Any = None, output: Any = None, ground_truth: Any = None,
            run_id: str | None = None, tool_calls: Sequence[ToolCall] = (),
            context: Sequence[str] = (), trajectory: Run | Sequence[Any] | None = None,
            expected_trajectory: Any = None, turns: Sequence[Any] = ()) -> ScoreResult:
        """Score one call, run or conversation, blocking; safe inside a running event loop."""
        return run_sync(self.evaluate(ScorerInput(
            input=input, output=output, ground_truth=ground_truth, run_id=run_id,
            tool_calls=tuple(tool_calls), context=tuple(context),
            run=None if trajectory is None else as_run(trajectory, "trajectory"),
            expected_trajectory=None if expected_trajectory is None
            else as_expectation(expected_trajectory, "expected_trajectory"),
            turns=as_turns(turns, "turns") if turns else ())))


def text_of(value: Any, read: Any = answer_text) -> str:
    """A message-like value's text ("" when it has none)."""
    if value is None:
        return ""
    try:
        text: str = read(value)
    except InputError:
        return value if isinstance(value, str) else json.dumps(value, default=str)
    return text


def conversation_turns(call: ScorerInput) -> tuple[Turn, ...]:
    """The call's turns; without them, one turn of its input and output."""
    if call.turns:
        return call.turns
    return (Turn(input=call.input, output=call.output),)


def history_messages(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """Turns as chat messages: each turn's user message, then its answer."""
    messages: list[dict[str, Any]] = []
    for turn in turns:
        messages.append({"role": "user", "content": text_of(turn.input, question_text)})
        messages.append({"role": "assistant", "content": text_of(turn.output)})
    return messages


def turns_json(turns: Sequence[Turn]) -> list[dict[str, str]]:
    """The turns as a judge reads them: user message and agent answer, in order."""
    return [{"user": text_of(t.input, question_text), "agent": text_of(t.output)} for t in turns]


def step_json(step: Step) -> dict[str, Any]:
    """A run step as a judge reads it (no empty fields)."""
    from tracescore._content import to_json_safe

    shown: dict[str, Any] = {"type": step.type, "name": step.name}
    for key in ("arguments", "result", "error", "start_ms", "duration_ms", "model"):
        value = getattr(step, key)
        if value is not None:
            shown[key] = to_json_safe(value)
    if step.children:
        shown["steps"] = [step_json(c) for c in step.children]
    return shown


def expected_json(steps: Sequence[ExpectedStep]) -> list[Any]:
    """Expected steps as a judge reads them."""
    shown: list[Any] = []
    for step in steps:
        item: dict[str, Any] = {"name": step.name}
        if step.type is not None:
            item["type"] = step.type
        if step.has_arguments:
            item["arguments"] = step.arguments
        if step.children is not None and step.children.steps:
            item["steps"] = expected_json(step.children.steps)
        shown.append(item)
    return shown


def expected_steps(static: Expectation | None, item: Expectation | None
                   ) -> tuple[ExpectedStep, ...] | None:
    """The scorer's own expected steps, else the item's (None: neither, or the item's empty)."""
    if static is not None and static.steps is not None:
        return static.steps
    if item is not None and item.steps:
        return item.steps
    return None
