"""The built-in readers of the general conventions, and what a recognised agent call is.

`RecognisedCall` is what every recogniser returns; `Recogniser` the protocol a recogniser
meets. The readers here read the conventions that are no one framework's: GenAI semconv
`invoke_agent` ("genai"), OpenInference ("openinference"), OpenLLMetry / traceloop ("traceloop")
and pydantic-ai / logfire ("pydantic_ai"). Each is its reader function itself, carrying its
convention name and markers (one call per span: the chain runs on every span). The chain,
user mappings and the frameworks described as mappings are in `_recognise`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

from tracescore import _semconv as sc
from tracescore.online.intake import _messages


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
    if raw_in is None or raw_out is None or (isinstance(raw_in, str) and raw_in.strip() == "[]"):
        return None  # an empty input is read from the LLM calls below (`_llm_calls`)
    agent = attributes.get(sc.GEN_AI_AGENT_NAME, attributes.get(sc.GEN_AI_WORKFLOW_NAME))
    return RecognisedCall("genai", agent_name(agent, name),
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
        "openinference", agent_name(attributes.get(sc.OI_AGENT_NAME), name),
        _messages.as_input(value_in), as_output(value_out), _ground_truth(attributes),
    )


def is_step(attributes: Mapping[str, Any]) -> bool:
    """A step inside an agent run, never an agent call of its own however it is marked: a span
    that ran inside a node of a LangGraph graph (LangChain's run metadata names the node)."""
    metadata = attributes.get(sc.OI_METADATA)
    if not isinstance(metadata, str) or sc.LANGGRAPH_NODE not in metadata:
        return False
    decoded = _messages.decoded(metadata)
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
    return _messages.decoded(raw, '{["') if mime_type == sc.OI_MIME_JSON else raw


# --- OpenLLMetry / traceloop -----------------------------------------------------------------------
def _read_traceloop(name: str, attributes: Mapping[str, Any]) -> RecognisedCall | None:
    if attributes.get(sc.TL_SPAN_KIND) not in sc.TL_KINDS_AGENT:
        return None
    raw_in = attributes.get(sc.TL_ENTITY_INPUT)
    raw_out = attributes.get(sc.TL_ENTITY_OUTPUT)
    if raw_in is None or raw_out is None:
        return None
    return RecognisedCall("traceloop", agent_name(attributes.get(sc.TL_ENTITY_NAME), name),
                          _messages.as_input(_call_arguments(_messages.decoded(raw_in))),
                          as_output(_call_arguments(_messages.decoded(raw_out, '{["'))),
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
        metadata = _messages.decoded(attributes.get(sc.PAI_METADATA))
        if isinstance(metadata, dict):
            truth = metadata.get(sc.TS_GROUND_TRUTH)
    agent = attributes.get(sc.GEN_AI_AGENT_NAME, attributes.get(sc.PAI_AGENT_NAME))
    # a str output is recorded as it is, any other as JSON: text either way, kept as text
    return RecognisedCall("pydantic_ai", agent_name(agent, name), messages, output, truth)


GENAI = _builtin("genai", sc.GEN_AI_OPERATION_NAME, _read_genai)
OPENINFERENCE = _builtin("openinference", sc.OI_SPAN_KIND, _read_openinference)
TRACELOOP = _builtin("traceloop", sc.TL_SPAN_KIND, _read_traceloop)
PYDANTIC_AI = _builtin("pydantic_ai", sc.PAI_ALL_MESSAGES, _read_pydantic_ai)


# --- value helpers (the mappings of `_recognise` read values the same way) ----------------------
def agent_name(value: object, default: str) -> str:
    """The agent name recorded (as text), or `default` when the span records none."""
    return str(value) if value is not None and value != "" else default


def _ground_truth(attributes: Mapping[str, Any]) -> Any:
    return _messages.decoded(attributes.get(sc.TS_GROUND_TRUTH))


def as_output(value: object) -> object:
    """A recorded output for the scorers: a message list (or a response or state holding one,
    e.g. `{"messages": [...]}`) as its final text, anything else as it is."""
    return _messages.final_text(value) if _messages.holds_messages(value) else value


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
