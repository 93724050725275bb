"""GenAI semconv message shape for captured agent/LLM inputs and outputs.

`gen_ai.input.messages` / `gen_ai.output.messages` hold JSON lists of
``{"role", "parts": [{"type": "text", "content": ...}, ...]}`` (output messages also carry a
``finish_reason``). Plain strings, OpenAI-style chat messages and chat-completion responses
(objects or dicts) are mapped to that shape; anything else becomes one text part.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tracescore._config import ContentSettings
from tracescore._content import JSONText, finish_text, json_string, serialize

_TEXT_KEYS = ("text", "content", "prompt", "input", "query", "question", "message")


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    try:
        return getattr(obj, key, None)
    except Exception:  # noqa: BLE001 - a property that raises counts as absent
        return None


def _is_message(obj: Any) -> bool:
    return isinstance(_get(obj, "role"), str)


def _text_part(content: Any) -> dict[str, Any]:
    # a non-string becomes its JSON text, redacted by structure when the message is serialized
    return {"type": "text", "content": content if isinstance(content, str) else JSONText(content)}


def _content_parts(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if isinstance(content, (list, tuple)):
        parts: list[dict[str, Any]] = []
        for part in content:
            kind = _get(part, "type")
            if isinstance(part, str):
                parts.append({"type": "text", "content": part})
            elif kind == "text":
                parts.append(
                    {"type": "text", "content": _get(part, "text") or _get(part, "content")}
                )
            elif isinstance(part, Mapping):
                parts.append(dict(part))
            else:
                parts.append(_text_part(part))
        return parts
    return [_text_part(content)]


def _tool_call_part(call: Any) -> dict[str, Any]:
    function = _get(call, "function")
    return {
        "type": "tool_call",
        "id": _get(call, "id"),
        "name": _get(function, "name") if function is not None else _get(call, "name"),
        "arguments": _get(function, "arguments")
        if function is not None
        else _get(call, "arguments"),
    }


def to_message(message: Any) -> dict[str, Any]:
    """One OpenAI-style chat message (dict or object) in semconv shape."""
    role = _get(message, "role")
    existing = _get(message, "parts")
    if isinstance(existing, list):
        return {"role": role, "parts": existing}
    content = _get(message, "content")
    if role == "tool":
        parts: list[dict[str, Any]] = [
            {"type": "tool_call_response", "id": _get(message, "tool_call_id"), "response": content}
        ]
    else:
        parts = _content_parts(content)
    for call in _get(message, "tool_calls") or ():
        parts.append(_tool_call_part(call))
    out: dict[str, Any] = {"role": role, "parts": parts}
    name = _get(message, "name")
    if isinstance(name, str):
        out["name"] = name
    return out


def _user_text(value: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "parts": [_text_part(value)]}]


def to_input_messages(value: Any) -> list[dict[str, Any]]:
    """Input messages for a call input: a string, chat messages, or any object."""
    if isinstance(value, str):
        return [{"role": "user", "parts": [{"type": "text", "content": value}]}]
    if isinstance(value, Mapping):
        messages = value.get("messages")
        if isinstance(messages, (list, tuple)):
            return to_input_messages(messages)
        if _is_message(value):
            return [to_message(value)]
        texts = [v for v in value.values() if isinstance(v, str)]
        if len(value) == 1 and texts:
            return _user_text(texts[0])
        return _user_text(value)
    if isinstance(value, (list, tuple)) and value and all(_is_message(m) for m in value):
        return [to_message(m) for m in value]
    if _is_message(value):
        return [to_message(value)]
    return _user_text(value)


def _finish_reason(choice: Any) -> str:
    reason = _get(choice, "finish_reason")
    return reason if isinstance(reason, str) and reason else "stop"


def to_output_messages(value: Any) -> list[dict[str, Any]]:
    """Output messages for a call result: a string, a chat-completion response, messages, …"""
    if isinstance(value, str):
        return [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": value}],
                "finish_reason": "stop",
            }
        ]
    choices = _get(value, "choices") if not isinstance(value, (list, tuple)) else None
    if isinstance(choices, (list, tuple)) and choices:
        out = []
        for choice in choices:
            message = _get(choice, "message") or _get(choice, "delta")
            shaped = (
                to_message(message) if message is not None else {"role": "assistant", "parts": []}
            )
            shaped["role"] = shaped.get("role") or "assistant"
            shaped["finish_reason"] = _finish_reason(choice)
            out.append(shaped)
        return out
    if _is_message(value):
        return [{**to_message(value), "finish_reason": "stop"}]
    if isinstance(value, (list, tuple)) and value and all(_is_message(m) for m in value):
        return [{**to_message(m), "finish_reason": "stop"} for m in value]
    return [{"role": "assistant", "parts": [_text_part(value)], "finish_reason": "stop"}]


_USER_PREFIX = '[{"role":"user","parts":[{"type":"text","content":'
_USER_SUFFIX = "}]}]"
_ASSISTANT_PREFIX = '[{"role":"assistant","parts":[{"type":"text","content":'
_ASSISTANT_SUFFIX = '}],"finish_reason":"stop"}]'


def _messages_attr(value: Any, settings: ContentSettings, prefix: str, suffix: str,
                   convert: Callable[[Any], Any]) -> str:
    """Messages attribute text: a string becomes one text message (fast path, pre-rendered JSON
    around it); anything else goes through `convert`, falling back to the raw value. Never raises."""
    if type(value) is str:  # fast path: the common single-question / single-answer case
        literal, cut = json_string(value, settings)
        return finish_text(prefix + literal + suffix, settings, at_least=cut, redacted=True)
    try:
        return serialize(convert(value), settings)
    except Exception:  # noqa: BLE001 - fall back to the raw value
        return serialize(value, settings)


def input_messages_attr(value: Any, settings: ContentSettings) -> str:
    """`gen_ai.input.messages` attribute text for `value` (redacted, truncated). Never raises."""
    return _messages_attr(value, settings, _USER_PREFIX, _USER_SUFFIX, to_input_messages)


def output_messages_attr(value: Any, settings: ContentSettings) -> str:
    """`gen_ai.output.messages` attribute text for `value` (redacted, truncated). Never raises."""
    return _messages_attr(value, settings, _ASSISTANT_PREFIX, _ASSISTANT_SUFFIX, to_output_messages)
