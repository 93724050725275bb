"""Why a span that looks like an agent call was not read: for spans the recognise chain rejected.

A span looks like an agent call when it matches the conditions of one of the chain's framework
mappings (Mastra's `mastra.span.type` agent_run / workflow_run, the AI SDK's top-level
`ai.generateText` ... spans, a user mapping's `attributes` / `span_name`), or carries
`openinference.span.kind` AGENT, `traceloop.span.kind` agent / workflow,
`pydantic_ai.all_messages`, or `gen_ai.operation.name` invoke_agent / invoke_workflow.
`Diagnoser(chain)` answers, for such a span, which framework it looks like and why it was not
read (`Unreadable`); callers run it only after the chain returned None, and only for spans that
carry one of its `keys`, so ordinary spans cost nothing more.

`note` logs one warning per (framework, reason) per process, naming the attribute keys of the
span (never their values: they may hold user content). `suggest_mapping` guesses a
`recognise.mappings` entry from the keys a span has.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracescore import _semconv as sc
from tracescore.online.intake import _messages
from tracescore.online.intake._readers import is_step
from tracescore.online.intake._recognise import (
    BUILTINS,
    AgentMapping,
    Recogniser,
    recogniser_markers,
)
from tracescore.online.intake._switches import producer_of, switch_hint

_log = logging.getLogger("tracescore")

NO_CONTENT = "no_input_or_output"
NO_INPUT = "no_input_attribute"
NO_OUTPUT = "no_output_attribute"
NO_QUESTION = "no_question_text"
NO_ANSWER = "no_output_text"
NOT_READ = "not_read"
STRUCTURAL_NO_TEXT = "no_text_in_llm_calls"  # a span found by structure (`_structure`)
REASONS: dict[str, str] = {
    NO_CONTENT: "no input or output attribute",
    NO_INPUT: "no input attribute",
    NO_OUTPUT: "no output attribute",
    NO_QUESTION: "input has no question text",
    NO_ANSWER: "output has no text",
    NOT_READ: "input and output are there, but its reader did not accept them",
    STRUCTURAL_NO_TEXT: "it encloses LLM calls (no agent marker: found by the trace's shape), "
                        "but they record no user question or no answer text",
}
_MISSING = (NO_CONTENT, NO_INPUT, NO_OUTPUT)  # what a content switch can be the cause of
_AGENT_OPERATIONS = (sc.OP_INVOKE_AGENT, sc.OP_INVOKE_WORKFLOW)
_MAX_KEYS_LOGGED = 40


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A span that looks like an agent call of `framework` but was not read, and why."""

    framework: str
    reason: str  # one of REASONS
    input: str  # the attribute key the framework's reader takes the input from
    output: str  # ... and the output
    condition: Mapping[str, Any]  # what makes it agent-like: {key: value} or {"span_name": re}
    producer: str | None = None  # the framework the span names as its producer, if any

    @property
    def description(self) -> str:
        """The reason in words, naming the attribute(s) concerned, and for content that is
        missing, the switch that makes the framework record it."""
        text = REASONS[self.reason]
        where = {NO_CONTENT: f"{self.input}, {self.output}", NO_INPUT: self.input,
                 NO_QUESTION: self.input, NO_OUTPUT: self.output, NO_ANSWER: self.output}
        if self.reason in where:
            text = f"{text} ({where[self.reason]})"
        hint = switch_hint(self.framework, self.producer) if self.reason in _MISSING else None
        return text if hint is None else f"{text}; {hint}"


@dataclass(frozen=True, slots=True)
class _Look:
    """How one framework's agent spans are told apart, and where its reader finds the content."""

    framework: str
    input: str
    output: str
    keys: frozenset[str]  # attribute keys of which such a span carries at least one
    matches: Callable[[str, Mapping[str, Any]], Mapping[str, Any] | None]  # -> condition


