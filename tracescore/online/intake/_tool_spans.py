"""Which spans are tool executions, and where each convention records the call: data, one row
per convention, and one generic rule for conventions we do not know.

A tool span gives a tool call (name, arguments, result, call id) and its result as context
(`_trace_input`). Known conventions (`TOOL_CONVENTIONS`): the span's kind marker and the keys of
its content. Any other span whose kind marker (a key ending in `span.kind`, `span_kind`,
`observation.type`, `entity.kind`, `spanType` or `span_type`) says `tool` (or JSON `"TOOL"`, as
MLflow's `mlflow.spanType`) is read generically: its arguments and result under the marker's
namespace (`<ns>.input` / `.output`, `.arguments` / `.result`, `.args`, `.entity.input` /
`.entity.output`, `.input.value` / `.output.value`, `.spanInputs` / `.spanOutputs`, `.inputs` /
`.outputs`), its name under `gen_ai.tool.name`, `tool.name`, `<ns>.entity.name`, `<ns>.name` or
from the span name.

A span with no kind marker at all that names its tool (a key `tool.name` or ending in
`.tool.name`, as Haystack's `haystack.tool.name`) is a tool span too when it records content
under its span name (`<span name>.input` / `.output`: Haystack's `haystack.agent.step.tool.input`)
or under that key's namespace (`<ns>.input`, `<ns>.tool.input`, `<ns>.tool.call.arguments`, ...),
or when its span name ends in `tool`. In both generic rules a flag set true under the same
namespaces (`<ns>.tool.error`, `<ns>.error`, `<ns>.is_error`) marks the call failed: its result
is its error (Haystack records a failed call so, its span's status unset).

Cheap (runs as every span ends): a few lookups; the generic rule scans the attribute keys once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from tracescore import _semconv as sc


class ToolConvention(NamedTuple):
    """Where one convention marks a tool span and records its call."""

    kind_key: str
    kind_value: str  # compared without case
    name_keys: tuple[str, ...]  # the first present names the tool (else the span name)
    arguments_key: str
    result_key: str
    call_id_keys: tuple[str, ...] = ()
    failed_keys: tuple[str, ...] = ()  # a flag set true under one: the call failed


TOOL_CONVENTIONS: tuple[ToolConvention, ...] = (
    ToolConvention(sc.GEN_AI_OPERATION_NAME, sc.OP_EXECUTE_TOOL,
                   (sc.GEN_AI_TOOL_NAME, sc.OI_TOOL_NAME),
                   sc.GEN_AI_TOOL_CALL_ARGUMENTS, sc.GEN_AI_TOOL_CALL_RESULT,
                   (sc.GEN_AI_TOOL_CALL_ID,)),
    ToolConvention(sc.OI_SPAN_KIND, sc.OI_KIND_TOOL, (sc.OI_TOOL_NAME, sc.GEN_AI_TOOL_NAME),
                   sc.OI_INPUT_VALUE, sc.OI_OUTPUT_VALUE, (sc.OI_TOOL_CALL_ID,
                                                           sc.GEN_AI_TOOL_CALL_ID)),
    ToolConvention(sc.TL_SPAN_KIND, "tool", (sc.GEN_AI_TOOL_NAME, sc.TL_ENTITY_NAME),
                   sc.TL_ENTITY_INPUT, sc.TL_ENTITY_OUTPUT, (sc.GEN_AI_TOOL_CALL_ID,)),
    ToolConvention("langfuse.observation.type", "tool", (sc.GEN_AI_TOOL_NAME,),
                   "langfuse.observation.input", "langfuse.observation.output",
                   (sc.GEN_AI_TOOL_CALL_ID,)),
)
_KNOWN_KIND_KEYS = frozenset(c.kind_key for c in TOOL_CONVENTIONS)
_KIND_SUFFIXES = ("span.kind", "span_kind", "observation.type", "entity.kind", "spanType",
                  "span_type")
_ARGUMENT_SUFFIXES = ("input", "arguments", "args", "entity.input", "input.value", "spanInputs",
                      "inputs")
_RESULT_SUFFIXES = ("output", "result", "entity.output", "output.value", "spanOutputs",
                    "outputs")
_NAME_SUFFIXES = ("entity.name", "tool.name", "name")
_FAILED_SUFFIXES = ("tool.error", "error", "is_error")
_TOOL_NAME = "tool.name"  # a key naming the tool: this, or one ending in `.tool.name`
_TOOL_PREFIX = f"{sc.OP_EXECUTE_TOOL} "
# texts one of which a span that may be a tool span carries in a key (a door's cheap gate: each
# is one substring search of every request, so as few as cover every kind key above)
TOOL_MARKERS = frozenset({".kind", "_kind", "observation.type", "spanType", "span_type",
                          _TOOL_NAME})


class ToolSpan(NamedTuple):
    """A tool span's call as recorded (nothing decoded)."""

    name: str
    arguments: Any
    result: Any
    call_id: str | None
    failed: bool = False  # flagged as failed (Haystack's `haystack.tool.error`): its result
    # is then its error


