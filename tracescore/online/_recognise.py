"""Recognise agent calls in finished spans of any instrumentation, from name and attributes only.

One place for every convention, shared by the in-process `ScoringSpanProcessor` (spans of other
instrumentations) and the scoring gateway (OTLP spans from any language). A recogniser takes the
span name and its attributes and returns a `RecognisedCall`, or None for a span that is not an
agent call (the common case: it must reject cheaply).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracescore import _semconv as sc


@dataclass(frozen=True, slots=True)
class RecognisedCall:
    """An agent call read from a span: what the scorers need, and which convention it used."""

    convention: str
    agent: str  # the agent name, or the span name when the span names none
    input: Any
    output: Any
    ground_truth: Any = None


Recogniser = Callable[[str, Mapping[str, Any]], "RecognisedCall | None"]


def recognise_genai(name: str, attributes: Mapping[str, Any]) -> RecognisedCall | None:
    """GenAI semconv `invoke_agent` spans (tracescore's own included) with input/output messages."""
    if attributes.get(sc.GEN_AI_OPERATION_NAME) != sc.OP_INVOKE_AGENT:
        return None
    raw_in = attributes.get(sc.GEN_AI_INPUT_MESSAGES)
    raw_out = attributes.get(sc.GEN_AI_OUTPUT_MESSAGES)
    if raw_in is None or raw_out is None:
        return None
    agent = attributes.get(sc.GEN_AI_AGENT_NAME)
    return RecognisedCall("genai", str(agent) if agent is not None else name,
                          messages_of(raw_in), output_text(raw_out))


RECOGNISERS: tuple[Recogniser, ...] = (recognise_genai,)


def recognise(name: str, attributes: Mapping[str, Any],
              recognisers: Sequence[Recogniser] = RECOGNISERS) -> RecognisedCall | None:
    """The first recogniser's answer for this span, or None when it is no agent call."""
    for recogniser in recognisers:
        call = recogniser(name, attributes)
        if call is not None:
            return call
    return None


def text_of(message: object) -> str:
    """Text of one GenAI semconv message (parts) or OpenAI-style message (content)."""
    if isinstance(message, str):
        return message
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = message.get("parts", content)
    if isinstance(parts, list):
        texts = [p.get("content", p.get("text")) for p in parts if isinstance(p, dict)]
        return "".join(t for t in texts if isinstance(t, str))
    return ""


def messages_of(raw: object) -> object:
    """`gen_ai.input.messages` (JSON text or list) as OpenAI-style messages the scorers read."""
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return raw
    if isinstance(parsed, list):
        return [{"role": m.get("role", "user") if isinstance(m, dict) else "user",
                 "content": text_of(m)} for m in parsed]
    return parsed


def output_text(raw: object) -> object:
    """Text of the last message in `gen_ai.output.messages`."""
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return raw
    if isinstance(parsed, list) and parsed:
        return text_of(parsed[-1])
    return parsed