class Diagnoser:
    """The agent-like checks of one recognise chain (its frameworks and conditioned mappings)."""

    def __init__(self, recognisers: Iterable[Recogniser]) -> None:
        chain = tuple(recognisers)
        # the most specific first: mappings (a user's, then the frameworks'), then conventions
        # (a Mastra or pydantic-ai agent span is also a GenAI `invoke_agent` span)
        looks = [(_rank(r), look) for r in chain for look in _looks_of(r) if look is not None]
        self._looks = tuple(look for _, look in sorted(looks, key=lambda pair: pair[0]))
        # keys of which an agent-like span carries one (the chain's markers aside)
        self.look_keys: frozenset[str] = frozenset().union(*(look.keys for look in self._looks))
        self.keys: frozenset[str] = recogniser_markers(chain) | self.look_keys

    def __call__(self, name: str, attributes: Mapping[str, Any]) -> Unreadable | None:
        """Why this span, rejected by the chain, was not read; None when it looks like no agent
        call. Never raises."""
        try:
            if is_step(attributes):
                return None  # a step of a run scored at its top span, deliberately not read
            present = self.keys.intersection(attributes)
            for look in self._looks:
                if look.keys.isdisjoint(present):
                    continue  # none of its keys: not one of its spans (cheap)
                condition = look.matches(name, attributes)
                if condition is not None:
                    return Unreadable(look.framework, _reason(look, attributes), look.input,
                                      look.output, condition, producer_of(attributes))
        except Exception:  # noqa: BLE001 - a diagnosis must never cost the span
            _log.debug("tracescore: could not diagnose a span", exc_info=True)
        return None


def _rank(recogniser: Recogniser) -> int:
    if isinstance(recogniser, AgentMapping):
        return 0
    if _mappings_of(recogniser):
        return 1
    order = list(_BUILTIN_LOOKS)
    return 2 + order.index(recogniser.convention) if recogniser.convention in order else 9


def _looks_of(recogniser: Recogniser) -> list[_Look | None]:
    if isinstance(recogniser, AgentMapping):
        return [_mapping_look(recogniser, recogniser.name)]
    mappings = _mappings_of(recogniser)
    if mappings:  # a built-in framework described as mappings
        looks = [_mapping_look(m, recogniser.convention) for m in mappings]
        if recogniser.convention == "vercel_ai":  # named by span name: every ai.* span has
            looks = [_keyed(look, sc.VERCEL_OPERATION_ID) for look in looks]  # ai.operationId
        return looks
    if BUILTINS.get(recogniser.convention) is recogniser:
        return [_BUILTIN_LOOKS.get(recogniser.convention)]
    return []  # a recogniser of the user's own: nothing known about its spans


def _mappings_of(recogniser: Recogniser) -> tuple[AgentMapping, ...]:
    mappings = getattr(recogniser, "mappings", ())
    return tuple(m for m in mappings if isinstance(m, AgentMapping))


