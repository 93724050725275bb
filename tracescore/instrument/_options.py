"""The decorators' kinds and options: the options each kind takes and their checks."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypedDict

from tracescore._exceptions import ConfigurationError

_AGENT, _TOOL, _LLM, _SPAN = "agent", "tool", "llm", "span"

_PRIMITIVES = (str, bool, int, float)


def _is_attribute_value(value: Any) -> bool:
    """Whether `value` is a valid OpenTelemetry attribute value (primitive or homogeneous list)."""
    if isinstance(value, _PRIMITIVES):
        return True
    if not isinstance(value, (list, tuple)):
        return False
    kinds = {bool if isinstance(v, bool) else type(v) for v in value}
    return len(kinds) <= 1 and all(isinstance(v, _PRIMITIVES) for v in value)


def _validate(
    name: Any,
    capture_content: Any,
    attributes: Any,
    conversation_id: Any,
    model: Any,
    provider: Any,
    description: Any,
) -> None:
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ConfigurationError(f"name must be a non-empty string, got {name!r}")
    if capture_content is not None and not isinstance(capture_content, bool):
        raise ConfigurationError(
            f"capture_content must be True, False or None, got {capture_content!r}"
        )
    if attributes is not None and (
        not isinstance(attributes, Mapping) or not all(isinstance(k, str) for k in attributes)
    ):
        raise ConfigurationError(f"attributes must be a mapping with str keys, got {attributes!r}")
    for key, value in (attributes or {}).items():
        if not _is_attribute_value(value):
            raise ConfigurationError(
                f"attributes[{key!r}] must be a str, bool, int or float, or a list of one of "
                f"those types (an OpenTelemetry attribute value), got {value!r}"
            )
    if conversation_id is not None and not (
        isinstance(conversation_id, str) or callable(conversation_id)
    ):
        raise ConfigurationError(
            f"conversation_id must be a string or a callable(input) -> str, got {conversation_id!r}"
        )
    for label, value in (("model", model), ("provider", provider), ("description", description)):
        if value is not None and not isinstance(value, str):
            raise ConfigurationError(f"{label} must be a string, got {value!r}")


class _CommonOptions(TypedDict, total=False):
    name: str | None
    capture_content: bool | None
    attributes: Mapping[str, Any] | None
    conversation_id: str | Callable[[Any], str | None] | None


class _SpanOptions(_CommonOptions, total=False):
    pass


class _ToolOptions(_CommonOptions, total=False):
    description: str | None


class _AgentOptions(_ToolOptions, total=False):
    ground_truth: Any
    question_arg: str | None


class _LlmOptions(_CommonOptions, total=False):
    model: str | None
    provider: str | None


_OPTIONS = {
    kind: frozenset(options.__annotations__)
    for kind, options in (
        (_AGENT, _AgentOptions),
        (_TOOL, _ToolOptions),
        (_LLM, _LlmOptions),
        (_SPAN, _SpanOptions),
    )
}
