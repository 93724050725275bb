"""Model calls that carry no marker at all, found by the shape of what they record.

Some frameworks trace their model calls with their own tracer and no GenAI attribute (Haystack's
`haystack.agent.step.llm` and `haystack.component.run` spans of a chat generator, say). Such a
span is a model call (`shaped_call`) when:

- it carries no known convention's marker (no `gen_ai.*` key, no `openinference.span.kind` or
  `traceloop.span.kind`: those are read by their own rules);
- it records content under a generic input and output key (the rule of `_generic`:
  `<ns>.input` / `<ns>.output`, `prompt` / `completion`, ...), both as text;
- its input is a chat conversation with a user message, and its output holds chat messages of
  the assistant only (one or more replies; no user, system or tool message: an agent's output,
  which repeats the conversation, is no model call). Roles are found in JSON (`"role":
  "assistant"`), Python reprs (`'role': 'user'`) and message objects' reprs (`_role=<ChatRole.
  USER: 'user'>`).

A model call found this way only makes a loop's top span an agent call when the loop is one:
two model turns or more below it, or a top span that says it is an agent (the word "agent" in
its name or one of its attribute keys). `shaped_messages` and `shaped_answer` read its
conversation and its reply (the reply may sit one level down, under `replies`, `choices` or
`messages`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from tracescore.online.intake._generic import generic_keys, kind_of
from tracescore.online.intake._unwrap import member, unwrap_input, unwrap_output

__all__ = ["SHAPE_MARKERS", "agent_like", "has_content_keys", "shaped_answer", "shaped_call",
           "shaped_messages"]

# a text of which a serialized model call found by its shape holds one (its reply's role)
SHAPE_MARKERS = frozenset({"assistant"})
_ROLE = re.compile(r"""role['"]?\s*[:=]\s*(?:<[\w.]+:\s*)?['"]?([A-Za-z]+)""")
_USERS = frozenset({"user", "human"})
_ASSISTANTS = frozenset({"assistant", "ai", "model"})
_MARKED = ("gen_ai.", "openinference.span.kind", "traceloop.span.kind")
_SCANNED = 256 * 1024  # characters of a value searched for roles
_REPLY_KEYS = ("replies", "choices", "messages", "message", "output", "response")
# opaque object reprs (`<function f at 0x7f...>`) that keep a repr from parsing
_OPAQUE = re.compile(r"<(?:function|bound method|built-in function|built-in method|method|"
                     r"[\w.]+ object) [^'\"\n]{0,200}? at 0x[0-9a-fA-F]+>")
_AGENT = re.compile(r"(?<![a-z])agent", re.IGNORECASE)


def has_content_keys(keys: Iterable[str]) -> bool:
    """Whether one of `keys` is a generic input or output key (cached per key: cheap)."""
    return any(kind_of(key) is not None for key in keys)


def _roles(text: str) -> set[str]:
    return {m.group(1).lower() for m in _ROLE.finditer(text, 0, _SCANNED)}


def shaped_call(attributes: Mapping[str, Any]) -> tuple[str, str] | None:
    """(input key, output key) of a model call with no marker found by its shape (above);
    None for any other span."""
    keys = generic_keys(attributes)
    if keys is None:
        return None
    raw_in, raw_out = attributes[keys[0]], attributes[keys[1]]
    if not isinstance(raw_in, str) or not isinstance(raw_out, str) or "ssistant" not in raw_out:
        return None
    replies = _roles(raw_out)
    if not replies or not replies <= _ASSISTANTS or _USERS.isdisjoint(_roles(raw_in)):
        return None
    if any(key.startswith(_MARKED) for key in attributes):
        return None
    return keys


def agent_like(name: str, keys: Iterable[str]) -> bool:
    """Whether a span says it is an agent: "agent" as a word (or a word's start) in its name or
    one of its attribute keys."""
    return bool(_AGENT.search(name)) or any(_AGENT.search(key) for key in keys)


def shaped_messages(attributes: Mapping[str, Any]) -> list[Any] | None:
    """The conversation a model call found by its shape was given (up to its last user
    message), None when it cannot be read."""
    keys = shaped_call(attributes)
    if keys is None:
        return None
    raw = _readable(attributes[keys[0]])
    for value in (raw, member(raw, "messages")):
        found = unwrap_input(value) if value is not None else None
        if isinstance(found, list) and found and all(isinstance(m, Mapping) for m in found):
            return found
    return None


def shaped_answer(attributes: Mapping[str, Any]) -> str | None:
    """The reply text of a model call found by its shape ("" for a reply with no text: a tool
    call), None when it cannot be read."""
    keys = shaped_call(attributes)
    if keys is None:
        return None
    raw = _readable(attributes[keys[1]])
    for value in (raw, *(member(raw, key) for key in _REPLY_KEYS)):
        if value is None:
            continue
        text = unwrap_output(value)
        if isinstance(text, str) and text is not value and text != raw:
            return text
    return ""


def _readable(raw: str) -> str:
    """`raw` with opaque object reprs replaced by `None` (the rest of the repr then parses)."""
    return _OPAQUE.sub("None", raw) if " at 0x" in raw else raw
