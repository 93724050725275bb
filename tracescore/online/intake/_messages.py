"""One reader for the conversations every convention records, and the general rules on them.

Shapes read: GenAI semconv messages (`role` + `parts` of `type` text / tool_call /
tool_call_response / reasoning...), OpenAI chat messages (`content` a string or a list of parts,
`tool_calls`, `role: tool`), pydantic-ai's (GenAI-like parts, tool returns in `role: user`
messages), Gemini's (`role: model`, `parts` of text / function_call / function_response, a
request's `contents` and system instruction, a response's `content`), Bedrock-style content
blocks (`text`, `toolUse`, `toolResult`), LangChain's (`{"type": "human" | "ai" | "system" |
"tool", "content"}`, also as `messages_to_dict` writes them, `{"type", "data": {...}}`, and
serialized, `{"lc": 1, "type": "constructor", "id": [..., "HumanMessage"], "kwargs": {...}}`),
and OpenInference's flattened `llm.input_messages.N.message.*` attributes.

The rules: a message's text is its text parts only (never a tool call, a tool return or
reasoning); a message holding only tool returns is a `tool` message; the question is the last
*user text* of the conversation and the conversation handed to scorers ends with it (the system
prompt and earlier turns kept before it); the answer is the last message with text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

Message = dict[str, str]  # {"role": ..., "content": ...}: what the scorers read

USER = "user"
ASSISTANT = "assistant"
TOOL = "tool"
_TEXT_TYPES = frozenset({"text", "input_text", "output_text"})
_TOOL_RETURN_TYPES = frozenset({"tool_call_response", "tool_result", "tool-result", "tool_return",
                                "function_call_output"})
# keys of a tool return part without a `type` (Gemini's function_response, Bedrock-style toolResult)
_TOOL_RETURN_KEYS = frozenset({"function_response", "functionResponse", "toolResult"})
_ROLE_ALIASES = {"human": USER, "ai": ASSISTANT, "model": ASSISTANT, "function": TOOL,
                 "developer": "system"}
# OpenInference flattened message attributes
_OI_ROLE = "message.role"
_OI_CONTENT = "message.content"
_OI_CONTENTS = "message.contents."
_OI_PART_TEXT = "message_content.text"
_OI_PART_TYPE = "message_content.type"
_OI_TOOL_CALL_ID = "message.tool_call_id"


def decoded(raw: object, starts: str = "[{") -> object:
    """JSON text decoded (anything else, or text that is not JSON, as it is): arrays and
    objects; string literals too when `starts` has '"'."""
    if isinstance(raw, str) and raw[:1] and raw[0] in starts:
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def is_message_list(value: object) -> bool:
    """A non-empty list of dicts that each name a `role`."""
    return (isinstance(value, list) and bool(value) and all(
        isinstance(m, Mapping) and isinstance(m.get("role"), str) for m in value))


def holds_messages(value: object) -> bool:
    """A message list, or a recorded request, response or state holding one (`message_list`)."""
    return message_list(value) is not None


def text_of(message: object) -> str:
    """The text of one message (any shape above), without tool calls, tool returns or reasoning."""
    if isinstance(message, str):
        return message
    if not isinstance(message, Mapping):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = message.get("parts", content)
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, Sequence):
        return ""
    texts = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif (isinstance(part, Mapping) and part.get("type", "text") in _TEXT_TYPES
              and part.get("thought") is not True):  # Gemini marks reasoning parts `thought`
            text = part.get("content", part.get("text"))
            if isinstance(text, str):
                texts.append(text)
    return "".join(texts)


def role_of(message: Mapping[str, Any]) -> str:
    """The message's role, `tool` for one that carries only tool returns."""
    role = message.get("role")
    role = _ROLE_ALIASES.get(role, role) if isinstance(role, str) else USER
    if role != TOOL and message.get("tool_call_id") is None:
        parts = message.get("parts", message.get("content"))
        if (isinstance(parts, list) and parts and all(
                isinstance(p, Mapping) and (p.get("type") in _TOOL_RETURN_TYPES
                                            or not _TOOL_RETURN_KEYS.isdisjoint(p))
                for p in parts)):
            return TOOL
        return role
    return TOOL


# LangChain's message types (`type`, or the class named last in a serialized message's `id`)
_LANGCHAIN_ROLES = {"human": USER, "ai": ASSISTANT, "system": "system", "tool": TOOL,
                    "function": TOOL, "developer": "system"}
_LANGCHAIN_CLASSES = {"HumanMessage": "human", "AIMessage": "ai", "SystemMessage": "system",
                      "ToolMessage": "tool", "FunctionMessage": "function"}


