"""Tool calls and context given as data (dataset items), checked and turned into what scorers get.

    tool_calls: ["search", {"name": "refund", "arguments": {"order": 7}, "error": "denied"}]
    context:    ["Refunds take 5 days."]
    trajectory: ["search", {"name": "refund", "arguments": {"order": 7}}]   (the run's steps)
    expected_trajectory: ["search", "refund"]   (or {"steps": [...], "ordering": "strict"})
    turns:      ["Plan a trip to Paris.", "And the weather?"]   (a multi-turn item)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore.scoring._base import ToolCall
from tracescore.scoring._runs import Expectation, Run, Turn, as_expectation, as_run, as_turns

TOOL_CALLS_KEY = "tool_calls"
CONTEXT_KEY = "context"
_CALL_KEYS = ("name", "arguments", "result", "error", "call_id")


def item_trace(item: Mapping[str, Any], where: str) -> tuple[tuple[ToolCall, ...], tuple[str, ...]]:
    """The `tool_calls` and `context` of a dataset item (empty when absent).

    `where` names the item in errors (e.g. "item 3"); a bad value raises ConfigurationError
    naming the item and the key.
    """
    return (as_tool_calls(item.get(TOOL_CALLS_KEY), where),
            as_context(item.get(CONTEXT_KEY), where))


def as_tool_calls(value: object, where: str) -> tuple[ToolCall, ...]:
    """Tool calls from a list of names or of dicts with name/arguments/result/error/call_id."""
    if value is None:
        return ()
    key = f"{where}: {TOOL_CALLS_KEY!r}"
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
        raise ConfigurationError(
            f"{key} must be a list of tool names or of objects with a 'name', "
            f"got {type(value).__name__}")
    calls = []
    for index, call in enumerate(value):
        if isinstance(call, ToolCall):
            calls.append(call)
            continue
        if isinstance(call, str) and call:
            calls.append(ToolCall(name=call))
            continue
        if not isinstance(call, Mapping):
            raise ConfigurationError(f"{key}[{index}] must be a tool name or an object with a "
                                     f"'name', got {type(call).__name__}")
        unknown = sorted(str(k) for k in call if k not in _CALL_KEYS)
        if unknown:
            raise ConfigurationError(f"{key}[{index}] has unknown keys {unknown} "
                                     f"(known: {', '.join(_CALL_KEYS)})")
        name = call.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"{key}[{index}] needs a non-empty 'name' string")
        for text_key in ("error", "call_id"):
            if call.get(text_key) is not None and not isinstance(call[text_key], str):
                raise ConfigurationError(f"{key}[{index}] {text_key!r} must be a string or null, "
                                         f"got {type(call[text_key]).__name__}")
        calls.append(ToolCall(name=name, arguments=call.get("arguments"),
                              result=call.get("result"), error=call.get("error"),
                              call_id=call.get("call_id")))
    return tuple(calls)


def as_context(value: object, where: str) -> tuple[str, ...]:
    """Context texts from a list of strings."""
    if value is None:
        return ()
    key = f"{where}: {CONTEXT_KEY!r}"
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ConfigurationError(f"{key} must be a list of texts, got {type(value).__name__}")
    for index, text in enumerate(value):
        if not isinstance(text, str):
            raise ConfigurationError(f"{key}[{index}] must be a text, got {type(text).__name__}")
    return tuple(value)


# --- runs and conversations given as data ----------------------------------------------------
TURNS_KEY = "turns"
TRAJECTORY_KEY = "trajectory"
EXPECTED_TRAJECTORY_KEY = "expected_trajectory"


def item_scope(item: Mapping[str, Any], where: str
               ) -> tuple[Run | None, Expectation | None, tuple[Turn, ...]]:
    """An item's `trajectory` (the run's steps), `expected_trajectory` and `turns` (None or
    empty when absent). A bad value raises ConfigurationError naming the item and the key."""
    run, expected, turns = (item.get(k) for k in (TRAJECTORY_KEY, EXPECTED_TRAJECTORY_KEY,
                                                  TURNS_KEY))
    return (None if run is None else as_run(run, f"{where}: {TRAJECTORY_KEY!r}"),
            None if expected is None else as_expectation(
                expected, f"{where}: {EXPECTED_TRAJECTORY_KEY!r}"),
            () if turns is None else as_turns(turns, f"{where}: {TURNS_KEY!r}"))
