"""Recognise agent calls in finished spans of any instrumentation, from name and attributes only.

One place for every convention, shared by the in-process `ScoringSpanProcessor` (spans of other
instrumentations) and the scoring gateway (OTLP spans from any language). A recogniser is called
with the span name and its attributes and returns a `RecognisedCall`, or None for a span that is
not an agent call (the common case: it must reject cheaply). Its `markers` are attribute keys of
which a span it recognises always carries at least one, so a caller can skip the chain for spans
that have none (`recogniser_markers`).

Every reader applies the general rules of `_messages`: the input is the conversation up to
the question (the last user text, never a tool return or the system prompt), the output the
agent's final text (never a tool call).

Built in: GenAI semconv `invoke_agent` ("genai"), OpenInference ("openinference"), OpenLLMetry /
traceloop ("traceloop"), pydantic-ai / logfire ("pydantic_ai"), and the frameworks described as
mappings in `_frameworks` (Mastra "mastra", the Vercel AI SDK "vercel_ai", CrewAI "crewai").
Users add their own mappings (`AgentMapping`, or the same keys as a dict from a config file).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError
from tracescore.online import _messages
from tracescore.online._frameworks import FIRST, FRAMEWORKS

_log = logging.getLogger("tracescore")
_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class RecognisedCall:
    """An agent call read from a span: what the scorers need, and which convention it used."""

    convention: str
    agent: str  # the agent name, or the span name when the span names none
    input: Any
    output: Any
    ground_truth: Any = None


@runtime_checkable
class Recogniser(Protocol):
    """Reads one convention: `recogniser(span_name, attributes) -> RecognisedCall | None`."""

    @property
    def convention(self) -> str:
        """Name reported in `RecognisedCall.convention`."""

    @property
    def markers(self) -> frozenset[str]:
        """Attribute keys of which every span this recogniser accepts carries at least one."""

    def __call__(self, name: str, attributes: Mapping[str, Any], /) -> RecognisedCall | None: ...


def _builtin(convention: str, marker: str,
             read: Callable[[str, Mapping[str, Any]], RecognisedCall | None]) -> Recogniser:
    """A built-in convention: its reader function itself, carrying the recogniser attributes
    (one call per span instead of two: the chain runs on every span)."""
    read.convention = convention  # type: ignore[attr-defined]
    read.markers = frozenset({marker})  # type: ignore[attr-defined]
    return cast(Recogniser, read)


# --- GenAI semantic conventions (tracescore's own spans included) ----------------------------------
def _read_genai(name: str, attributes: Mapping[str, Any]) -> RecognisedCall | None:
    """`invoke_agent` spans, and `invoke_workflow` spans (the same attributes; the name in
    `gen_ai.agent.name`, or `gen_ai.workflow.name` in older semconv versions)."""
    operation = attributes.get(sc.GEN_AI_OPERATION_NAME)
    if operation != sc.OP_INVOKE_AGENT and operation != sc.OP_INVOKE_WORKFLOW:
        return None
    raw_in = attributes.get(sc.GEN_AI_INPUT_MESSAGES)
    raw_out = attributes.get(sc.GEN_AI_OUTPUT_MESSAGES)
    if raw_in is None or raw_out is None:
        return None
    agent = attributes.get(sc.GEN_AI_AGENT_NAME, attributes.get(sc.GEN_AI_WORKFLOW_NAME))
    return RecognisedCall("genai", _name(agent, name),
                          _messages.as_input(messages_of(raw_in)), output_text(raw_out),
                          _ground_truth(attributes))


# --- OpenInference ---------------------------------------------------------------------------------
def _read_openinference(name: str, attributes: Mapping[str, Any]) -> RecognisedCall | None:
    """AGENT spans; and the top span of a LangGraph run (a CHAIN span from a conversation state
    to a state that ends with the agent's answer). A span inside a LangGraph node is a step of
    a run, never the agent call, even when named "agent" (which makes it an AGENT span)."""
    kind = attributes.get(sc.OI_SPAN_KIND)
    if not isinstance(kind, str) or kind.upper() not in (sc.OI_KIND_AGENT, sc.OI_KIND_CHAIN):
        return None
    raw_in = attributes.get(sc.OI_INPUT_VALUE)
    raw_out = attributes.get(sc.OI_OUTPUT_VALUE)
    if raw_in is None or raw_out is None or is_step(attributes):
        return None
    chain = kind.upper() == sc.OI_KIND_CHAIN
    if chain and not all(isinstance(r, str) and '"messages"' in r for r in (raw_in, raw_out)):
        return None  # cheap: no conversation state, no JSON decoded
    value_in = _oi_value(raw_in, attributes.get(sc.OI_INPUT_MIME_TYPE))
    value_out = _oi_value(raw_out, attributes.get(sc.OI_OUTPUT_MIME_TYPE))
    if chain and not _graph_run(value_in, value_out):
        return None
    return RecognisedCall(
        "openinference", _name(attributes.get(sc.OI_AGENT_NAME), name),
        _messages.as_input(value_in), _as_output(value_out), _ground_truth(attributes),
    )


def is_step(attributes: Mapping[str, Any]) -> bool:
    """A step inside an agent run, never an agent call of its own however it is marked: a span
    that ran inside a node of a LangGraph graph (LangChain's run metadata names the node)."""
    metadata = attributes.get(sc.OI_METADATA)
    if not isinstance(metadata, str) or sc.LANGGRAPH_NODE not in metadata:
        return False
    decoded = _json_or_raw(metadata)
    return isinstance(decoded, dict) and sc.LANGGRAPH_NODE in decoded


def _graph_run(value_in: object, value_out: object) -> bool:
    """Input and output are conversation states (`{"messages": [...]}`), the output's last
    message the assistant's text (not a tool call)."""
    if not (isinstance(value_in, dict) and isinstance(value_out, dict)):
        return False
    messages = _messages.message_list(value_out)
    return (messages is not None and _messages.message_list(value_in) is not None
            and _messages.role_of(messages[-1]) == _messages.ASSISTANT
            and bool(_messages.text_of(messages[-1])))


def _oi_value(raw: object, mime_type: object) -> object:
    return _json_or_raw(raw, '{["') if mime_type == sc.OI_MIME_JSON else raw


# --- OpenLLMetry / traceloop -----------------------------------------------------------------------
def _read_traceloop(name: str, attributes: Mapping[str, Any]) -> RecognisedCall | None:
    if attributes.get(sc.TL_SPAN_KIND) not in sc.TL_KINDS_AGENT:
        return None
    raw_in = attributes.get(sc.TL_ENTITY_INPUT)
    raw_out = attributes.get(sc.TL_ENTITY_OUTPUT)
    if raw_in is None or raw_out is None:
        return None
    return RecognisedCall("traceloop", _name(attributes.get(sc.TL_ENTITY_NAME), name),
                          _messages.as_input(_call_arguments(_json_or_raw(raw_in))),
                          _as_output(_call_arguments(_json_or_raw(raw_out, '{["'))),
                          _ground_truth(attributes))


def _call_arguments(value: object) -> object:
    """traceloop's `{"args": [...], "kwargs": {...}}`: the one argument when there is one; its
    LangChain instrumentation's `{"inputs": ...}` / `{"outputs": ...}` (with the run's `tags`,
    `metadata`, `kwargs` beside it): that value."""
    if isinstance(value, dict):
        for key in sc.TL_LANGCHAIN_VALUES:
            if key in value and set(value) <= {key, "tags", "metadata", "kwargs"}:
                return value[key]
    if isinstance(value, dict) and set(value) <= {"args", "kwargs"}:
        args, kwargs = value.get("args") or [], value.get("kwargs") or {}
        if isinstance(args, list) and isinstance(kwargs, dict):
            values = [*args, *kwargs.values()]
            if len(values) == 1:
                return values[0]
    return value


# --- pydantic-ai / logfire ------------------------------------------------------------------------
def _read_pydantic_ai(name: str, attributes: Mapping[str, Any]) -> RecognisedCall | None:
    """Agent run spans (`invoke_agent {name}`, or `agent run` in format version 2): the run's
    messages (earlier turns included) in `pydantic_ai.all_messages`, its output in
    `final_result`; tool returns are recorded in user messages and are no question."""
    raw_messages = attributes.get(sc.PAI_ALL_MESSAGES)
    output = attributes.get(sc.PAI_FINAL_RESULT)
    if raw_messages is None or output is None:
        return None
    messages = _messages.as_input(raw_messages)
    truth = _ground_truth(attributes)
    if truth is None:
        metadata = _json_or_raw(attributes.get(sc.PAI_METADATA))
        if isinstance(metadata, dict):
            truth = metadata.get(sc.TS_GROUND_TRUTH)
    agent = attributes.get(sc.GEN_AI_AGENT_NAME, attributes.get(sc.PAI_AGENT_NAME))
    # a str output is recorded as it is, any other as JSON: text either way, kept as text
    return RecognisedCall("pydantic_ai", _name(agent, name), messages, output, truth)


GENAI = _builtin("genai", sc.GEN_AI_OPERATION_NAME, _read_genai)
OPENINFERENCE = _builtin("openinference", sc.OI_SPAN_KIND, _read_openinference)
TRACELOOP = _builtin("traceloop", sc.TL_SPAN_KIND, _read_traceloop)
PYDANTIC_AI = _builtin("pydantic_ai", sc.PAI_ALL_MESSAGES, _read_pydantic_ai)

BUILTINS: dict[str, Recogniser] = {
    r.convention: r for r in (GENAI, OPENINFERENCE, TRACELOOP, PYDANTIC_AI)
}


# --- user mappings ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AgentMapping:
    """A user's own convention: which attributes hold input, output and ground truth.

    - `input` / `output`: attribute keys holding the agent's input and output (both required on
      the span; JSON objects and arrays are decoded).
    - `ground_truth`: attribute key of the expected answer (default `tracescore.ground_truth`).
    - `agent`: attribute key of the agent name (default: the span name).
    - `attributes`: conditions: the span must carry each key with exactly this value.
    - `span_name`: a regular expression the whole span name must match.
    - `name`: the convention name reported in `RecognisedCall.convention`.
    - `as_text`: which of "input", "output" are taken as the attribute's text as it is, never
      decoded from JSON (an answer that happens to be JSON text is still that text).
    - `input_field` / `output_field` / `agent_field`: a member (dotted path, e.g. `agent.role`)
      of the JSON object in that attribute holding the value, when the attribute holds more;
      the span must carry the member.
    """

    input: str
    output: str
    ground_truth: str = sc.TS_GROUND_TRUTH
    agent: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    span_name: str | None = None
    name: str = "mapping"
    as_text: Sequence[str] = ()
    input_field: str | None = None
    output_field: str | None = None
    agent_field: str | None = None
    _pattern: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fields = {key: getattr(self, key) for key in _MAPPING_KEYS}
        _check_mapping({k: v for k, v in fields.items() if v is not None}, "AgentMapping")
        set_ = object.__setattr__
        set_(self, "attributes", dict(self.attributes))
        set_(self, "as_text", tuple(self.as_text))
        set_(self, "_pattern", re.compile(self.span_name) if self.span_name is not None else None)

    @property
    def convention(self) -> str:
        return self.name

    @property
    def markers(self) -> frozenset[str]:
        return frozenset({self.input})

    def applies(self, name: str, attributes: Mapping[str, Any]) -> bool:
        """Whether a span named `name` meets the conditions (`attributes`, `span_name`),
        whatever it records."""
        for key, expected in self.attributes.items():
            if not _same(attributes.get(key, _MISSING), expected):
                return False
        return self._pattern is None or self._pattern.fullmatch(name) is not None

    def __call__(self, name: str, attributes: Mapping[str, Any], /) -> RecognisedCall | None:
        raw_in = attributes.get(self.input)
        if raw_in is None:
            return None
        raw_out = attributes.get(self.output)
        if raw_out is None:
            return None
        if not self.applies(name, attributes):
            return None
        raw_in = _member(raw_in, self.input_field)  # decoded only for a span that matches
        raw_out = _member(raw_out, self.output_field)
        if raw_in is None or raw_out is None:
            return None
        agent = (_member(attributes.get(self.agent), self.agent_field)
                 if self.agent is not None else None)
        text = self.as_text
        return RecognisedCall(self.name, _name(agent, name),
                              _messages.as_input(raw_in if "input" in text else _json_or_raw(raw_in)),
                              raw_out if "output" in text else _as_output(_json_or_raw(raw_out)),
                              _json_or_raw(attributes.get(self.ground_truth)))


_MAPPING_KEYS = ("name", "span_name", "attributes", "input", "output", "ground_truth", "agent",
                 "as_text", "input_field", "output_field", "agent_field")
_TEXT_FIELDS = ("input", "output")


@dataclass(frozen=True, slots=True)
class _Framework:
    """A built-in framework reader: its mappings (`_frameworks.FRAMEWORKS`), tried in order."""

    convention: str
    mappings: tuple[AgentMapping, ...]

    @property
    def markers(self) -> frozenset[str]:
        return frozenset().union(*(m.markers for m in self.mappings))

    def __call__(self, name: str, attributes: Mapping[str, Any], /) -> RecognisedCall | None:
        for mapping in self.mappings:
            call = mapping(name, attributes)
            if call is not None:
                return call
        return None


def _mapping(spec: object, where: str) -> AgentMapping:
    """An `AgentMapping` from its config-file form, every error naming the key."""
    if isinstance(spec, AgentMapping):
        return spec
    if not isinstance(spec, Mapping):
        raise ConfigurationError(
            f"{where} must be a mapping with keys {', '.join(_MAPPING_KEYS)}, got {spec!r}"
        )
    _check_mapping(spec, where)
    return AgentMapping(**dict(spec))


def _check_mapping(spec: Mapping[Any, Any], where: str) -> None:
    """Raise `ConfigurationError` naming `{where}.{key}` for the first bad key of a mapping."""
    unknown = sorted(str(k) for k in spec if k not in _MAPPING_KEYS)
    if unknown:
        raise ConfigurationError(
            f"{where}.{unknown[0]}: unknown key; expected one of {', '.join(_MAPPING_KEYS)}"
        )
    for key in ("input", "output"):
        if key not in spec:
            raise ConfigurationError(f"{where}.{key} is required (the attribute holding the {key})")
    for key in ("name", "input", "output", "ground_truth", "agent", "span_name", "input_field",
                "output_field", "agent_field"):
        value = spec.get(key)
        if key in spec and (not isinstance(value, str) or not value):
            raise ConfigurationError(f"{where}.{key} must be a non-empty string, got {value!r}")
    conditions = spec.get("attributes", {})
    if not isinstance(conditions, Mapping) or not all(
        isinstance(k, str) and k and isinstance(v, (str, bool, int, float))
        for k, v in conditions.items()
    ):
        raise ConfigurationError(
            f"{where}.attributes must map attribute keys to a string, number or bool, "
            f"got {conditions!r}"
        )
    as_text = spec.get("as_text", ())
    if isinstance(as_text, str) or not isinstance(as_text, Sequence) or not all(
            t in _TEXT_FIELDS for t in as_text):
        raise ConfigurationError(
            f"{where}.as_text must be a list of {', '.join(_TEXT_FIELDS)}, got {as_text!r}")
    if "span_name" in spec:
        try:
            re.compile(spec["span_name"])
        except re.error as exc:
            raise ConfigurationError(
                f"{where}.span_name is not a valid regular expression: {exc}"
            ) from None


BUILTINS.update({
    name: _Framework(name, tuple(_mapping(spec, f"{name}[{i}]") for i, spec in enumerate(specs)))
    for name, specs in FRAMEWORKS.items()
})
# a framework that writes a generic convention's spans its own way is read by its entries first
BUILTINS.update({name: BUILTINS.pop(name) for name in [*BUILTINS] if name not in FIRST})


# --- building and running a chain -----------------------------------------------------------------
def build_recognisers(mappings: Iterable[Any] = (), *, where: str = "recognise",
                      builtins: bool | Iterable[str] = True, builtins_key: str | None = None
                      ) -> tuple[Recogniser, ...]:
    """The chain to try, in order: the user's `mappings`, then the built-in conventions.

    `mappings`: `AgentMapping` objects, dicts with the same keys (from a config file), any
    `Recogniser`, or names of built-in conventions. `where`: the config key they came from,
    named in every `ConfigurationError`. `builtins`: True for every built-in convention, False
    for none, or their names (genai, openinference, traceloop, pydantic_ai, mastra, vercel_ai,
    crewai);
    `builtins_key` names it in errors (default `{where}.builtins`).
    """
    chain = as_recognisers(mappings, where)
    builtin = _builtins(builtins, builtins_key or f"{where}.builtins")
    return chain + tuple(r for r in builtin if r not in chain)


def as_recognisers(items: Iterable[Any], where: str) -> tuple[Recogniser, ...]:
    """Recognisers from a list of recognisers, built-in convention names and mappings."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise ConfigurationError(
            f"{where} must be a list of mappings, recognisers or convention names, got {items!r}"
        )
    chain: list[Recogniser] = []
    for index, item in enumerate(items):
        if isinstance(item, str):
            chain.extend(_builtins([item], f"{where}[{index}]"))
        elif isinstance(item, Recogniser):
            chain.append(item)
        else:
            chain.append(_mapping(item, f"{where}[{index}]"))
    return tuple(chain)


def _builtins(builtins: bool | Iterable[str], key: str) -> list[Recogniser]:
    if builtins is True:
        return list(BUILTINS.values())
    if builtins is False:
        return []
    if isinstance(builtins, str) or not isinstance(builtins, Iterable):
        raise ConfigurationError(
            f"{key} must be true, false or a list of {', '.join(BUILTINS)}, got {builtins!r}"
        )
    chosen = list(builtins)
    unknown = [str(b) for b in chosen if b not in BUILTINS]
    if unknown:
        raise ConfigurationError(
            f"{key}: unknown convention {unknown[0]!r}; known: {', '.join(BUILTINS)}"
        )
    return [BUILTINS[b] for b in dict.fromkeys(chosen)]


def recogniser_markers(recognisers: Iterable[Recogniser]) -> frozenset[str]:
    """Every attribute key that makes a span a candidate for one of `recognisers`."""
    markers: set[str] = set()
    for recogniser in recognisers:
        markers.update(recogniser.markers)
    return frozenset(markers)


def recognise(name: str, attributes: Mapping[str, Any],
              recognisers: Sequence[Recogniser] | None = None) -> RecognisedCall | None:
    """The first recogniser's answer for this span (default: the built-in conventions), or None
    when it is no agent call. Never raises: a recogniser that fails counts as "not recognised"."""
    for recogniser in BUILTINS.values() if recognisers is None else recognisers:
        try:
            call = recogniser(name, attributes)
        except Exception:  # noqa: BLE001 - a bad span or a broken user recogniser
            _log.debug("tracescore: recogniser %r failed", recogniser, exc_info=True)
            continue
        if call is not None:
            return call
    return None


def recognise_genai(name: str, attributes: Mapping[str, Any]) -> RecognisedCall | None:
    """GenAI semconv `invoke_agent` spans (tracescore's own included) with input/output messages."""
    return _read_genai(name, attributes)


# --- value helpers --------------------------------------------------------------------------------
def _name(value: object, default: str) -> str:
    return str(value) if value is not None and value != "" else default


def _ground_truth(attributes: Mapping[str, Any]) -> Any:
    return _json_or_raw(attributes.get(sc.TS_GROUND_TRUTH))


def _member(raw: object, path: str | None) -> object:
    """The member at the dotted `path` of a JSON object attribute (None when it has none), or
    the attribute itself when there is no path."""
    if path is None or raw is None:
        return raw
    value = _json_or_raw(raw)
    for step in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(step)
    return value


def _same(value: object, expected: object) -> bool:
    if isinstance(value, bool) or isinstance(expected, bool):
        return value is expected
    return bool(value == expected)


def _json_or_raw(raw: object, starts: str = "{[") -> object:
    """JSON text (an object or array; also a string literal when `starts` has '"') decoded;
    anything else as it is."""
    if isinstance(raw, str) and raw[:1] and raw[0] in starts:
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _as_output(value: object) -> object:
    """A recorded output for the scorers: a message list (or a response or state holding one,
    e.g. `{"messages": [...]}`) as its final text, anything else as it is."""
    return _messages.final_text(value) if _messages.holds_messages(value) else value


def text_of(message: object) -> str:
    """Text of one message of any recorded shape (`_messages.text_of`): its text parts only."""
    return _messages.text_of(message)


def messages_of(raw: object) -> object:
    """A recorded message list (JSON text or list) as OpenAI-style `{"role", "content"}`
    messages (tool returns as `role: tool`, messages without text left out); any other value
    decoded from JSON, or as it is."""
    messages = _messages.read_messages(raw)
    if messages is not None:
        return messages
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return raw


def output_text(raw: object) -> object:
    """The final text of recorded output messages (the last message with text, never a tool
    call); any other value decoded from JSON, or as it is."""
    try:
        return _messages.final_text(json.loads(raw) if isinstance(raw, str) else raw)
    except ValueError:
        return raw
