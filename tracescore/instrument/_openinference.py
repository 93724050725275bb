"""OpenInference copies of an agent call's input and output (`input.value` / `output.value` with
their mime types), which Phoenix and other OpenInference backends show as input/output columns.

Opt-in (`set_content_capture(openinference=True)` or TRACESCORE_OPENINFERENCE=true): each copy is
one more serialization per call. Same capture, redaction and truncation rules as the GenAI attributes.
"""

from __future__ import annotations

from typing import Any

from tracescore import _semconv as sc
from tracescore._config import ContentSettings
from tracescore._content import serialize

_PLAIN = (str, bytes, int, float, type(None))  # serialized as plain text (never an object/array)


def _value(obj: Any, settings: ContentSettings, value_key: str, mime_key: str) -> dict[str, str]:
    text = serialize(obj, settings)
    structured = not isinstance(obj, _PLAIN) and text[:1] in ("{", "[")
    return {value_key: text, mime_key: sc.OI_MIME_JSON if structured else sc.OI_MIME_TEXT}


def input_attributes(value: Any, settings: ContentSettings) -> dict[str, str]:
    """`input.value` and `input.mime_type` of an agent call's input (redacted, truncated)."""
    return _value(value, settings, sc.OI_INPUT_VALUE, sc.OI_INPUT_MIME_TYPE)


def output_attributes(result: Any, settings: ContentSettings) -> dict[str, str]:
    """`output.value` and `output.mime_type` of an agent call's result (redacted, truncated)."""
    return _value(result, settings, sc.OI_OUTPUT_VALUE, sc.OI_OUTPUT_MIME_TYPE)
