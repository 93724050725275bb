"""Agent spans without content of their own, read from the LLM calls below them.

Some frameworks write an agent span that records neither the question nor the answer: the
OpenAI Agents SDK through OpenInference (AGENT spans with only `agent.name`) or through logfire
(`Agent run: {name!r}` spans), some Mastra versions. The general rule: such a span takes its
question from the first LLM call below it in its trace (that call's conversation up to its last
user text) and its answer from the last LLM call's final text. In process those calls have
ended before the agent span ends; the gateway finds them in its per-trace buffer, and waits a
bounded time for calls that arrive after their agent span.

`CONTENTLESS_AGENTS` describes those agent spans as data, per built-in convention (the keys of a
`recognise.mappings` entry (`attributes`, `span_name`, `agent`), without `input` and `output`,
plus `absent`: content keys the span
must not carry (or `empty`: keys it carries with an empty value, such as `"[]"`), so a span that records content its reader refused, such as a LangGraph node's
step, is no contentless agent): an entry applies when its convention is in the recognise chain
and the chain did not read the span. `read_llm_call` reads the LLM
spans: GenAI semconv `chat` / `text_completion` / `generate_content` spans
(`gen_ai.input.messages`, `gen_ai.output.messages`), OpenInference LLM spans
(`llm.input_messages.*` / `llm.output_messages.*`, else `input.value` / `output.value`) and
logfire's OpenAI Agents model calls (`gen_ai.request.model` with `input` / `output` messages).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from tracescore import _semconv as sc
from tracescore.online.intake import _messages
from tracescore.online.intake._frameworks import LLM_CALLS
from tracescore.online.intake._recognise import AgentMapping, RecognisedCall, Recogniser
from tracescore.online.intake._replies import shaped_answer, shaped_messages

CONTENTLESS_AGENTS: dict[str, tuple[dict[str, Any], ...]] = {
    "genai": ({"attributes": {"gen_ai.operation.name": "invoke_agent"},
               "absent": ["gen_ai.input.messages", "gen_ai.output.messages"],
               "agent": "gen_ai.agent.name"},
              # the input recorded empty (`"[]"`: the question was passed by keyword)
              {"attributes": {"gen_ai.operation.name": "invoke_agent"},
               "empty": ["gen_ai.input.messages"], "agent": "gen_ai.agent.name"}),
    "openinference": (
        {"attributes": {"openinference.span.kind": "AGENT"},
         "absent": ["input.value", "output.value"], "agent": "agent.name"},
        # LlamaIndex's agent runs: a workflow's CHAIN span, its input the start state and its
        # output a cut-off text of the stop event; the messages are on the LLM spans below
        {"span_name": r"\w*Agent(Workflow)?\.run",
         "attributes": {"openinference.span.kind": "CHAIN"}},
    ),
    # logfire.instrument_openai_agents(): logfire records its spans under pydantic-ai's convention
    "pydantic_ai": ({"attributes": {"logfire.msg_template": "Agent run: {name!r}"},
                     "agent": "name"},),
}
_LLM_OPERATIONS = frozenset({sc.OP_CHAT, "text_completion", "generate_content"})
# frameworks' own model-call spans, described as mappings (`_frameworks.LLM_CALLS`)
_MAPPED = tuple(AgentMapping(**spec) for specs in LLM_CALLS.values() for spec in specs)
# attribute keys of which every LLM span `read_llm_call` reads carries one
LLM_MARKERS = frozenset({sc.GEN_AI_OPERATION_NAME, sc.OI_SPAN_KIND, sc.GEN_AI_REQUEST_MODEL})


@dataclass(frozen=True, slots=True)
class ContentlessAgent:
    """An agent span that records no question or answer of its own."""

    convention: str
    agent: str  # the agent name, or the span name when the span names none
    ground_truth: Any = None
    # no agent name recorded and a span name that is only its operation's (`invoke_agent`): a
    # wrapper of one model turn, part of the agent call above it (`AgentReader.wrapper`)
    anonymous: bool = False
    structural: bool = False  # found by the trace's shape, no agent marker (`_structure`)


class LlmCall(NamedTuple):
    """An LLM span as recorded (decoded only for the first and last call of an agent)."""

    start_ns: int
    reader: str  # "genai", "openinference", "logfire", "mapping" (`LLM_CALLS`) or "shaped"
    attributes: Mapping[str, Any]
    chars: int  # recorded characters it keeps alive (the gateway's byte bound)


class ContentlessReader:
    """The `CONTENTLESS_AGENTS` entries of the conventions in a recognise chain."""

    def __init__(self, conventions: Iterable[str]) -> None:
        chosen = set(conventions)
        self._entries = tuple(
            (name, dict(entry["attributes"]), entry.get("agent"), tuple(entry.get("absent", ())),
             re.compile(entry["span_name"]) if "span_name" in entry else None,
             tuple(entry.get("empty", ())))
            for name, entries in CONTENTLESS_AGENTS.items() if name in chosen
            for entry in entries)
        self.markers = frozenset(key for _, conditions, *_ in self._entries for key in conditions)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def raw_markers(self, known: frozenset[str]) -> frozenset[str]:
        """Texts of which a serialized span this reader accepts holds one: a condition's key
        when it is among `known` markers, else its value (a key on every span of its library,
        such as `logfire.msg_template`, would not narrow anything down)."""
        found = set()
        for _, conditions, *_ in self._entries:
            key, value = next(iter(conditions.items()))
            found.add(key if key in known or not isinstance(value, str) else value)
        return frozenset(found)

    def accepts(self, name: str, attributes: Mapping[str, Any]) -> bool:
        """Whether the span is one of these agent spans (cheap when it carries no marker)."""
        return not self.markers.isdisjoint(attributes) and self(name, attributes) is not None

    def __call__(self, name: str, attributes: Mapping[str, Any]) -> ContentlessAgent | None:
        for convention, conditions, agent_key, absent, span_name, empty in self._entries:
            if (all(attributes.get(key) == value for key, value in conditions.items())
                    and not any(key in attributes for key in absent)
                    and all(is_empty(attributes.get(key, "[]")) for key in empty)
                    and (span_name is None or span_name.fullmatch(name) is not None)):
                agent = attributes.get(agent_key) if agent_key is not None else None
                return ContentlessAgent(convention, str(agent) if agent else name,
                                        _messages.decoded(attributes.get(sc.TS_GROUND_TRUTH)),
                                        anonymous=not agent and is_anonymous(name))
        return None


# span names that name no agent: an operation or span kind only
_ANONYMOUS = frozenset({"", "invoke_agent", "invoke_workflow", "agent", "workflow", "chain",
                        "agent run", "agent_run", "run", "step", "turn"})


def is_anonymous(name: str) -> bool:
    """Whether a span name names no agent (`invoke_agent`, `agent`, `""`, ...)."""
    return name.strip().lower() in _ANONYMOUS


def is_empty(value: object) -> bool:
    """A recorded value that holds nothing: no text, an empty list or object, `null`."""
    if isinstance(value, str):
        return value.strip() in ("", "[]", "{}", "null", '""')
    return value is None or (isinstance(value, (list, tuple, dict)) and not value)


def contentless_reader(recognisers: Iterable[Recogniser]) -> ContentlessReader:
    """The reader for the built-in conventions among `recognisers` (empty when none)."""
    return ContentlessReader(getattr(r, "convention", "") for r in recognisers)


def read_llm_call(attributes: Mapping[str, Any], start_ns: int) -> LlmCall | None:
    """The LLM call one finished span records, None for any other span. Cheap: reads a few
    attributes and decodes nothing (the size of an LLM span's strings is summed)."""
    get = attributes.get
    operation = get(sc.GEN_AI_OPERATION_NAME)
    if operation in _LLM_OPERATIONS:
        if get(sc.GEN_AI_INPUT_MESSAGES) is None or get(sc.GEN_AI_OUTPUT_MESSAGES) is None:
            return None
        reader = "genai"
    elif operation is None and str(get(sc.OI_SPAN_KIND, "")).upper() == sc.OI_KIND_LLM:
        reader = "openinference"
    elif (operation is None and sc.GEN_AI_REQUEST_MODEL in attributes
          and get(sc.LOGFIRE_INPUT) is not None and get(sc.LOGFIRE_OUTPUT) is not None):
        reader = "logfire"
    elif operation is None and any(_applies(m, attributes) for m in _MAPPED):
        reader = "mapping"
    else:
        return None
    chars = sum(len(v) for v in attributes.values() if isinstance(v, str))
    return LlmCall(start_ns, reader, attributes, chars)


def from_llm_calls(agent: ContentlessAgent, calls: Sequence[LlmCall]) -> RecognisedCall | None:
    """The agent call read from its LLM calls: the first call's conversation (ending at its last
    user text) and the last call's final text; None while either is missing."""
    ordered = sorted(calls, key=lambda c: c.start_ns)
    # calls that record no messages at all (LlamaIndex's `_prepare_chat_with_tools` LLM spans,
    # say) are skipped; a last call that answered with a tool call only has "" as its text
    messages = next((m for c in ordered if (m := _input_messages(c)) is not None), None)
    if not messages or not _messages.question_of(messages):
        return None
    answer = next((a for c in reversed(ordered) if isinstance(a := _output_text(c), str)), None)
    if not answer:
        return None
    return RecognisedCall(agent.convention, agent.agent, _messages.conversation(messages), answer,
                          agent.ground_truth)


def _applies(mapping: AgentMapping, attributes: Mapping[str, Any]) -> bool:
    """Whether a mapped model-call span could be read by `mapping` (keys and conditions only;
    the span's name is not at hand here)."""
    return (mapping.input in attributes and mapping.output in attributes
            and mapping.applies("", attributes))


def _mapped(call: LlmCall) -> RecognisedCall | None:
    for mapping in _MAPPED:
        read = mapping("", call.attributes) if _applies(mapping, call.attributes) else None
        if read is not None:
            return read
    return None


def _input_messages(call: LlmCall) -> list[_messages.Message] | None:
    attributes = call.attributes
    if call.reader == "shaped":  # found by its shape (`_shaped`): its input and output
        return shaped_messages(attributes.get("input"))
    if call.reader == "mapping":
        read = _mapped(call)
        return read.input if read is not None and isinstance(read.input, list) else None
    if call.reader == "genai":
        return _messages.read_messages(attributes.get(sc.GEN_AI_INPUT_MESSAGES))
    if call.reader == "logfire":
        return _messages.read_messages(attributes.get(sc.LOGFIRE_INPUT))
    flat = _messages.flattened_messages(attributes, sc.OI_LLM_INPUT_MESSAGES)
    return flat if flat is not None else _messages.read_messages(
        attributes.get(sc.OI_INPUT_VALUE))


def _output_text(call: LlmCall) -> object:
    attributes = call.attributes
    if call.reader == "shaped":
        return shaped_answer(attributes.get("output"))
    if call.reader == "mapping":
        read = _mapped(call)
        return read.output if read is not None else None
    if call.reader == "genai":
        raw = attributes.get(sc.GEN_AI_OUTPUT_MESSAGES)
    elif call.reader == "logfire":
        raw = attributes.get(sc.LOGFIRE_OUTPUT)
    else:
        flat = _messages.flattened_messages(attributes, sc.OI_LLM_OUTPUT_MESSAGES)
        if flat is not None:
            return _messages.final_text(flat) if flat else ""
        raw = attributes.get(sc.OI_OUTPUT_VALUE)
    return _messages.final_text(raw)