def _langchain(message: object) -> object:
    """A LangChain message dict (plain, `messages_to_dict`'s or serialized) as an OpenAI-style
    message; anything else as it is."""
    if not isinstance(message, Mapping) or "role" in message:
        return message
    kind = message.get("type")
    if kind == "constructor" and isinstance(message.get("kwargs"), Mapping):  # serialized
        fields = message["kwargs"]
        ids = message.get("id")
        name = ids[-1] if isinstance(ids, list) and ids and isinstance(ids[-1], str) else ""
        kind = fields.get("type") or name
    elif isinstance(message.get("data"), Mapping):  # messages_to_dict
        fields = message["data"]
    elif "content" in message:
        fields = message
    else:
        return message
    if isinstance(kind, str):  # a class name ("AIMessageChunk": a streamed message's type)
        kind = kind.removesuffix("Chunk")
        kind = _LANGCHAIN_CLASSES.get(kind, kind)
    role = fields.get("role") if kind == "chat" else _LANGCHAIN_ROLES.get(str(kind).lower())
    if not isinstance(role, str):
        return message
    converted = {"role": role, "content": fields.get("content")}
    if fields.get("tool_call_id") is not None:
        converted["tool_call_id"] = fields["tool_call_id"]
    return converted


def message_list(raw: object) -> list[Mapping[str, Any]] | None:
    """The recorded messages of `raw` (JSON text, a list, a `{"messages": [...]}` state, or a
    request or response holding them: `_listed`), each with a `role`; None when `raw` is no
    message list."""
    value = decoded(raw)
    if isinstance(value, Mapping) and isinstance(value.get("messages"), list):
        value = value["messages"]  # LangChain's messages name no `role` before conversion
    else:
        value = _listed(value)
    if isinstance(value, list):
        converted = [_langchain(m) for m in value]
        if is_message_list(converted):
            return cast(list[Mapping[str, Any]], converted)
    return None


def read_messages(raw: object) -> list[Message] | None:
    """A recorded message list (JSON text or list) as `{"role", "content"}` messages; None when
    `raw` is no message list. Messages without text (tool calls only) are left out."""
    value = message_list(raw)
    if value is None:
        return None
    messages = []
    for message in value:
        role, text = role_of(message), text_of(message)
        if text or role == USER:
            messages.append({"role": role, "content": text})
    return messages


def _listed(value: object) -> object:
    """The messages a recorded request or response holds (`message_list` takes a `messages`
    state first): Gemini's `{"contents": [...]}` (its system instruction first) and a model
    response's `{"content": {message}}`; any other value as it is."""
    if not isinstance(value, Mapping):
        return value
    if is_message_list(value.get("contents")):
        config = value.get("config")
        system = value.get("system_instruction", config.get("system_instruction")
                           if isinstance(config, Mapping) else None)
        text = text_of(system) if system is not None else ""
        return [{"role": "system", "content": text}] * bool(text) + list(value["contents"])
    content = value.get("content")
    return [content] if is_message_list([content]) else value


def conversation(messages: Sequence[Message]) -> list[Message]:
    """The messages up to and including the question (the last user message with text): the
    system prompt and earlier turns stay before it; what came after it (tool rounds, the answer)
    is left out. Unchanged when no user message has text."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == USER and message.get("content"):
            return [m for m in messages[: index + 1] if m.get("content")]
    return list(messages)


def question_of(messages: Sequence[Message]) -> str:
    """The last user text of a conversation ("" when there is none)."""
    for message in reversed(messages):
        if message.get("role") == USER and message.get("content"):
            return message["content"]
    return ""


def final_text(raw: object) -> object:
    """The agent's final text in recorded output messages (the last message with text; "" when
    none has any, e.g. only tool calls); any other value as it is (decoded from JSON)."""
    messages = message_list(raw)
    if messages is None:
        return decoded(raw)
    for message in reversed(messages):
        if role_of(message) != TOOL:
            text = text_of(message)
            if text:
                return text
    return ""


def as_input(value: object) -> object:
    """A recorded input for the scorers: a message list as its conversation (see
    `conversation`), anything else as it is."""
    messages = read_messages(value)
    return value if messages is None else conversation(messages)


def flattened_messages(attributes: Mapping[str, Any], prefix: str) -> list[Message] | None:
    """OpenInference's `{prefix}.N.message.role/content/contents.M.message_content.text`, in
    index order; None when the span has none."""
    found: dict[int, dict[str, Any]] = {}
    start = prefix + "."
    for key, value in attributes.items():
        if not key.startswith(start):
            continue
        index, _, rest = key[len(start):].partition(".")
        if index.isdigit():
            found.setdefault(int(index), {})[rest] = value
    if not found:
        return None
    messages = []
    for _, fields in sorted(found.items()):
        role = fields.get(_OI_ROLE)
        role = _ROLE_ALIASES.get(role, role) if isinstance(role, str) else USER
        if fields.get(_OI_TOOL_CALL_ID) is not None:
            role = TOOL
        text = fields.get(_OI_CONTENT)
        if not isinstance(text, str):
            parts: dict[int, tuple[Any, Any]] = {}
            for key, value in fields.items():
                if key.startswith(_OI_CONTENTS):
                    number, _, field = key[len(_OI_CONTENTS):].partition(".")
                    if number.isdigit():
                        kind, part_text = parts.get(int(number), (None, None))
                        if field == _OI_PART_TYPE:
                            kind = value
                        elif field == _OI_PART_TEXT:
                            part_text = value
                        parts[int(number)] = (kind, part_text)
            text = "".join(t for _, (k, t) in sorted(parts.items())
                           if isinstance(t, str) and k in (None, "text"))
        if text or role == USER:
            messages.append({"role": role, "content": text})
    return messages
