"""SDK spans into the intake: the spans of traces a scorer may sample are collected (tool calls,
context, LLM calls and run steps of the agent calls in them), and agent spans of other
instrumentations are read (`recognise`), by their markers or by the trace's shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan, Span

from tracescore import _semconv as sc
from tracescore._guard import Guard
from tracescore.online._jobs import Call
from tracescore.online._metrics import OnlineMetrics
from tracescore.online._runs_tracker import is_run_scoped
from tracescore.online._sampling import RANDOMNESS_MASK
from tracescore.online.intake import (
    AgentReader,
    Item,
    LogContent,
    RecognisedCall,
    Recogniser,
    SdkSpanView,
    TraceLimits,
    TraceSpans,
    Unreadable,
    in_process,
    note_unreadable,
    starts_llm_call,
)

_KINDS = ("internal", "server", "client", "producer", "consumer")  # SpanKind by value


class SdkTraces:
    """The traces with an agent call running that a scorer may sample, fed span by span."""

    def __init__(self, recognisers: tuple[Recogniser, ...], limits: TraceLimits,
                 max_traces: int, *, run_scope: bool, metrics: OnlineMetrics,
                 guard: Guard) -> None:
        self.recognisers = recognisers
        self.reader = AgentReader(recognisers)  # one outcome per agent-like span
        self.log_content = LogContent()  # content log records by span (`_log_processor`)
        # agent spans without content of their own are read from the LLM calls below them
        self.contentless = self.reader.contentless
        self.shapes = bool(self.contentless)  # model calls found by shape (`intake._shaped`)
        # traces below it are not collected (no scorer that reads them samples them)
        self.trace_threshold = RANDOMNESS_MASK + 1
        # agent spans of traces below it are not read (no scorer samples them)
        self.read_threshold = 0
        self._guard_read = guard.site("recognise", "tracescore: could not read an agent span "
                                      "for scoring")  # exported unscored
        self._markers = self.reader.chain_markers
        self.run_scope = run_scope  # run-scope scorers: their run's steps are collected too
        self._metrics = metrics
        self._limits, self._max_traces = limits, max_traces
        self.reset()

    def reset(self) -> None:
        """Forget every trace (a forked child: they belong to the parent)."""
        self.traces = in_process(self._limits, self._max_traces)
        self.kept = self.traces.kept  # empty: no agent call running that a scorer may sample

    def start(self, span: Span, trace_id: int, span_id: int) -> None:
        """An agent span starting in a trace a scorer may sample: collect that trace's spans."""
        attributes = attributes_of(span)
        operation = attributes.get(sc.GEN_AI_OPERATION_NAME)
        # an LLM call: the span above it that ends last may be its agent call (`_structure`)
        loop = bool(self.contentless) and starts_llm_call(attributes)
        if operation is not None:
            if not loop and operation != sc.OP_INVOKE_AGENT and operation != sc.OP_INVOKE_WORKFLOW:
                return
        elif not self.recognisers or (not loop and self._markers.isdisjoint(attributes)
                                      and not self.contentless.accepts(span.name, attributes)):
            return
        if sc.TS_EVAL_RUN_ID in attributes or otel_context.get_value(sc.CTX_EVAL_RUN_ID):
            return  # run_evals scores its own calls (its item span, and agents inside it)
        if loop:
            self.traces.open_loop(trace_id)
        else:
            self.traces.open(trace_id, span_id)

    def span_ended(self, span: ReadableSpan, *, read: bool
               ) -> tuple[TraceSpans | None, RecognisedCall | None]:
        """A span ended while a scorer may take it: remembered in its trace if collected (an
        agent call of ours marks the LLM calls below it as its own), and with `read` (no agent
        call of ours stashed for it) read as another instrumentation's agent call."""
        trace = self.end(span) if self.kept or self.shapes else None
        if trace is not None and ours(span):
            self.traces.mark_agent(trace, span.context.span_id)
        found = None
        if read and self.recognisers:
            with self._guard_read:  # exported unscored rather than not at all
                found = self._recognised(span, trace)
        return trace, found

    def end(self, span: ReadableSpan) -> TraceSpans | None:
        """Remember a finished span of a collected trace; the trace when `span` is its agent."""
        context = span.context
        if context is None:
            return None
        if context.trace_id not in self.kept and not self._loop_by_shape(span, context):
            return None
        attributes = attributes_of(span)
        if len(self.log_content):  # a model call whose messages are logged
            attributes = self.log_content.with_logged((context.trace_id, context.span_id),
                                                      attributes)
        parent = span.parent
        return self.traces.end_span(SdkSpanView(span), attributes,
                                    llm=bool(self.contentless), marks=self.run_scope,
                                    root=parent is None or parent.is_remote,
                                    named=self.reader.agent_named(span.name, attributes))

    def _loop_by_shape(self, span: ReadableSpan, context: Any) -> bool:
        """A model call with no marker (`intake._shaped`) ended in a trace a scorer may sample:
        keep its trace until its local root ends (the span above it may be its agent call)."""
        if not (self.shapes and context.trace_flags & 1
                and context.trace_id & RANDOMNESS_MASK >= self.trace_threshold
                and self.reader.shaped_call(attributes_of(span))):
            return False
        self.traces.open_loop(context.trace_id)
        return True

    def collect(self, span: ReadableSpan, trace: TraceSpans | None, call: Call,
                added: tuple[tuple[int, str], ...],
                tool_content: Mapping[int, Mapping[str, str]] | None) -> None:
        """Give `call` the items of the spans inside it (decoded later, in the worker) and those
        `add_context` gave it; a run root also its run's source."""
        items = [Item(at, None, (text,), len(text)) for at, text in added]
        if trace is not None:
            span_id = span.context.span_id
            found, call.dropped = self.traces.items_under(trace, span_id, tool_content)
            items.extend(found)
            if trace.marks and any(is_run_scoped(o) for o in call.scorers):
                call.run_source = self.traces.run_source(trace, span_id, tool_content)
        call.items = items

    def may_be_root(self, trace_id: int, span_id: int) -> bool:
        """Whether the agent call `span_id`, still open, may be its run's root: no other agent
        span of its trace is open."""
        trace = self.kept.get(trace_id)
        return trace is None or not trace.agents - {span_id}

    def _recognised(self, span: ReadableSpan, trace: TraceSpans | None
                    ) -> RecognisedCall | None:
        """The agent call a finished span of another instrumentation records, in a trace a
        scorer may sample and outside `run_evals` (which scores its own calls); None else."""
        context = span.context
        if (context is None or not context.trace_flags.sampled
                or context.trace_id & RANDOMNESS_MASK < self.read_threshold):
            return None  # no scorer samples this trace
        scope = span.instrumentation_scope
        if scope is not None and scope.name.startswith("tracescore"):
            return None  # our own agent spans were decided by the listener
        attributes = span.attributes or {}
        if sc.TS_JUDGE in attributes:
            return None  # a judge's own call (`_judge_spans`): never scored
        found = self.read_agent(span, trace, attributes)
        if found is None or otel_context.get_value(sc.CTX_EVAL_RUN_ID) is not None:
            return None
        return found

    def read_agent(self, span: ReadableSpan, trace: TraceSpans | None,
                   attributes: Mapping[str, Any]) -> RecognisedCall | None:
        """The agent call a finished span of another instrumentation records: by its markers,
        else (with its `trace`) by the trace's shape; from the LLM calls below it when it has no
        content of its own; None when it is no agent call or cannot be read (then counted)."""
        reader, span_id = self.reader, span.context.span_id
        found: Any = None
        if not reader.watched.isdisjoint(attributes):
            events, _ = self.log_content.joined(  # and as log records (`_log_processor`)
                (span.context.trace_id, span_id), [(e.name, e.attributes) for e in span.events])
            found, attributes = reader.read(  # content some instrumentations record as events
                span.name, attributes, events, contentless=trace is not None)
        if trace is not None:  # the parent as the gateway sees it (a remote one too)
            parent_id = span.parent.span_id if span.parent is not None else None
            found = reader.settle(self.traces, trace, span_id, parent_id, _KINDS[span.kind.value],
                                  span.name, found, attributes)
        if isinstance(found, Unreadable) and otel_context.get_value(sc.CTX_EVAL_RUN_ID) is None:
            # counted, and logged once per framework and reason
            self._metrics.unreadable(found.framework, found.reason)
            note_unreadable(found, span.name, attributes)
        return found if isinstance(found, RecognisedCall) else None


def attributes_of(span: ReadableSpan) -> Mapping[str, Any]:
    """The span's attributes; for SDK spans the plain dict behind them (read only here): each
    lookup through the public read-only view costs ~1 us, several per ended span."""
    plain = getattr(getattr(span, "_attributes", None), "_dict", None)
    return plain if isinstance(plain, dict) else (span.attributes or {})


def ours(span: ReadableSpan) -> bool:
    """An agent span of tracescore's own decorators."""
    scope = span.instrumentation_scope
    return (scope is not None and scope.name.startswith("tracescore")
            and attributes_of(span).get(sc.GEN_AI_OPERATION_NAME) == sc.OP_INVOKE_AGENT)
