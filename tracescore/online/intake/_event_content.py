"""GenAI content recorded as span events, offered to the recognisers as the attributes they read.

Some instrumentations put a call's messages in span events instead of attributes (Strands Agents
by default): the GenAI semconv `gen_ai.client.inference.operation.details` event carries
`gen_ai.input.messages`, `gen_ai.output.messages` and `gen_ai.system_instructions` as its own
attributes, and the older per-message events (`gen_ai.system.message`, `gen_ai.user.message`,
`gen_ai.assistant.message`, `gen_ai.tool.message` with a `content` attribute, `gen_ai.choice`
with a `message` attribute) each record one message. `with_event_content` adds what the events
recorded under those attribute keys, so every recogniser (the GenAI reader, a user's mapping)
reads such spans unchanged; what the span's own attributes record always wins.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tracescore import _semconv as sc
from tracescore.online.intake import _messages

DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_MESSAGE_EVENTS = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                   "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}
_CHOICE_EVENT = "gen_ai.choice"
_DETAILS_KEYS = (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES, sc.GEN_AI_SYSTEM_INSTRUCTIONS)
# keys of the content parts these events record (GenAI parts, Bedrock-style content blocks)
_PART_KEYS = frozenset({"type", "text", "content", "toolUse", "toolResult"})
EVENT_NAMES = frozenset({DETAILS_EVENT, _CHOICE_EVENT, *_MESSAGE_EVENTS})


def with_event_content(attributes: Mapping[str, Any], events: Iterable[tuple[str, Any]],
                       attributes_of: Callable[[Any], Mapping[str, Any]] = dict
                       ) -> Mapping[str, Any]:
    """`attributes` with the GenAI content of `events` ((name, attributes) pairs; an event's
    attributes decoded by `attributes_of`, only for the events named above) added under the
    attribute keys the span lacks; `attributes` itself when the events add nothing."""
    if sc.GEN_AI_INPUT_MESSAGES in attributes and sc.GEN_AI_OUTPUT_MESSAGES in attributes:
        return attributes
    found: dict[str, Any] = {}
    messages: list[dict[str, Any]] = []
    choices: list[dict[str, Any]] = []
    for name, raw in events:
        if name not in EVENT_NAMES:
            continue
        values = attributes_of(raw) if raw is not None else {}
        if name == DETAILS_EVENT:
            for key in _DETAILS_KEYS:  # the first event recording a key is the call's own
                if key in values:
                    found.setdefault(key, values[key])
        elif name == _CHOICE_EVENT:
            choices.append(_message("assistant", values.get("message")))
        else:
            messages.append(_message(_MESSAGE_EVENTS[name], values.get("content")))
    if messages:
        found.setdefault(sc.GEN_AI_INPUT_MESSAGES, json.dumps(messages, ensure_ascii=False))
    if choices:
        found.setdefault(sc.GEN_AI_OUTPUT_MESSAGES, json.dumps(choices, ensure_ascii=False))
    added = {key: value for key, value in found.items() if key not in attributes}
    return {**attributes, **added} if added else attributes


def _message(role: str, content: object) -> dict[str, Any]:
    """One recorded message: its content as recorded (text, or JSON content parts), or a whole
    `{"role", "content"}` message when the event recorded one. Text that only looks like JSON
    (an answer that is JSON) stays text."""
    value = _messages.decoded(content)
    if isinstance(value, Mapping) and ("content" in value or "parts" in value):
        return {"role": value.get("role", role), "content": value.get("content", value.get("parts"))}
    if isinstance(value, list) and value and all(
            isinstance(part, Mapping) and not _PART_KEYS.isdisjoint(part) for part in value):
        return {"role": role, "content": value}
    return {"role": role, "content": content if content is not None else ""}

