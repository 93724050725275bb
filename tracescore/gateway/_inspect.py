"""`tracescore inspect`: what the gateway would make of each agent-like span of some traces.

`Inspector` takes OTLP requests (read from files, or received), tries each span on the gateway's
recognise chain and, when the chain rejects a span that looks like an agent call, asks the
`Diagnoser` why. `reports()` then gives, per agent-like span, what the scorers would be given
(question, answer, agent, earlier turns, tool calls and context, read by the same readers the
gateway uses, from every span of its trace) or why it would not be scored, with a
`recognise.mappings` entry guessed from its attribute keys. GenAI content log records
(`add_logs`, received with `--listen`) are joined to their spans by trace and span id as the
gateway joins them (`intake.LogContent`); spans are read once every request is in (`reports`),
so records may come before or after their spans.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracescore.gateway import _otlp
from tracescore.online.intake import (
    ITEM_MARKERS,
    REASONS,
    AgentReader,
    BufferLimits,
    ContentlessAgent,
    LogContent,
    OtlpSpanView,
    RecognisedCall,
    TraceCollector,
    TraceLimits,
    Unreadable,
    attributes_of,
    generic_keys,
    is_top,
    pinned_mapping,
    suggest_mapping,
    unwrap_input,
    unwrap_output,
)
from tracescore.scoring._inputs import answer_text, question_text


@dataclass(frozen=True)
class SpanReport:
    """One agent-like span: what it would be scored with, or why it would not be scored."""

    where: str  # FILE:LINE, or "request N" (the Nth received)
    name: str
    trace_id: str
    span_id: str
    scored: bool
    framework: str  # the convention that reads it, or the one it looks like
    agent: str | None = None
    question: str | None = None
    answer: str | None = None
    conversation: list[dict[str, str]] = field(default_factory=list)  # before the question
    ground_truth: Any = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    context: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    reason: str | None = None  # why not (a `REASONS` key) ...
    why: str | None = None  # ... in words
    attribute_keys: list[str] = field(default_factory=list)
    # a recognise.mappings entry that would read it (of a scored span: one that pins a call
    # found by the trace's shape, read from its own keys)
    mapping: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Found:
    where: str
    span: Span
    attributes: Mapping[str, Any]
    # None: a loop's top span without agent marker, decided once every span is in
    outcome: RecognisedCall | ContentlessAgent | Unreadable | None


class Inspector:
    """Collects the agent-like spans of the requests it is given (thread-safe)."""

    def __init__(self, recognisers: Sequence[Any], *, keep_others: bool = False) -> None:
        self._chain = tuple(recognisers)
        # read as the gateway reads: the chain, then agent spans without content of their own
        # (from the LLM calls below them, once every span is in), else why not
        self._reader = AgentReader(self._chain)
        self._readable = self._reader.watched | ITEM_MARKERS
        # every span of a trace until the end (no age limit): tool calls may come after the agent
        self._traces = TraceCollector(TraceLimits(), BufferLimits(max_age_s=1.0),
                                      clock=lambda: 0.0)
        self._found: list[_Found] = []
        self._keep_others = keep_others
        self._others: list[tuple[str, str]] = []  # (where, span name) with `keep_others`
        self._other_count = 0
        self._late: list[tuple[str, str]] = []  # agent-like spans found to be no agent call
        # GenAI content log records, joined to their spans as the gateway joins them (kept
        # until the end: they may come before or after their spans)
        self._logs = LogContent(max_spans=1 << 20, max_bytes=1 << 30, max_age_s=math.inf)
        self._pending: list[tuple[Span, str]] = []  # spans taken, read once all are in
        self.spans = 0
        self.requests = 0
        self.log_records = 0  # GenAI content log records kept
        self._lock = threading.Lock()

    def add(self, request: ExportTraceServiceRequest, where: str | None = None) -> None:
        """Take the spans of one request; `where` it came from (default "request N")."""
        with self._lock:
            self.requests += 1
            where = where or f"request {self.requests}"
            for _, _, span in _otlp.spans_of(request):
                self.spans += 1
                self._pending.append((span, where))

    def add_logs(self, request: ExportLogsServiceRequest, raw: bytes | None = None) -> None:
        """Take the GenAI content log records of one logs request (other records are not kept):
        a span's content logged this way is read as the gateway reads it."""
        with self._lock:
            before = self._logs.kept
            self._logs.add_otlp(request, raw)
            self.log_records += self._logs.kept - before

    def _add(self, span: Span, where: str) -> None:
        keys = {kv.key for kv in span.attributes}
        attributes = (attributes_of(span.attributes)
                      if not self._readable.isdisjoint(keys) or self._reader.shaped(keys)
                      else None)
        view = OtlpSpanView(span)
        key = _otlp.key_of(span)
        logs = self._logs
        self._traces.add_span(view, attributes if attributes is None or not len(logs)
                              else logs.with_logged(key, attributes))  # a model call's messages
        outcome: RecognisedCall | ContentlessAgent | Unreadable | None = None
        if attributes is not None and not self._reader.watched.isdisjoint(keys):
            events = [(e.name, e.attributes) for e in span.events]
            outcome, _ = self._reader.read(span.name, attributes, events, attributes_of)
            if not isinstance(outcome, RecognisedCall) and len(logs):  # as the gateway does
                joined, decode = logs.joined(key, events, attributes_of)
                if joined is not events:
                    logged, _ = self._reader.read(span.name, attributes, joined, decode)
                    if isinstance(logged, RecognisedCall):
                        outcome = logged
            if self._reader.wrapper(outcome, view.parent_id):
                outcome = None  # a wrapper of one model turn: part of the agent call above it
            if isinstance(outcome, (RecognisedCall, ContentlessAgent)):
                # the LLM calls below it are its own
                self._traces.mark_agent(*self._traces.at(_otlp.key_of(span)))
        top = not isinstance(outcome, (RecognisedCall, ContentlessAgent)) and (is_top(
            view.parent_id, view.kind) or self._reader.agent_named(span.name, keys))
        if outcome is None and not top:
            self._other_count += 1
            if self._keep_others:
                self._others.append((where, span.name))
            return
        self._found.append(_Found(where, span, attributes or attributes_of(span.attributes)
                                  if top else attributes or {}, outcome))

    @property
    def other_count(self) -> int:
        """Spans that are no agent call (agent-like ones counted once `reports` decided)."""
        return self._other_count + len(self._late)

    @property
    def others(self) -> list[tuple[str, str]]:
        """(where, span name) of the other spans, with `keep_others`."""
        return self._others + (self._late if self._keep_others else [])

    def reports(self) -> list[SpanReport]:
        """A report per agent-like span, in the order they came."""
        with self._lock:
            for span, where in self._pending:
                self._add(span, where)
            self._pending = []
            self._late = []
            reports = []
            for found in self._found:
                report = self._report(found)
                if report is not None:
                    reports.append(report)
                else:  # no agent call of its own (a loop's top without LLM calls, a workflow)
                    self._late.append((found.where, found.span.name))
            return reports

    def _outcome(self, found: _Found) -> RecognisedCall | Unreadable | None:
        """What the gateway makes of the span: an agent span without content is read from the
        LLM calls below it, or unreadable; a loop's top span without agent marker is one when
        LLM calls ran below it (`AgentReader.structural`); None for one that only contains
        agent spans."""
        outcome: Any = found.outcome
        span = found.span
        trace, span_id = self._traces.at(_otlp.key_of(span))
        if trace is None:
            return (self._reader.unread(outcome, span.name, found.attributes)
                    if isinstance(outcome, ContentlessAgent) else outcome)
        view = OtlpSpanView(span)
        settled = self._reader.settle(self._traces, trace, span_id, view.parent_id, view.kind,
                                      span.name, outcome, found.attributes)
        return settled if not isinstance(settled, ContentlessAgent) else None

    def _report(self, found: _Found) -> SpanReport | None:
        span, outcome = found.span, self._outcome(found)
        if outcome is None:
            return None
        trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
        if isinstance(outcome, Unreadable):
            return SpanReport(
                found.where, span.name, trace_id, span_id, False, outcome.framework,
                reason=outcome.reason, why=outcome.description,
                attribute_keys=sorted(found.attributes),
                mapping=suggest_mapping(outcome, span.name, found.attributes))
        trace = self._traces.input_of(*_otlp.key_of(span))
        # as the scorers read the call (its output is the answer text already: an answer
        # that is JSON text stays that text)
        question = _as_scorers_read(question_text, unwrap_input(outcome.input))
        answer = _as_scorers_read(answer_text, unwrap_output(outcome.output))
        warnings = []
        if not question:
            warnings.append(f"{REASONS['no_question_text']}: scorers that read the question "
                            f"(relevancy) will fail")
        if not answer:
            warnings.append(f"{REASONS['no_output_text']}: scorers will have no answer to judge")
        if trace.truncated:
            warnings.append("tool calls and context cut at the trace limits")
        # found by the trace's shape and read from its own generic keys: the entry that pins it
        keys = generic_keys(found.attributes) if found.outcome is None else None
        pinned = (pinned_mapping(span.name, found.attributes, keys)
                  if keys is not None and outcome.input is found.attributes[keys[0]] else None)
        return SpanReport(
            found.where, span.name, trace_id, span_id, True, outcome.convention,
            agent=outcome.agent, question=question, answer=answer,
            conversation=_earlier(unwrap_input(outcome.input)), ground_truth=outcome.ground_truth,
            tool_calls=[_tool_call(call) for call in trace.tool_calls],
            context=list(trace.context), warnings=warnings, mapping=pinned)


def _as_scorers_read(read: Callable[[Any], str], value: object) -> str:
    """The question or answer text the scorers get from a call's input or output ("" when
    they find none)."""
    try:
        return read(value).strip()
    except Exception:  # noqa: BLE001 - no text the scorers could find
        return ""


def _earlier(value: object) -> list[dict[str, str]]:
    """The messages before the question (system prompt, earlier turns) of a conversation."""
    if isinstance(value, list) and len(value) > 1 and all(isinstance(m, dict) for m in value):
        return [{"role": str(m.get("role")), "content": str(m.get("content"))}
                for m in value[:-1]]
    return []


def _tool_call(call: Any) -> dict[str, Any]:
    entry = {"name": call.name, "arguments": call.arguments, "result": call.result}
    if call.error is not None:
        entry["error"] = call.error
    return entry
