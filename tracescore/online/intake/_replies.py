"""The conversation and the reply of a model call found by its shape (`_shaped`), from the
values it recorded: the input up to its last user message, the reply's text (which may sit one
level down, under `replies`, `choices` or `messages`; "" for a reply with no text, a tool call).
Opaque object reprs inside a repr (`<function f at 0x7f...>`) are read as `None`, so the rest of
it parses."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tracescore.online.intake._unwrap import member, unwrap_input, unwrap_output

__all__ = ["shaped_answer", "shaped_messages"]

_REPLY_KEYS = ("replies", "choices", "messages", "message", "output", "response")
_OPAQUE = re.compile(r"<(?:function|bound method|built-in function|built-in method|method|"
                     r"[\w.]+ object) [^'\"\n]{0,200}? at 0x[0-9a-fA-F]+>")


def shaped_messages(raw_in: object) -> list[Any] | None:
    """The conversation a model call found by its shape was given (up to its last user
    message), None when it cannot be read."""
    if not isinstance(raw_in, str):
        return None
    raw = _readable(raw_in)
    for value in (raw, member(raw, "messages")):
        found = unwrap_input(value) if value is not None else None
        if isinstance(found, list) and found and all(isinstance(m, Mapping) for m in found):
            return found
    return None


def shaped_answer(raw_out: object) -> str | None:
    """The reply text of a model call found by its shape ("" for a reply with no text: a tool
    call), None when it cannot be read."""
    if not isinstance(raw_out, str):
        return None
    raw = _readable(raw_out)
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
