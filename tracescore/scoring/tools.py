"""Tool-call accuracy (code): did the agent call the expected tool, or the expected tools in
order? No judge.

The tool calls are the call's recorded `tool_calls` (the trace's tool spans, or a dataset
item's list). Without those they are read from the output: OpenAI-style chat messages
(`tool_calls`), content parts of type `tool_use`/`tool-call`, a chat completion response, or a
dict with a `tool_calls` list (of names or of call dicts); when the output has none, a
`tool_calls` list in an input dict is used. The rules are the reference system's
`createToolCallAccuracyScorerCode`: no call scores 0; with `expected_tool_order`, strict mode
wants exactly that sequence and lenient mode wants each tool's first call after the previous
one's; with `expected_tool`, strict mode wants it as the only call, lenient mode among the calls.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

from tracescore._exceptions import ConfigurationError, ScorerError
from tracescore.scoring._base import STEP_PREPROCESS, ScoreResult, ToolCall, new_run_id
from tracescore.scoring._code import NO_JUDGE, CodeScorer
from tracescore.scoring._options import check_flag, merge_options

_CALL_PART_TYPES = {"tool_use", "tool-call", "tool_call", "function_call"}
_MAX_DEPTH = 8


def tool_call_names(value: Any, _depth: int = 0) -> list[str]:
    """Names of the tools called in an agent's output, in call order."""
    if _depth > _MAX_DEPTH or value is None or isinstance(value, (str, bytes, int, float)):
        return []
    dump = getattr(value, "model_dump", None)  # pydantic models (litellm responses, messages)
    if callable(dump):
        return tool_call_names(dump(), _depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tool_call_names(dataclasses.asdict(value), _depth + 1)
    if isinstance(value, Mapping):
        return _from_mapping(value, _depth)
    if isinstance(value, Sequence):
        return [name for item in value for name in tool_call_names(item, _depth + 1)]
    return []


def _from_mapping(value: Mapping[Any, Any], depth: int) -> list[str]:
    if "messages" in value:
        return tool_call_names(value["messages"], depth + 1)
    choices = value.get("choices")
    if isinstance(choices, Sequence) and choices and isinstance(choices[0], Mapping):
        return tool_call_names(choices[0].get("message"), depth + 1)
    if value.get("type") in _CALL_PART_TYPES:  # one content part
        name = _call_name(value)
        return [name] if name else []
    names: list[str] = []
    for key in ("tool_calls", "toolInvocations"):
        calls = value.get(key)
        if isinstance(calls, Sequence) and not isinstance(calls, str):
            names += [n for n in map(_call_name, calls) if n]
    content = value.get("content")
    if isinstance(content, Sequence) and not isinstance(content, str):
        names += [n for part in content if isinstance(part, Mapping)
                  and part.get("type") in _CALL_PART_TYPES for n in [_call_name(part)] if n]
    return names


def _call_name(call: Any) -> str | None:
    """A tool call's name: the call itself when a string, else its (function's) name."""
    if isinstance(call, str):
        return call
    if not isinstance(call, Mapping):
        call = getattr(call, "model_dump", dict)()
    function = call.get("function")
    if isinstance(function, Mapping) and isinstance(function.get("name"), str):
        return str(function["name"])
    for key in ("name", "toolName", "tool_name"):
        if isinstance(call.get(key), str):
            return str(call[key])
    return None


def called_tool_names(tool_calls: Sequence[ToolCall], input: Any, output: Any) -> list[str]:
    """The names of the tools the agent called, in call order: the recorded `tool_calls`, else
    those in the output, else a `tool_calls` list in an input dict."""
    names = [call.name for call in tool_calls] or tool_call_names(output)
    if not names and isinstance(input, Mapping) and "tool_calls" in input:
        names = tool_call_names({"tool_calls": input["tool_calls"]})
    return names


def order_matches(actual: Sequence[str], expected: Sequence[str], strict: bool) -> bool:
    """Strict: exactly `expected`. Lenient: each expected tool's first call comes after the
    previous one's (other calls may come between)."""
    if strict:
        return list(actual) == list(expected)
    try:
        firsts = [list(actual).index(name) for name in expected]
    except ValueError:
        return False
    return all(a < b for a, b in pairwise(firsts))


class ToolCallAccuracyScorer(CodeScorer):
    """1 when the output's tool calls meet the expectation, else 0."""

    id = "tool-call-accuracy"
    name = "Tool Call Accuracy"
    factory = "create_tool_call_accuracy_scorer"

    def __init__(self, *, expected_tool: str | None = None,
                 expected_tool_order: Sequence[str] | None = None,
                 strict_mode: bool = False, mastra_compat: bool = False) -> None:
        self.mastra_compat = check_flag("mastra_compat", mastra_compat)
        if expected_tool is not None and (not isinstance(expected_tool, str) or not expected_tool):
            raise ConfigurationError(f"expected_tool must be a tool name, got {expected_tool!r}")
        if expected_tool_order is not None:
            if isinstance(expected_tool_order, str) or not isinstance(expected_tool_order, Sequence) \
                    or not all(isinstance(n, str) and n for n in expected_tool_order):
                raise ConfigurationError(
                    f"expected_tool_order must be a list of tool names, got {expected_tool_order!r}")
            expected_tool_order = tuple(expected_tool_order)
        empty_order_alone = mastra_compat and expected_tool_order == ()  # Mastra scores it 0
        if not expected_tool and not expected_tool_order and not empty_order_alone:
            raise ConfigurationError("expected_tool or expected_tool_order is required")
        if not isinstance(strict_mode, bool):
            raise ConfigurationError(f"strict_mode must be True or False, got {strict_mode!r}")
        self.expected_tool = expected_tool
        self.expected_tool_order = expected_tool_order
        self.strict_mode = strict_mode

    def __repr__(self) -> str:
        return (f"ToolCallAccuracyScorer(expected_tool={self.expected_tool!r}, expected_tool_order="
                f"{self.expected_tool_order!r}, strict_mode={self.strict_mode!r})")

    def run(self, *, input: Any, output: Any, ground_truth: Any = None,
            run_id: str | None = None, tool_calls: Sequence[ToolCall] = (),
            context: Sequence[str] = ()) -> ScoreResult:
        """Score one output's tool calls (pure computation: no event loop involved)."""
        run_id = run_id or new_run_id()
        try:
            actual = called_tool_names(tool_calls, input, output)
        except Exception as exc:  # an odd output object is a preprocess failure
            raise ScorerError(f"cannot read tool calls from the output: {exc}", scorer_id=self.id,
                              step=STEP_PREPROCESS, partial={"run_id": run_id}) from exc
        tool, order, strict = self.expected_tool, self.expected_tool_order, self.strict_mode
        if tool is None:
            correct_tool = False
        else:
            correct_tool = actual == [tool] if strict else tool in actual
        correct_order = order_matches(actual, order, strict) if order is not None else None
        passed = bool(actual) and (correct_order if order else correct_tool)
        expectation = (f"the tools {', '.join(order)} in {'exactly this' if strict else 'this'} "
                       f"order" if order else f"the tool {tool}{' alone' if strict else ''}"
                       if tool else "an empty tool order (scored 0, as Mastra scores it)")
        called = ", ".join(actual) if actual else "no tool"
        return ScoreResult(
            run_id=run_id, scorer_id=self.id, scorer_name=self.name, score=1.0 if passed else 0.0,
            label="correct" if passed else "incorrect",
            reason=f"Expected {expectation}; the agent called {called}.",
            preprocess_step_result={
                "expected_tool": tool,
                "expected_tool_order": list(order) if order is not None else None,
                "actual_tools": actual, "strict_mode": strict, "has_tool_calls": bool(actual),
                "correct_tool_called": correct_tool, "correct_order_called": correct_order},
            usage=NO_JUDGE,
        )


def create_tool_call_accuracy_scorer(*, expected_tool: str | None = None,
                                     expected_tool_order: Sequence[str] | None = None,
                                     strict_mode: bool = False,
                                     options: Mapping[str, Any] | None = None,
                                     mastra_compat: bool = False
                                     ) -> ToolCallAccuracyScorer:
    """Factory named after the reference system's `createToolCallAccuracyScorerCode`.

    `options` may carry `expected_tool`/`expectedTool`, `expected_tool_order`/
    `expectedToolOrder` and `strict_mode`/`strictMode`.

    `mastra_compat=True` gives Mastra's number where tracescore decided otherwise: an empty
    `expected_tool_order` without `expected_tool` is accepted and scores 0 (instead of a
    ConfigurationError).
    """
    merged = merge_options(
        options,
        {"expected_tool": expected_tool, "expected_tool_order": expected_tool_order,
         "strict_mode": strict_mode},
        {"expectedTool": "expected_tool", "expectedToolOrder": "expected_tool_order",
         "strictMode": "strict_mode"},
    )
    return ToolCallAccuracyScorer(**merged, mastra_compat=mastra_compat)
