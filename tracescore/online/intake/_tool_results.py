"""A tool's output text from its recorded result: the context a tool call gives scorers (and a
failed call's error text, where its framework records the failure as the result).

A framework records a tool's result inside its own result object (LlamaIndex's ToolOutput with
the call's input and metadata beside the output, LangChain's ToolMessage, ...): judged whole,
the context would repeat the arguments and carry metadata. These objects are recognised by
their keys (data below) in any encoding `_unwrap` decodes, and reduced to their output.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tracescore.online.intake._unwrap import _MAX_DEPTH, _content_text, _decoded

# a tool result object: its output fields (the first present is the output), the metadata
# beside them, and what marks it as one (a key, or its type)
_RESULT_FIELDS = ("content", "raw_output", "result", "output", "text", "blocks", "response")
_RESULT_MARKS = frozenset({"tool_name", "raw_input", "tool_call_id", "call_id", "is_error",
                           "isError", "origin", "artifact", "result_as_answer",
                           "structuredContent"})
_RESULT_KEYS = frozenset(_RESULT_FIELDS) | _RESULT_MARKS | {
    "name", "type", "id", "status", "error", "meta", "metadata", "additional_kwargs",
    "response_metadata", "tool_call", "is_error", "exception"}
_CALLBACK_KEYS = frozenset({"output", "kwargs", "tags", "metadata", "run_id", "parent_run_id"})
_RESULT_TYPES = frozenset({"tool", "toolmessage", "tooloutput", "calltoolresult",
                           "functionexecutionresult", "toolcallresult", "toolresult"})



def tool_result(value: object) -> str | None:
    """A tool's output text from its recorded result: a JSON-encoded string decoded, a
    framework's result object (LlamaIndex's ToolOutput, LangChain's ToolMessage, an MCP
    CallToolResult, AutoGen's FunctionExecutionResult, Haystack's ToolCallResult, CrewAI's
    ToolResult; as JSON, a dict or a repr; LangChain's in `message_to_dict` form and in
    OpenLLMetry's `{"output": ..., "kwargs": ...}` callback envelope) reduced to its output (`content`, `raw_output`,
    `result`, text blocks), without the repeated input and metadata beside it. None when the
    result is neither (a tool's own structured value: judged as recorded)."""
    try:
        return _tool_result(value, 0)
    except (RecursionError, ValueError, TypeError):
        return None


def _tool_result(value: object, depth: int) -> str | None:
    value = _decoded(value, depth)
    if isinstance(value, str):
        return value
    if not isinstance(value, Mapping) or depth >= _MAX_DEPTH:
        return None
    if "output" in value and set(value) <= _CALLBACK_KEYS:  # OpenLLMetry's LangChain envelope
        return _tool_result(value["output"], depth + 1)
    fields: Mapping[Any, Any] = value
    if value.get("lc") is not None and isinstance(value.get("kwargs"), Mapping):
        fields = value["kwargs"]  # LangChain's serialised object: its fields
    elif set(value) == {"type", "data"} and isinstance(value["data"], Mapping):
        fields = value["data"]  # LangChain's `message_to_dict` (OpenInference)
    keys = set(fields) - {"__type__"}
    if not keys <= _RESULT_KEYS or not (keys & _RESULT_MARKS or str(
            fields.get("type", fields.get("__type__", ""))).lower() in _RESULT_TYPES):
        return None
    for field_name in _RESULT_FIELDS:
        inner = fields.get(field_name)
        if inner is None or inner == "" or inner == []:
            continue
        text = _content_text(inner, depth + 1) if isinstance(inner, list) else None
        if text is None:
            text = _tool_result(inner, depth + 1)
        if text is None:
            text = json.dumps(_decoded(inner, depth + 1), ensure_ascii=False, default=str)
        return text
    return None


def tool_error(value: object) -> str:
    """A failed tool call's error text from its recorded result (a framework that records the
    failure as the result, as Haystack's `{"error": "..."}`): its `error` or `message` text,
    else its output text, else the result as recorded."""
    try:
        decoded = _decoded(value, 0)
        if isinstance(decoded, Mapping):
            for key in ("error", "message"):
                inner = decoded.get(key)
                if isinstance(inner, str) and inner:
                    return inner
        text = tool_result(value)
        if text:
            return text
        if decoded is None or decoded == "":
            return "failed"
        return decoded if isinstance(decoded, str) else json.dumps(
            decoded, ensure_ascii=False, default=str)
    except (RecursionError, ValueError, TypeError):
        return str(value)
