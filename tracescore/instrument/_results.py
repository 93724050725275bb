"""What a decorated call returned, read for its span: an LLM response's attributes, a
generator's items joined (streamed chat chunks assembled)."""

from __future__ import annotations

from typing import Any

from tracescore import _semconv as sc
from tracescore._content import cap_name
from tracescore.instrument._options import _LLM
from tracescore.instrument._span_messages import (
    _get,
)


def _llm_result_attrs(span: Any, result: Any) -> None:
    """Token usage, response model/id and finish reasons of an OpenAI/litellm-like response."""

    get = _get
    if result is None or isinstance(result, (str, bytes, int, float, bool, list, tuple)):
        return
    usage = get(result, "usage")
    if usage is not None:
        for key, names in (
            (sc.GEN_AI_USAGE_INPUT_TOKENS, ("prompt_tokens", "input_tokens")),
            (sc.GEN_AI_USAGE_OUTPUT_TOKENS, ("completion_tokens", "output_tokens")),
        ):
            for name in names:
                value = get(usage, name)
                if isinstance(value, int) and not isinstance(value, bool):
                    span.set_attribute(key, value)
                    break
    model = get(result, "model")
    if isinstance(model, str) and model:
        span.set_attribute(sc.GEN_AI_RESPONSE_MODEL, cap_name(model))
    response_id = get(result, "id")
    if isinstance(response_id, str) and response_id:
        span.set_attribute(sc.GEN_AI_RESPONSE_ID, cap_name(response_id))
    choices = get(result, "choices")
    if isinstance(choices, (list, tuple)):
        reasons = [cap_name(r) for r in (get(c, "finish_reason") for c in choices)
                   if isinstance(r, str)]
        if reasons:
            span.set_attribute(sc.GEN_AI_RESPONSE_FINISH_REASONS, reasons)


def _assemble_chunks(items: list[Any]) -> dict[str, Any] | None:
    """A chat-completion-like dict from streamed chunks (`choices[0].delta.content`), or None."""
    text: list[str] = []
    response: dict[str, Any] = {}
    finish_reason = None
    for item in items:
        choices = _get(item, "choices")
        if not isinstance(choices, (list, tuple)):
            return None
        for choice in choices[:1]:
            content = _get(_get(choice, "delta"), "content")
            if isinstance(content, str):
                text.append(content)
            finish_reason = _get(choice, "finish_reason") or finish_reason
        for key in ("usage", "model", "id"):
            value = _get(item, key)
            if value is not None:
                response[key] = value
    message = {"role": "assistant", "content": "".join(text)}
    response["choices"] = [{"message": message, "finish_reason": finish_reason or "stop"}]
    return response


def _join_items(items: list[Any], kind: str) -> Any:
    """The output of a generator call: its items, joined when they are strings.

    Streamed chat chunks become the assembled text (a response dict for `@llm`).
    """
    if not items:
        return items
    if all(type(i) is str for i in items):
        return "".join(items)
    try:
        response = _assemble_chunks(items)
    except Exception:  # noqa: BLE001 - unknown chunk shapes: no assembled response
        response = None
    if response is None:
        return items
    return response if kind == _LLM else response["choices"][0]["message"]["content"]