def _mapping_look(mapping: AgentMapping, framework: str) -> _Look | None:
    """A mapping's conditions as a look (None for a mapping without any: it names no span)."""
    conditions = dict(mapping.attributes)
    if not conditions and mapping.span_name is None:
        return None
    condition: dict[str, Any] = dict(conditions)
    if mapping.span_name is not None:
        condition["span_name"] = mapping.span_name

    def matches(name: str, attributes: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return condition if mapping.applies(name, attributes) else None

    # its spans carry the condition keys; one named only by `span_name`, its input or output
    keys = frozenset(conditions) or frozenset({mapping.input, mapping.output})
    return _Look(framework, mapping.input, mapping.output, keys, matches)


def _keyed(look: _Look | None, key: str) -> _Look | None:
    """`look` for spans that carry `key` (whatever content they lack)."""
    if look is None:
        return None
    return _Look(look.framework, look.input, look.output, frozenset({key}), look.matches)


def _value_look(framework: str, key: str, values: Sequence[str], input_key: str,
                output_key: str, *, upper: bool = False) -> _Look:
    """Spans whose `key` holds one of `values` (case-insensitively with `upper`)."""

    def matches(name: str, attributes: Mapping[str, Any]) -> Mapping[str, Any] | None:
        value = attributes.get(key)
        if isinstance(value, str) and (value.upper() if upper else value) in values:
            return {key: value}
        return None

    return _Look(framework, input_key, output_key, frozenset({key}), matches)


def _pydantic_ai(name: str, attributes: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if sc.PAI_ALL_MESSAGES in attributes:
        return {"span_name": _name_pattern(name)}
    return None


def _genai(name: str, attributes: Mapping[str, Any]) -> Mapping[str, Any] | None:
    operation = attributes.get(sc.GEN_AI_OPERATION_NAME)
    if operation in _AGENT_OPERATIONS:
        return {sc.GEN_AI_OPERATION_NAME: operation}
    if operation is None and name.split(" ", 1)[0] in _AGENT_OPERATIONS:
        return {"span_name": _name_pattern(name)}
    return None


def _name_pattern(name: str) -> str:
    """A `span_name` expression for spans named like this one: `invoke_agent .*` for
    `invoke_agent geo` (any agent), else the name itself."""
    head, space, _ = name.partition(" ")
    if space and head in _AGENT_OPERATIONS:
        return re.escape(head) + " .*"
    return re.sub(r"([.^$*+?{}\[\]\\|()])", r"\\\1", name)


_BUILTIN_LOOKS: dict[str, _Look] = {  # by convention, in the order they are tried
    "pydantic_ai": _Look("pydantic_ai", sc.PAI_ALL_MESSAGES, sc.PAI_FINAL_RESULT,
                         frozenset({sc.PAI_ALL_MESSAGES}), _pydantic_ai),
    "openinference": _value_look("openinference", sc.OI_SPAN_KIND, (sc.OI_KIND_AGENT,),
                                 sc.OI_INPUT_VALUE, sc.OI_OUTPUT_VALUE, upper=True),
    "traceloop": _value_look("traceloop", sc.TL_SPAN_KIND, sc.TL_KINDS_AGENT,
                             sc.TL_ENTITY_INPUT, sc.TL_ENTITY_OUTPUT),
    "genai": _Look("genai", sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES,
                   frozenset({sc.GEN_AI_OPERATION_NAME}), _genai),
}


def _reason(look: _Look, attributes: Mapping[str, Any]) -> str:
    raw_in, raw_out = attributes.get(look.input), attributes.get(look.output)
    if raw_in is None and raw_out is None:
        return NO_CONTENT
    if raw_in is None:
        return NO_INPUT
    if raw_out is None:
        return NO_OUTPUT
    if not question_of(raw_in):
        return NO_QUESTION
    if not answer_of(raw_out):
        return NO_ANSWER
    return NOT_READ


def question_of(raw: object) -> str:
    """The question a recorded input holds, as the scorers would read it ("" when none)."""
    from tracescore.scoring._inputs import question_text

    try:
        return question_text(_messages.as_input(_messages.decoded(raw))).strip()
    except Exception:  # noqa: BLE001 - no text the scorers could find
        return ""


def answer_of(raw: object) -> str:
    """The answer a recorded output holds, as the scorers would read it ("" when none)."""
    from tracescore.scoring._inputs import answer_text

    try:
        return answer_text(_messages.final_text(raw)).strip()
    except Exception:  # noqa: BLE001 - no text the scorers could find
        return ""


# --- one warning per (framework, reason) per process ----------------------------------------------
_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def note(found: Unreadable, name: str, keys: Iterable[str]) -> None:
    """Log `found` once per (framework, reason) in this process, with the span's attribute keys."""
    pair = (found.framework, found.reason)
    with _warned_lock:
        if pair in _warned:
            return
        _warned.add(pair)
    listed = sorted(keys)
    shown = ", ".join(listed[:_MAX_KEYS_LOGGED])
    if len(listed) > _MAX_KEYS_LOGGED:
        shown += f", ... ({len(listed) - _MAX_KEYS_LOGGED} more)"
    _log.warning(
        "tracescore: agent span not scored: span %r looks like an agent call (%s) but cannot be "
        "read: %s; its attribute keys: %s. `tracescore inspect` on its traces shows a "
        "recognise.mappings entry that reads it (logged once per framework and reason, counted "
        "in the metrics)",
        name[:120], found.framework, found.description, shown or "none")


# --- a mapping guessed from the keys a span has ---------------------------------------------------
_INPUT_WORDS = ("question", "prompt", "input", "query")
_OUTPUT_WORDS = ("answer", "response", "output", "completion", "result", "reply")
AGENT_KEYS = (sc.GEN_AI_AGENT_NAME, sc.OI_AGENT_NAME, sc.TL_ENTITY_NAME, sc.PAI_AGENT_NAME,
               "ai.telemetry.functionId")
_NOT_CONTENT = re.compile(r"(mime_type|tokens?|_type|\.type|\.id|_id|model|finish_reasons?|"
                          r"\.role|count|length|index)$", re.IGNORECASE)


def suggest_mapping(found: Unreadable, name: str, attributes: Mapping[str, Any]
                    ) -> dict[str, Any]:
    """A `recognise.mappings` entry for this span: its framework's condition, and the attribute
    keys that look like its input and output (the reader's own key when the span has it and
    its text is not what is missing; None when no key looks like one)."""
    entry: dict[str, Any] = {"name": f"{found.framework}_mapped"}
    condition = dict(found.condition)
    span_name = condition.pop("span_name", None)
    if span_name is not None:
        entry["span_name"] = span_name
    if condition:
        entry["attributes"] = condition
    texts = {k: v for k, v in attributes.items() if _has_text(v) and not _NOT_CONTENT.search(k)}
    if found.reason == NO_QUESTION:  # the reader's input is there, without a question
        texts.pop(found.input, None)
    if found.reason == NO_ANSWER:
        texts.pop(found.output, None)
    entry["input"] = (found.input if found.input in texts else None) or _guess(
        texts, _INPUT_WORDS, _OUTPUT_WORDS, ())
    entry["output"] = (found.output if found.output in texts else None) or _guess(
        texts, _OUTPUT_WORDS, _INPUT_WORDS, (entry["input"],))
    agent = next((k for k in AGENT_KEYS if _has_text(attributes.get(k))), None)
    if agent is not None:
        entry["agent"] = agent
    return entry


def _has_text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _guess(texts: Mapping[str, Any], words: Sequence[str], others: Sequence[str],
           taken: Sequence[str | None]) -> str | None:
    """The key that names the first of `words` in its last part (`geo.response`), else
    anywhere (`input.value`), and none of the `others` (`gen_ai.output.messages` is no input);
    None when no key does."""
    keys = [key for key in texts if key not in taken
            and not any(other in key.lower() for other in others)]
    for part in (lambda key: key.lower().rsplit(".", 1)[-1], str.lower):
        for word in words:
            for key in keys:
                if word in part(key):
                    return key
    return None


def pinned_mapping(name: str, attributes: Mapping[str, Any], keys: tuple[str, str]
                   ) -> dict[str, Any]:
    """A `recognise.mappings` entry that reads a span found by the trace's shape from the
    generic `keys` (input, output) it was read from: spans of exactly this name (named after
    its first word), so it is read the same with or without the shape rules."""
    entry: dict[str, Any] = {"name": re.split(r"[^A-Za-z0-9_]", name, maxsplit=1)[0] or "mapped",
                             "span_name": re.escape(name), "input": keys[0], "output": keys[1]}
    agent = next((k for k in AGENT_KEYS if _has_text(attributes.get(k))), None)
    if agent is not None:
        entry["agent"] = agent
    return entry


def gate_keys(recogniser: Recogniser) -> frozenset[str]:
    """Keys of which every span `recogniser` reads carries one, as few as can be told: a
    mapping with attribute conditions is told by its first condition key (a framework's mappings
    often share it, `mastra.span.type`), any other recogniser by its markers."""
    mappings = ((recogniser,) if isinstance(recogniser, AgentMapping)
                else _mappings_of(recogniser))
    if not mappings or len(mappings) != len(getattr(recogniser, "mappings", mappings)):
        return recogniser.markers
    return frozenset(min(m.attributes) if m.attributes else m.input for m in mappings)
