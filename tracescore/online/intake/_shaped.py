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
its name or one of its attribute keys). Such a call is kept as an `LlmCall` whose attributes
are its input and output (`shaped_llm_call`), read by `_replies`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from tracescore.online.intake._generic import generic_keys, kind_of
from tracescore.online.intake._llm_calls import LlmCall

__all__ = ["SHAPE_MARKERS", "agent_like", "has_content_keys", "shaped_call", "shaped_llm_call"]

# a text of which a serialized model call found by its shape holds one (its reply's role)
SHAPE_MARKERS = frozenset({"assistant"})
_ROLE = re.compile(r"""role['"]?\s*[:=]\s*(?:<[\w.]+:\s*)?['"]?([A-Za-z]+)""")
_USERS = frozenset({"user", "human"})
_ASSISTANTS = frozenset({"assistant", "ai", "model"})
_MARKED = ("gen_ai.", "openinference.span.kind", "traceloop.span.kind")
_SCANNED = 256 * 1024  # characters of a value searched for roles
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


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
    """Whether a span says it is an agent: the word "agent" in its name or one of its attribute
    keys (`haystack.agent.run`, `runAgent`; not a user agent, `user_agent.original`)."""
    if "gent" in name and _says_agent(name):
        return True
    for key in keys:
        if "gent" in key and _says_agent(key):  # "gent": the common case is none (cheap)
            return True
    return False


def _says_agent(text: str) -> bool:
    words = [w.lower() for w in _WORD.findall(text)]
    return any(w == "agent" and (i == 0 or words[i - 1] != "user") for i, w in enumerate(words))


def shaped_llm_call(attributes: Mapping[str, Any], start_ns: int) -> LlmCall | None:
    """The model call a span with no marker records by its shape (its input and output, read by
    `_replies`), None for any other span."""
    keys = shaped_call(attributes)
    if keys is None:
        return None
    raw_in, raw_out = attributes[keys[0]], attributes[keys[1]]
    return LlmCall(start_ns, "shaped", {"input": raw_in, "output": raw_out},
                   sum(len(v) for v in attributes.values() if isinstance(v, str)))
