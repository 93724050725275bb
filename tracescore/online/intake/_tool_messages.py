"""A tool call's arguments and result read from the model calls' messages, by its call id.

Some frameworks write a tool span that names the tool and its call id but records neither the
arguments nor the result (AutoGen's `execute_tool` spans: `gen_ai.tool.name`,
`gen_ai.tool.call.id`, nothing else), while the model calls around it record both in their
messages: the model's tool call (id, name, arguments) in one call's output, the tool's return
(the same id) in the next call's input. The general rule: a tool call without arguments and
result takes them from the messages of the LLM calls in the same agent call that carry its id.

Shapes read: GenAI semconv parts (`{"type": "tool_call", "id", "name", "arguments"}`,
`{"type": "tool_call_response", "id", "response"}`) and OpenAI chat messages (an assistant's
`tool_calls: [{"id", "function": {"name", "arguments"}}]`, `{"role": "tool", "tool_call_id",
"content"}`), as recorded under `gen_ai.input.messages` / `gen_ai.output.messages` (or logfire's
`input` / `output`). Only recorded values that hold one of the ids are decoded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from tracescore import _semconv as sc
from tracescore.online.intake._llm_calls import LlmCall
from tracescore.online.intake._messages import decoded, text_of

_MESSAGE_KEYS = (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES, sc.LOGFIRE_INPUT,
                 sc.LOGFIRE_OUTPUT)
_CALL_TYPES = frozenset({"tool_call", "function_call", "tool-call", "tool_use"})
_RETURN_TYPES = frozenset({"tool_call_response", "tool_result", "tool-result",
                           "function_call_output"})


def tool_content(calls: Iterable[LlmCall], ids: Iterable[str]) -> dict[str, dict[str, str]]:
    """Per call id among `ids`: the recorded arguments (`gen_ai.tool.call.arguments`, JSON) and
    result (`gen_ai.tool.call.result`) the messages of `calls` give it; ids found nowhere are
    absent. Never raises on odd values."""
    wanted = {i for i in ids if i}
    found: dict[str, dict[str, str]] = {}
    if not wanted:
        return found
    for call in sorted(calls, key=lambda c: c.start_ns):
        for key in _MESSAGE_KEYS:
            raw = call.attributes.get(key)
            if raw is None or (isinstance(raw, str) and not any(i in raw for i in wanted)):
                continue
            value = decoded(raw)
            if isinstance(value, list):
                for message in value:
                    if isinstance(message, Mapping):
                        _read(message, wanted, found)
    return found


def _read(message: Mapping[str, Any], wanted: set[str],
          found: dict[str, dict[str, str]]) -> None:
    parts = message.get("parts")
    for part in parts if isinstance(parts, list) else ():
        if not isinstance(part, Mapping) or part.get("id") not in wanted:
            continue
        kind = str(part.get("type", ""))
        if kind in _CALL_TYPES and "arguments" in part:
            _put(found, part["id"], sc.GEN_AI_TOOL_CALL_ARGUMENTS, part["arguments"])
        elif kind in _RETURN_TYPES and part.get("response") is not None:
            _put(found, part["id"], sc.GEN_AI_TOOL_CALL_RESULT, part["response"])
    for tool_call in message.get("tool_calls") or ():
        function = tool_call.get("function") if isinstance(tool_call, Mapping) else None
        if isinstance(function, Mapping) and tool_call.get("id") in wanted:
            _put(found, tool_call["id"], sc.GEN_AI_TOOL_CALL_ARGUMENTS,
                 function.get("arguments"))
    call_id = message.get("tool_call_id")
    if message.get("role") == "tool" and call_id in wanted:
        _put(found, call_id, sc.GEN_AI_TOOL_CALL_RESULT, text_of(message))


def _put(found: dict[str, dict[str, str]], call_id: str, key: str, value: object) -> None:
    if value is None or value == "":
        return
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=str)
    found.setdefault(call_id, {}).setdefault(key, text)
