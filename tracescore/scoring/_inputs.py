"""Turn the inputs and outputs scorers receive (strings, chat messages, dicts) into plain text.

Accepted shapes: a string (numbers are turned into text); OpenAI-style chat messages whose
content is a string or a list of parts; a single message dict; a dict with `messages`,
`prompt`, `text`, `content` (or a few other common keys); a dict holding exactly one string
value; pydantic models and dataclasses of those shapes. `None` is empty text. The question
is the last user message, the answer the last assistant message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from tracescore._exceptions import InputError

__all__ = ["InputError", "answer_text", "earlier_turns", "question_text", "system_text"]

USER = "user"
ASSISTANT = "assistant"

_USER_KEYS = ("prompt", "question", "query", "input", "text", "content", "message")
_ASSISTANT_KEYS = ("text", "content", "answer", "output", "response", "completion", "message")
_TEXT_PART_TYPES = {"text", "input_text", "output_text"}
_MAX_DEPTH = 8


def question_text(value: Any) -> str:
    """The question in a scorer's input: the text itself or the last user message."""
    return _text(value, USER, "input", 0)


def answer_text(value: Any) -> str:
    """The answer in a scorer's output: the text itself or the last assistant message."""
    return _text(value, ASSISTANT, "output", 0)


def system_text(value: Any) -> str:
    """The system prompt in a scorer's input: the texts of its system (and developer) messages
    and of a dict's `system` string, joined by a blank line; "" when it has none."""
    parts = [value["system"]] if isinstance(value, Mapping) and isinstance(
        value.get("system"), str) else []
    for message in _messages(value):
        if message.get("role") in ("system", "developer"):
            parts.append(_content(message.get("content"), "input"))
    return "\n\n".join(p for p in parts if p.strip())


def earlier_turns(value: Any, limit: int) -> list[tuple[str, str]]:
    """The (role, text) user and assistant messages of an input before its last user message
    (the conversation so far), at most the last `limit`."""
    messages = _messages(value)
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == USER), default=0)
    turns = [(str(m["role"]), _content(m.get("content"), "input"))
             for m in messages[:last_user] if m.get("role") in (USER, ASSISTANT)]
    return turns[-limit:] if limit > 0 else []


def _messages(value: Any) -> list[Mapping[str, Any]]:
    """The chat messages of an input (a list of them or a dict's `messages`), else []."""
    messages = value.get("messages") if isinstance(value, Mapping) else value
    if isinstance(messages, Sequence) and not isinstance(messages, (str, bytes, bytearray)):
        return [m for m in messages if isinstance(m, Mapping) and "role" in m]
    return []


def _text(value: Any, role: str, what: str, depth: int) -> str:
    if depth > _MAX_DEPTH:
        raise InputError(f"{what} is nested too deeply to find its text")
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, Mapping):
        return _from_mapping(value, role, what, depth)
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return _from_sequence(value, role, what, depth)
    dump = getattr(value, "model_dump", None)  # pydantic models (litellm responses, messages)
    if callable(dump):
        return _text(dump(), role, what, depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _text(dataclasses.asdict(value), role, what, depth + 1)
    raise InputError(
        f"{what} of type {type(value).__name__} has no text; pass a string, chat messages "
        f"or a dict with 'messages', 'prompt', 'text' or 'content'"
    )


def _from_mapping(value: Mapping[Any, Any], role: str, what: str, depth: int) -> str:
    if "messages" in value:
        return _text(value["messages"], role, what, depth + 1)
    if "role" in value and "content" in value:  # a single chat message
        return _content(value["content"], what)
    choices = value.get("choices")
    if isinstance(choices, Sequence) and choices and isinstance(choices[0], Mapping):
        first = choices[0]  # a chat completion response
        if "message" in first:
            return _text(first["message"], role, what, depth + 1)
    for key in _USER_KEYS if role == USER else _ASSISTANT_KEYS:
        if key in value:
            return _text(value[key], role, what, depth + 1)
    strings = [v for v in value.values() if isinstance(v, str)]
    if len(strings) == 1:
        return strings[0]
    keys = ", ".join(repr(k) for k in list(value)[:10])
    raise InputError(
        f"cannot tell which value of the {what} dict is the text (keys: {keys}); use a key "
        f"'messages', 'prompt', 'text' or 'content', or a dict with a single string value"
    )


def _from_sequence(value: Sequence[Any], role: str, what: str, depth: int) -> str:
    if not value:
        return ""
    if all(isinstance(m, Mapping) and "role" in m for m in value):
        for message in reversed(value):
            if message.get("role") == role:
                return _content(message.get("content"), what)
        roles = sorted({str(m.get("role")) for m in value})
        raise InputError(
            f"{what} has {len(value)} chat messages but none with role {role!r} "
            f"(roles: {', '.join(roles)})"
        )
    if all(isinstance(p, str) or (isinstance(p, Mapping) and "type" in p) for p in value):
        return _content(value, what)  # a list of content parts (or of strings)
    raise InputError(
        f"{what} is a list that is neither chat messages (dicts with 'role') nor text parts"
    )


def _content(content: Any, what: str) -> str:
    """Text of a message's content: a string, or the text parts of a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, (bytes, bytearray)):
        texts: list[str] = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and part.get("type") in _TEXT_PART_TYPES:
                text = part.get("text")
                if isinstance(text, str):
                    texts.append(text)
        return "\n".join(texts)
    raise InputError(f"{what} message content of type {type(content).__name__} has no text")
