"""An agent call's tool calls and retrieved context, read from the spans that ran inside it.

One reader for both front doors: the in-process processor feeds it SDK spans as they end, the
gateway feeds it OTLP spans of a trace as they arrive; both then ask for what ran under an agent
span (any depth). What counts:

- a tool call: GenAI `execute_tool` spans (`gen_ai.tool.name`, `gen_ai.tool.call.id`,
  `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`, error status / `error.type`) and
  OpenInference TOOL spans (`tool.name`, `input.value`, `output.value`);
- context: a successful tool call's result; the documents of retriever spans (OpenInference
  `retrieval.documents.N.document.content`, GenAI `retrieval` with `gen_ai.retrieval.documents`);
  the `tracescore.context` attribute (a text or an array of texts) on any span.

A tool call whose span records its call id but neither arguments nor result takes them from
the messages of the model calls below the agent span that carry that id (`_tool_messages`).

A tool call's arguments are read without a call wrapper (`{"args": [], "kwargs": {...}}` is its
keyword arguments: `_unwrap.call_arguments`). The last tool call that hands the agent's answer
over (`_answer_channel`) is no tool use: no tool call, no context.

Bounded: spans remembered per trace (`TraceLimits.max_spans`), tool calls and characters handed
to the scorers per agent call (`max_tool_calls`, `max_chars`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError
from tracescore.online.intake._answer_channel import OUTPUT_STEP_MARK, delivers
from tracescore.online.intake._llm_calls import LlmCall
from tracescore.online.intake._messages import decoded
from tracescore.online.intake._tool_messages import tool_content
from tracescore.online.intake._tool_results import tool_error, tool_result
from tracescore.online.intake._tool_spans import tool_of
from tracescore.online.intake._unwrap import call_arguments
from tracescore.scoring._base import ToolCall

_MAX_DEPTH = 256  # parent links followed from a span up to its agent span


@dataclass(frozen=True, slots=True)
class TraceInput:
    """What a scorer is given besides input and output: tool calls (call order) and context."""

    tool_calls: tuple[ToolCall, ...] = ()
    context: tuple[str, ...] = ()
    truncated: bool = False  # items left out to stay within the limits
    # the last tool call, until `for_answer` looked at it: (the index of its result in
    # `context`, or -1 for none; marked by its framework as the output step)
    last_tool: tuple[int, bool] | None = None

    def for_answer(self, answer: object) -> TraceInput:
        """These tool calls and context for an agent call that answered `answer` (its
        normalised output): the last tool call left out, and its result, when it is the answer
        channel (`_answer_channel`); done once (the result no longer has `last_tool`)."""
        if self.last_tool is None:
            return self
        result_at, output_step = self.last_tool
        last = self.tool_calls[-1]
        if not (output_step or delivers(last.arguments, answer)):
            return TraceInput(self.tool_calls, self.context, self.truncated)
        context = self.context if result_at < 0 else (
            self.context[:result_at] + self.context[result_at + 1:])
        return TraceInput(self.tool_calls[:-1], context, self.truncated)


EMPTY = TraceInput()


@dataclass(frozen=True, slots=True)
class TraceLimits:
    """Bounds of the collection: per agent call (handed to scorers) and per trace (kept)."""

    max_tool_calls: int = 64
    max_chars: int = 100_000  # of tool arguments, results and context texts, per agent call
    max_spans: int = 4096  # spans of one trace remembered while its agent call runs

    def __post_init__(self) -> None:
        for name in ("max_tool_calls", "max_chars", "max_spans"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"{name} must be an integer >= 0, got {value!r}")


def as_trace_limits(value: object) -> TraceLimits:
    """`TraceLimits` from None (defaults), a `TraceLimits` or a mapping of its fields."""
    if value is None:
        return TraceLimits()
    if isinstance(value, TraceLimits):
        return value
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {"max_tool_calls", "max_chars", "max_spans"})
        if unknown:
            raise ConfigurationError(f"trace_limits: unknown keys {unknown} (known: "
                                     "max_tool_calls, max_chars, max_spans)")
        return TraceLimits(**value)
    raise ConfigurationError(
        f"trace_limits must be a TraceLimits or a mapping, got {type(value).__name__}")


class Item(NamedTuple):
    """What one span contributes, as recorded (decoded only when a scorer needs it, off the
    agent's thread): a raw tool call (name, arguments, result, error, call id) and/or context
    sources (texts, or the raw `gen_ai.retrieval.documents` value), and its size in characters."""

    start_ns: int
    tool: tuple[str, Any, Any, str | None, str | None] | None
    context: tuple[Any, ...]
    chars: int
    output_step: bool = False  # marked by its framework as the call's output step

    def delivers(self, answer: object) -> bool:
        """Whether this tool call is the answer channel of an agent call answering `answer`
        (`_answer_channel`): marked as its output step, or its argument is the answer."""
        return self.tool is not None and (self.output_step or delivers(self.tool[1], answer))

    def gives_result(self) -> bool:
        """Whether its tool call's result is its first context text."""
        return (self.tool is not None and self.tool[3] is None and bool(self.tool[2])
                and bool(self.context))

    def tool_call(self) -> ToolCall | None:
        if self.tool is None:
            return None
        name, arguments, result, error, call_id = self.tool
        return ToolCall(name=name, arguments=call_arguments(_decoded(arguments)),
                        result=None if error is not None else _decoded(result),
                        error=error, call_id=call_id)

    def with_content(self, content: Mapping[str, str]) -> Item:
        """This tool call with the arguments and result our `@tool` kept unexported."""
        if self.tool is None:
            return self
        name, _, _, error, call_id = self.tool
        arguments = content.get(sc.GEN_AI_TOOL_CALL_ARGUMENTS)
        result = content.get(sc.GEN_AI_TOOL_CALL_RESULT) if error is None else None
        extra = self.context
        context = ((_ToolResult(result),) if result else ()) + extra
        chars = self.chars + _size(arguments) + _size(result)
        return Item(self.start_ns, (name, arguments, result, error, call_id), context, chars,
                    self.output_step)

    def texts(self) -> list[str]:
        texts: list[str] = []
        for source in self.context:
            if isinstance(source, _Documents):
                texts.extend(_documents(source.raw))
            elif isinstance(source, _ToolResult):
                texts.append(_result_text(source.raw))
            elif source:
                texts.append(source if isinstance(source, str) else _text(source))
        return texts


class _Documents(NamedTuple):
    raw: Any  # the recorded `gen_ai.retrieval.documents`


class _ToolResult(NamedTuple):
    raw: Any  # a tool call's recorded result


def read_span(name: str, attributes: Mapping[str, Any], start_ns: int,
              error: str | None | Callable[[], str | None]) -> Item | None:
    """The item of one finished span, None for a span that is neither tool nor context.
    `error`: the span's error text (None: it did not fail), or a function that reads it.

    Cheap (runs as spans end): reads the attributes, decodes nothing (but the result of a tool
    call flagged as failed: its error text)."""
    get = attributes.get
    operation = get(sc.GEN_AI_OPERATION_NAME)
    kind = get(sc.OI_SPAN_KIND)
    marked = get(sc.TS_CONTEXT)
    tool = None
    context: tuple[Any, ...] = ()
    chars = 0
    output_step = False
    found = tool_of(name, attributes)
    if found is not None:
        if callable(error):
            error = error()
        tool_name, raw_args, raw_result, call_id, failed = found
        if error is None and failed:  # flagged, not by its status: its result is its error
            error = tool_error(raw_result)
        tool = (tool_name, raw_args, raw_result, error, call_id)
        chars = _size(raw_args) + (len(error) if error is not None else _size(raw_result))
        if error is None and raw_result is not None:
            context = (_ToolResult(raw_result),)
        message = get(sc.LOGFIRE_MSG)
        output_step = isinstance(message, str) and message.startswith(OUTPUT_STEP_MARK)
    elif operation == sc.OP_RETRIEVAL:
        raw = get(sc.GEN_AI_RETRIEVAL_DOCUMENTS)
        if raw is not None:
            context, chars = (_Documents(raw),), _size(raw)
    elif kind is not None and str(kind).upper() == sc.OI_KIND_RETRIEVER:
        context = tuple(_oi_documents(attributes))
        chars = sum(len(t) for t in context)
    if marked is not None:
        texts = ((marked,) if isinstance(marked, str) else
                 tuple(str(t) for t in marked) if isinstance(marked, (list, tuple)) else ())
        context += texts
        chars += sum(len(t) for t in texts)
    if tool is None and not context:
        return None
    return Item(start_ns, tool, context, chars, output_step)


def gather(items: Sequence[Item], limits: TraceLimits) -> TraceInput:
    """Items in call (start) order, decoded, cut at the first that does not fit the limits;
    where the last tool call's result is noted for `TraceInput.for_answer`."""
    calls: list[ToolCall] = []
    context: list[str] = []
    chars = 0
    truncated = False
    last_tool: tuple[int, bool] | None = None
    for item in sorted(items, key=lambda i: i.start_ns):
        if (item.tool is not None and len(calls) >= limits.max_tool_calls) or (
                chars + item.chars > limits.max_chars):
            truncated = True
            break
        chars += item.chars
        call = item.tool_call()
        if call is not None:
            calls.append(call)
            last_tool = (len(context) if item.gives_result() else -1, item.output_step)
        context.extend(item.texts())
    if not calls and not context:
        return TraceInput(truncated=truncated) if truncated else EMPTY
    # cut short, the last tool call kept may not be the call's last: nothing left out then
    return TraceInput(tuple(calls), tuple(context), truncated, None if truncated else last_tool)


def answer_channel(ordered: Sequence[Item], answer: object) -> int | None:
    """The index of the answer channel among tool-call items in start order: the last, when it
    hands `answer` over (`Item.delivers`); None when there is none."""
    last = len(ordered) - 1
    return last if last >= 0 and ordered[last].delivers(answer) else None


@dataclass(slots=True)
class TraceSpans:
    """The spans of one trace seen so far: parent links, and the items of tool/context spans.

    Span ids are the SDK's integers. At most `max_spans` links are kept; past that, spans are
    counted in `dropped` and their items are lost (the result says `truncated`).
    """

    created: float
    parents: dict[int, int] = field(default_factory=dict)
    items: dict[int, Item] = field(default_factory=dict)
    agents: set[int] = field(default_factory=set)  # agent spans of the trace still running
    dropped: int = 0
    chars: int = 0  # of the items kept (the gateway's bytes bound)
    llm: dict[int, LlmCall] = field(default_factory=dict)  # LLM calls (`_llm_calls`)
    # agent calls seen (read, or to be read from their LLM calls): the LLM calls below one are
    # its own, not an outer agent's
    agent_spans: set[int] = field(default_factory=set)
    marks: dict[int, Any] = field(default_factory=dict)  # run steps (`_run_steps.Mark`)
    loop: bool = False  # kept in process for an LLM call: until its local root ends

    def add(self, span_id: int, parent_id: int | None, item: Item | None, max_spans: int,
            llm: LlmCall | None = None, mark: Any = None) -> None:
        """Remember a finished span (its parent link, its item, its LLM call and its run-step
        mark if any)."""
        if len(self.parents) >= max_spans and span_id not in self.parents:
            self.dropped += 1
            return
        if parent_id:
            self.parents[span_id] = parent_id
        if item is not None:
            self.items[span_id] = item
            self.chars += item.chars
        if llm is not None:
            self.llm[span_id] = llm
            self.chars += llm.chars
        if mark is not None:
            self.marks[span_id] = mark

    def llm_under(self, agent_id: int) -> list[LlmCall]:
        """The LLM calls below `agent_id` (any depth) but not below another agent span between
        them and it (those calls are that inner agent's)."""
        return [call for span_id, call in self.llm.items() if self._below(span_id, agent_id)]

    def agents_below(self, agent_id: int) -> bool:
        """Whether an agent span was seen below `agent_id`."""
        return any(self._below(self.parents.get(span_id), agent_id, crossing=True)
                   for span_id in self.agent_spans if span_id != agent_id)

    def _below(self, span_id: int | None, agent_id: int, *, crossing: bool = False) -> bool:
        """Whether `span_id` is `agent_id` or below it; without `crossing`, not below another
        agent span on the way up."""
        parents, agents = self.parents, self.agent_spans
        parent = span_id
        depth = 0
        while parent is not None and parent != agent_id and depth < _MAX_DEPTH:
            if not crossing and parent in agents:
                return False
            parent = parents.get(parent)
            depth += 1
        return parent == agent_id

    def under(self, agent_id: int,
              content: Mapping[int, Mapping[str, str]] | None = None) -> list[Item]:
        """The items of `agent_id` itself and of the spans below it (any depth); `content`:
        tool arguments/results kept off the spans (capture off), by span id."""
        below = []
        for span_id, item in self.items.items():
            if self._below(span_id, agent_id, crossing=True):
                kept = content.get(span_id) if content else None
                below.append(item if kept is None else item.with_content(kept))
        bare = {call_id for item in below if (call_id := _bare_call_id(item))}
        if bare and self.llm:  # tool spans without content: from the model calls' messages
            found = tool_content((c for s, c in self.llm.items()
                                  if self._below(s, agent_id, crossing=True)), bare)
            below = [item.with_content(found[call_id])
                     if (call_id := _bare_call_id(item)) in found else item for item in below]
        return below


def _bare_call_id(item: Item) -> str | None:
    """The call id of a tool call recorded with it but with neither arguments, result nor
    error (`_tool_messages`); None for any other item."""
    if item.tool is None:
        return None
    _, arguments, result, error, call_id = item.tool
    return call_id if call_id and arguments is None and result is None and error is None else None


def _decoded(raw: object) -> object:
    """Recorded JSON (object or array) decoded; other values as recorded (a tuple as a list)."""
    return list(raw) if isinstance(raw, tuple) else decoded(raw)


def _size(raw: object) -> int:
    return 0 if raw is None else len(raw) if isinstance(raw, str) else len(str(raw))


def _text(raw: object) -> str:
    return raw if isinstance(raw, str) else json.dumps(_decoded(raw), ensure_ascii=False,
                                                       default=str)


def _result_text(raw: object) -> str:
    """A tool result as context: its output text (`_tool_results.tool_result`), else as recorded."""
    text = tool_result(raw)
    return _text(raw) if text is None else text


def _documents(raw: object) -> list[str]:
    """Texts of GenAI `gen_ai.retrieval.documents` (JSON text or array of objects/strings)."""
    docs = _decoded(raw)
    if not isinstance(docs, list):
        return [] if docs is None else [str(docs)]
    texts = []
    for doc in docs:
        if isinstance(doc, dict):
            doc = doc.get("content", doc.get("text"))
        if isinstance(doc, str):
            texts.append(doc)
    return texts


def _oi_documents(attributes: Mapping[str, Any]) -> list[str]:
    """OpenInference `retrieval.documents.{i}.document.content`, in index order."""
    found: list[tuple[int, str]] = []
    prefix, suffix = sc.OI_RETRIEVAL_DOCUMENTS, sc.OI_DOCUMENT_CONTENT
    for key, value in attributes.items():
        if key.startswith(prefix) and key.endswith(suffix) and isinstance(value, str):
            index = key[len(prefix):-len(suffix)]
            if index.isdigit():
                found.append((int(index), value))
    return [text for _, text in sorted(found)]
