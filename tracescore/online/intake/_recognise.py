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
traceloop ("traceloop"), pydantic-ai / logfire ("pydantic_ai"), read in `_readers`, and the
frameworks described as mappings in `_frameworks` (Mastra "mastra", the Vercel AI SDK
"vercel_ai", CrewAI "crewai"). Users add their own mappings (`AgentMapping`, or the same keys as a
dict from a config file). This module builds and runs the chain.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError
from tracescore.online.intake import _messages
from tracescore.online.intake._frameworks import FIRST, FRAMEWORKS
from tracescore.online.intake._readers import (
    GENAI,
    OPENINFERENCE,
    PYDANTIC_AI,
    TRACELOOP,
    RecognisedCall,
    Recogniser,
    agent_name,
    as_output,
)
from tracescore.online.intake._unwrap import member

_log = logging.getLogger("tracescore")
_MISSING: Any = object()


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
        text, decoded = self.as_text, _messages.decoded
        return RecognisedCall(self.name, agent_name(agent, name),
                              _messages.as_input(raw_in if "input" in text else decoded(raw_in)),
                              raw_out if "output" in text else as_output(decoded(raw_out)),
                              decoded(attributes.get(self.ground_truth)))


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


# --- value helpers --------------------------------------------------------------------------------
def _member(raw: object, path: str | None) -> object:
    """The member at the dotted `path` of an attribute (None when it has none), or the
    attribute itself when there is no path."""
    return member(raw, path)  # list elements too (`args.0`), through any encoding


def _same(value: object, expected: object) -> bool:
    if isinstance(value, bool) or isinstance(expected, bool):
        return value is expected
    return bool(value == expected)