def tool_of(name: str, attributes: Mapping[str, Any]) -> ToolSpan | None:
    """The tool call a span records, None for a span that is no tool execution."""
    get = attributes.get
    for convention in TOOL_CONVENTIONS:
        kind = get(convention.kind_key)
        if kind is not None and str(kind).lower() == convention.kind_value.lower():
            return _read(name, attributes, convention)
    named: str | None = None  # a key naming the tool
    kinded = False  # a kind marker says the span is something else
    for key, value in attributes.items():
        if key in _KNOWN_KIND_KEYS:
            kinded = True
        elif isinstance(value, str) and key.endswith(_KIND_SUFFIXES):
            if value.strip('"').lower() == "tool":  # MLflow's is JSON: `"TOOL"`
                return _read(name, attributes, _generic(key, attributes))
            kinded = True
        elif named is None and isinstance(value, str) and value and _names_tool(key):
            named = key
    if named is not None and not kinded:
        found = _named(named, name, attributes)
        if found is not None:
            return _read(name, attributes, found)
    return None


def may_be_tool(keys: Iterable[str]) -> bool:
    """Whether a span with these attribute keys may be a tool span (decode it)."""
    return any(key in _KNOWN_KIND_KEYS or key.endswith(_KIND_SUFFIXES) or _names_tool(key)
               for key in keys)


def _names_tool(key: str) -> bool:
    """Whether `key` names a span's tool: `tool.name`, `<ns>.tool.name` (not one of a list of
    tools offered to a model, `<ns>.tools.0.tool.name`)."""
    return (key == _TOOL_NAME or key.endswith("." + _TOOL_NAME)) and not any(
        part.isdigit() for part in key.split("."))


def _named(name_key: str, span_name: str, attributes: Mapping[str, Any]) -> ToolConvention | None:
    """The keys of a tool span known by a key naming its tool, None when it records no content
    there and its name does not say tool (a span merely mentioning a tool)."""
    namespace = name_key[:-len(_TOOL_NAME)]
    namespaces = (span_name + ".", namespace + "tool.", namespace)

    def first(suffixes: tuple[str, ...]) -> str:
        return next((ns + s for ns in namespaces for s in suffixes if ns + s in attributes), "")

    arguments = first(_ARGUMENT_SUFFIXES + ("call.arguments",))
    result = first(_RESULT_SUFFIXES + ("call.result",))
    if not (arguments or result or span_name.lower().endswith(("tool", "tool_call"))):
        return None
    return ToolConvention(name_key, "", (name_key,), arguments, result,
                          (sc.GEN_AI_TOOL_CALL_ID, sc.OI_TOOL_CALL_ID),
                          tuple(ns + s for ns in namespaces for s in _FAILED_SUFFIXES))


def _read(name: str, attributes: Mapping[str, Any], convention: ToolConvention) -> ToolSpan:
    get = attributes.get
    tool_name = next((get(k) for k in convention.name_keys if get(k)), None)
    call_id = next((get(k) for k in convention.call_id_keys if get(k) is not None), None)
    failed = any(get(k) is True or str(get(k)).lower() == "true" for k in convention.failed_keys)
    return ToolSpan(str(tool_name) if tool_name else _span_tool_name(name),
                    get(convention.arguments_key), get(convention.result_key),
                    None if call_id is None else str(call_id), failed)


def _generic(kind_key: str, attributes: Mapping[str, Any]) -> ToolConvention:
    """The keys of a tool span in a convention we do not know, from its kind marker's key."""
    namespace = next(kind_key[:-len(s)] for s in _KIND_SUFFIXES if kind_key.endswith(s))

    def first(suffixes: tuple[str, ...]) -> str:
        return next((namespace + s for s in suffixes if namespace + s in attributes), "")

    names = (sc.GEN_AI_TOOL_NAME, sc.OI_TOOL_NAME) + tuple(namespace + s for s in _NAME_SUFFIXES)
    return ToolConvention(kind_key, "tool", names, first(_ARGUMENT_SUFFIXES),
                          first(_RESULT_SUFFIXES), (sc.GEN_AI_TOOL_CALL_ID, sc.OI_TOOL_CALL_ID),
                          tuple(namespace + s for s in _FAILED_SUFFIXES))


def _span_tool_name(name: str) -> str:
    """The tool's name from its span's name: `execute_tool NAME`, OpenLLMetry's `NAME.tool`."""
    return name.removeprefix(_TOOL_PREFIX).removesuffix(".tool")
