"""`ScoringSpanProcessor`: the OpenTelemetry SDK front door of online scoring.

A thin adapter around `ScoringCore` (`_core`), which chooses, runs and delivers the scorers and
holds spans for the span sink. This module does what is specific to SDK spans:

- `_consider`, called by the agent-call listener all processors share (`_listener`), decides
  sampling for our own `@agent` calls as they finish (no I/O) and stashes a candidate by span id;
- `on_start` / `on_end` feed the `TraceCollector` with the spans of traces a scorer may sample
  (tool calls and context of the agent calls in them) and read other instrumentations' agent
  spans (`recognise`);
- `on_end` hands a candidate's span to the core, which sends it downstream (`_export`), with its
  score events, once its span-sink scorers are done. Spans without a candidate go downstream at
  once (one dict lookup).

Every span reaches the downstream processor exactly once, whatever happens to its scoring.

(About 530 lines: the public class documents its thirteen options; what remains is the SDK side
only: the intake of our own calls, reading other instrumentations' spans, `offer`.)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError
from tracescore.instrument._calls import (
    AgentCall,
)
from tracescore.online._conversation_scope import conversation_carrier_span
from tracescore.online._conversations import (
    ConversationOptions,
    Turn,
    as_conversation_options,
)
from tracescore.online._core import Call, ScoringCore, release_budgets
from tracescore.online._delivery import ScoreRun
from tracescore.online._events import EventPayload
from tracescore.online._judge_spans import JudgeSpan, readable_span
from tracescore.online._listener import LISTENERS
from tracescore.online._metrics import OnlineMetrics
from tracescore.online._options import OnlineScorer, ProcessorOptions, as_online_scorers
from tracescore.online._records import ResultSink
from tracescore.online._runs_tracker import (
    has_run_scope,
    is_run_root,
    is_run_scoped,
    keep_run_scorers,
)
from tracescore.online._sampling import RANDOMNESS_MASK
from tracescore.online._sinks import carrier_span, with_events
from tracescore.online.intake import (
    EMPTY,
    GENAI,
    AgentReader,
    Item,
    LogContent,
    RecognisedCall,
    Recogniser,
    SdkSpanView,
    TraceCollector,
    TraceInput,
    TraceLimits,
    TraceSpans,
    Unreadable,
    as_recognisers,
    as_trace_limits,
    in_process,
    note_unreadable,
    starts_llm_call,
)
from tracescore.scoring._base import reads_trace

_log = logging.getLogger("tracescore")
_MISSING: Any = object()
_NEVER = 1 << 56  # above every trace's randomness


@dataclass(slots=True)
class _Candidate:
    """A sampled agent call waiting for its span to end."""

    call: Call
    added: tuple[tuple[int, str], ...] = ()  # (time ns, text) given by `add_context`
    tool_content: Mapping[int, Mapping[str, str]] | None = None  # kept off spans (capture off)


class ScoringSpanProcessor(SpanProcessor):
    """Wraps the export processor and scores sampled agent spans before or beside their export.

    `downstream`: the processor that exports (e.g. `BatchSpanProcessor(OTLPSpanExporter())`).
    `scorers`: `Scorer` or `OnlineScorer` objects (a bare scorer means rate 1, span sink).
    `max_wait_s`: longest a span is held for its scores; then it is exported unscored.
    `max_held_spans`: most spans held at once; beyond, spans are exported unscored.
    `queue_size` / `concurrency`: jobs waiting / scoring at once in the background worker.
    `shutdown_timeout_s`: how long shutdown waits for pending scoring before exporting.
    `recognise`: also score agent spans of other instrumentations, read by these recognisers
    (`build_recognisers(...)`, built-in convention names such as "openinference", or mappings);
    an agent span of theirs without content of its own is read from the LLM spans below it.
    `score_genai_spans`: shorthand for `recognise=["genai"]` (GenAI semconv `invoke_agent` spans,
    input/output from `gen_ai.input.messages` / `gen_ai.output.messages`).
    `isolation`: "auto" (default) runs scorers that call a judge in one scoring process (the
    judge's CPU work then never holds the agent's GIL) and the others in the worker thread;
    "process" runs every scorer there, "thread" none. Scorers or jobs that cannot be pickled,
    and all of them when the process cannot start, run in the worker thread.
    `meter_provider` / `logger_provider`: for metrics and the log sink (default: the global ones).
    `sinks`: result sink objects by name, e.g. `{"phoenix": PhoenixSink(endpoint=...)}`; a sink
    a scorer names without an object here is built from the environment. The processor flushes
    and shuts them down with itself; `stats()` reports theirs as `<name>.<counter>`.
    `trace_limits`: bounds of the tool calls and context collected for a scored agent call from
    the spans that ran inside it (`TraceLimits` or a mapping of its fields); collected only in
    traces a scorer may sample.
    `conversations`: when scorers of the conversation scope score a conversation
    (`ConversationOptions` or a mapping of its fields: `quiet_s`, `max_turns`, bounds,
    `id_attributes`).
    """

    def __init__(self, downstream: SpanProcessor, scorers: Sequence[Any] | Any, *,
                 max_wait_s: float = 30.0, max_held_spans: int = 2048, queue_size: int = 1000,
                 concurrency: int = 8, shutdown_timeout_s: float = 30.0,
                 score_genai_spans: bool = False, recognise: Sequence[Any] = (),
                 isolation: str = "auto", meter_provider: Any = None, logger_provider: Any = None,
                 sinks: Mapping[str, ResultSink] | None = None,
                 trace_limits: TraceLimits | Mapping[str, Any] | None = None,
                 conversations: ConversationOptions | Mapping[str, Any] | None = None
                 ) -> None:
        if not callable(getattr(downstream, "on_end", None)):
            raise ConfigurationError(
                f"ScoringSpanProcessor needs a downstream SpanProcessor, got {downstream!r}"
            )
        online = as_online_scorers(scorers)
        if not online:
            raise ConfigurationError("ScoringSpanProcessor needs at least one scorer")
        options = ProcessorOptions(
            max_wait_s=max_wait_s, max_held_spans=max_held_spans, queue_size=queue_size,
            concurrency=concurrency, shutdown_timeout_s=shutdown_timeout_s,
            score_genai_spans=score_genai_spans, isolation=isolation,
        )
        limits = as_trace_limits(trace_limits)
        recognisers = list(as_recognisers(recognise, "ScoringSpanProcessor recognise"))
        if score_genai_spans and GENAI not in recognisers:
            recognisers.append(GENAI)
        self._recognisers: tuple[Recogniser, ...] = tuple(recognisers)
        self._reader = AgentReader(self._recognisers)  # one outcome per agent-like span
        self.log_content = LogContent()  # content log records by span (`_log_processor`)
        self._downstream = downstream
        self._downstream_on_ending = getattr(downstream, "_on_ending", None)
        self._core = ScoringCore(online, options, export=self._export, carrier=self._carrier,
                                 trace_limits=limits, metrics=OnlineMetrics(meter_provider),
                                 logger_provider=logger_provider, sinks=sinks,
                                 conversations=as_conversation_options(conversations),
                                 conversation_carrier=self._conversation_carrier,
                                 judge_spans=self._judge_spans)
        # conversation scorers: every agent call with a conversation id is a turn (None: none)
        self._conversations = (self._core.conversations.tracker
                               if self._core.conversations is not None else None)
        self._resource: Any = None  # of the agent spans seen (for conversation carriers)
        # agent spans without content of their own are read from the LLM calls below them
        self._contentless = self._reader.contentless
        self._shapes = bool(self._contentless)  # model calls found by shape (`_shaped`)
        self._markers = self._reader.chain_markers
        # every agent call may be a turn of a conversation (sampled by its id, not the trace's)
        self._min_threshold = 0 if self._conversations is not None else self._core.threshold
        # traces are collected only where a scorer that reads tool calls or context (or an agent
        # span read from its LLM calls) may sample: the lowest rejection threshold among those
        readers = [o.threshold for o in online if reads_trace(o.scorer) or is_run_scoped(o)]
        self._run_scope = has_run_scope(online)  # run-scope scorers score at a run's root only
        if self._contentless:
            readers.append(self._core.threshold)
        self._trace_threshold = min(readers, default=_NEVER)
        self._max_candidates = max(1024, 4 * queue_size)
        # never into the user's code: failures counted by site, each site logged once
        guard = self._core.guard
        self._guard_start = guard.site("trace_start", "tracescore: could not follow an agent "
                                       "call's tool calls")  # scored without them
        self._guard_collect = guard.site("trace_input", "tracescore: could not collect an agent "
                                         "call's tool calls and context")
        self._guard_offer = guard.site("offer", "tracescore: could not consider an offered "
                                       "agent span")  # forwarded as it is
        self._guard_events = guard.site("events", "tracescore: could not attach score events")
        self._init_state()
        self._shutdown = False
        LISTENERS.register(self)

    def _init_state(self) -> None:
        # keyed by (trace id, span id): span ids need only be unique within their trace
        self._candidates: dict[tuple[int, int], _Candidate] = {}
        self._lock = threading.Lock()
        self._owners: set[object] = set()
        self._last_owner: object = _MISSING
        # traces with an agent call running that a scorer may sample: their tool/context spans
        self._traces = in_process(self._core.trace_limits, self._max_candidates)
        self._kept = self._traces.kept  # empty: no agent call running that a scorer may sample

    @property
    def scorers(self) -> tuple[OnlineScorer, ...]:
        """The registered online scorers."""
        return self._core.scorers

    def stats(self) -> dict[str, int]:
        """Counters (sampled, scored, failed, dropped, dropped.<reason>, held_timeout,
        unreadable.<framework>.<reason>: agent-like spans `recognise` could not read) and gauges
        (held, queued, running) of this processor."""
        return self._core.stats()

    # --- SpanProcessor ----------------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        owner = getattr(span, "_span_processor", None)
        if owner is not self._last_owner:  # remember which providers feed us (cheap: usually one)
            self._last_owner = owner
            self._owners.add(owner)
        context = span.context
        if (context is not None and context.trace_flags & 1
                and context.trace_id & RANDOMNESS_MASK >= self._trace_threshold):
            with self._guard_start:
                self._track_start(span, context.trace_id, context.span_id)
        self._downstream.on_start(span, parent_context=parent_context)

    def _on_ending(self, span: Span) -> None:
        on_ending = self._downstream_on_ending
        if on_ending is not None:
            on_ending(span)

    def on_end(self, span: ReadableSpan) -> None:
        trace = self._track_end(span) if self._kept or self._shapes else None
        if self._candidates or self._recognisers:  # else: no candidate possible, export at once
            candidate = self._candidate_of(span, trace)
            if candidate is not None:
                if self._run_scope and not self._at_root(candidate, trace):
                    self._downstream.on_end(span)
                    return
                if (trace is not None and (trace.items or trace.dropped or trace.marks)
                        ) or candidate.added:
                    self._collect(span, trace, candidate)
                self._core.submit(_key(span), candidate.call, span)
                return
        self._downstream.on_end(span)

    # --- tool calls and context of agent calls (sampled traces only) ----------------------------
    def _track_start(self, span: Span, trace_id: int, span_id: int) -> None:
        """An agent span starting in a trace a scorer may sample: collect that trace's spans."""
        attributes = _attributes_of(span)
        operation = attributes.get(sc.GEN_AI_OPERATION_NAME)
        # an LLM call: the span above it that ends last may be its agent call (`_structure`)
        loop = bool(self._contentless) and starts_llm_call(attributes)
        if operation is not None:
            if not loop and operation != sc.OP_INVOKE_AGENT and operation != sc.OP_INVOKE_WORKFLOW:
                return
        elif not self._recognisers or (not loop and self._markers.isdisjoint(attributes)
                                       and not self._contentless.accepts(span.name, attributes)):
            return
        if sc.TS_EVAL_RUN_ID in attributes or otel_context.get_value(sc.CTX_EVAL_RUN_ID):
            return  # run_evals scores its own calls (its item span, and agents inside it)
        if loop:
            self._traces.open_loop(trace_id)
        else:
            self._traces.open(trace_id, span_id)

    def _track_end(self, span: ReadableSpan) -> TraceSpans | None:
        """Remember a finished span of a collected trace; the trace when `span` is its agent."""
        context = span.context
        if context is None:
            return None
        if context.trace_id not in self._kept and not self._loop_by_shape(span, context):
            return None
        attributes = _attributes_of(span)
        if len(self.log_content):  # a model call whose messages are logged
            attributes = self.log_content.with_logged((context.trace_id, context.span_id),
                                                      attributes)
        parent = span.parent
        return self._traces.end_span(SdkSpanView(span), attributes,
                                     llm=bool(self._contentless), marks=self._run_scope,
                                     root=parent is None or parent.is_remote)

    def _loop_by_shape(self, span: ReadableSpan, context: Any) -> bool:
        """A model call with no marker (`intake._shaped`) ended in a trace a scorer may sample:
        keep its trace until its local root ends (the span above it may be its agent call)."""
        if not (self._shapes and context.trace_flags & 1
                and context.trace_id & RANDOMNESS_MASK >= self._trace_threshold
                and self._reader.shaped_call(_attributes_of(span))):
            return False
        self._traces.open_loop(context.trace_id)
        return True

    def _collect(self, span: ReadableSpan, trace: TraceSpans | None,
                 candidate: _Candidate) -> None:
        """Give `candidate` the items of the spans inside its call (decoded later, in the worker)."""
        with self._guard_collect:  # scored without them rather than not at all
            call = candidate.call
            items = [Item(at, None, (text,), len(text)) for at, text in candidate.added]
            if trace is not None:
                span_id = span.context.span_id
                found, call.dropped = self._traces.items_under(trace, span_id,
                                                               candidate.tool_content)
                items.extend(found)
                if trace.marks and any(is_run_scoped(o) for o in call.scorers):
                    call.run_source = self._traces.run_source(trace, span_id,
                                                              candidate.tool_content)
            call.items = items

    def _at_root(self, candidate: _Candidate, trace: TraceSpans | None) -> bool:
        """Drop the run-scope scorers of a call that is not its run's root; False when no
        scorer is left for it."""
        call = candidate.call
        call.scorers, waiting = keep_run_scorers(call.scorers, is_run_root(trace))
        release_budgets(waiting)
        return bool(call.scorers)

    def _candidate_of(self, span: ReadableSpan, trace: TraceSpans | None = None
                      ) -> _Candidate | None:
        candidate = None
        if self._candidates:
            context = span.context
            if context is not None:
                candidate = self._candidates.pop((context.trace_id, context.span_id), None)
        if trace is not None and _ours(span):  # an agent call of ours: the LLM calls below
            self._traces.mark_agent(trace, span.context.span_id)  # are its own
        if candidate is None and self._recognisers:
            candidate = self._recognised_candidate(span, trace)
        return candidate

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait (bounded) for pending scoring, export every held span, flush downstream."""
        timeout = max(0, timeout_millis) / 1000
        deadline = time.monotonic() + timeout
        idle = self._core.flush(timeout)
        remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
        try:
            flushed = self._downstream.force_flush(remaining_ms)
        except Exception:  # noqa: BLE001
            self._core.log_once("flush", "tracescore: downstream force_flush failed",
                                exc_info=True)
            flushed = False
        return idle and flushed is not False

    def shutdown(self, timeout_millis: int | None = None) -> None:
        """Wait (bounded) for pending scoring, export every held span (unscored ones with reason
        "shutdown"), shut down downstream. Idempotent.

        The wait for scoring is `shutdown_timeout_s`, or less when `timeout_millis` is given.
        """
        with self._lock:
            if self._shutdown:
                return
            self._shutdown = self._core.closing = True
        LISTENERS.unregister(self)
        with self._lock:
            orphans = list(self._candidates.values())
            self._candidates.clear()
        for candidate in orphans:
            release_budgets(candidate.call.scorers)
        wait = self._core.options.shutdown_timeout_s
        if timeout_millis is not None:
            wait = min(wait, max(0, timeout_millis) / 1000 * 0.8)
        self._core.close(wait)
        try:
            self._downstream.shutdown()
        except Exception:  # noqa: BLE001
            _log.warning("tracescore: downstream processor shutdown failed", exc_info=True)
        self._core.stop_isolation(wait)

    def offer(self, span: ReadableSpan, call: RecognisedCall, trace: TraceInput = EMPTY) -> bool:
        """Score a finished span recognised as an agent call outside this process (e.g. read
        from another service's export): sampling, filters, limits, holding and sinks as for
        in-process calls. `trace`: the call's tool calls and context, read by the caller from the spans of
        its trace. True when a scorer took it; else the span went downstream at once. Never
        raises.
        """
        context = span.context
        if context is None or self._shutdown:
            self._core.export(span, ())
            return False
        agent_call = AgentCall(
            span=span,  # type: ignore[arg-type]
            name=call.agent, input=call.input, output=call.output,
            ground_truth=call.ground_truth, attributes=span.attributes or {},
        )
        return self._core.take((context.trace_id, context.span_id), agent_call, span, trace,
                               threshold=self._min_threshold)

    def offer_unscored(self, span: ReadableSpan, agent: str, reason: str) -> None:
        """Export a span the caller recognised as an agent call but could not read (e.g. its LLM
        calls never arrived at the gateway), with an 'unscored' event per scorer that would have
        sampled it (trace id, `agents` and `attributes` filters), each counted as dropped with
        `reason`. Never raises."""
        scorers: dict[str, OnlineScorer] = {}
        with self._guard_offer:
            context = span.context
            if context is not None:
                scorers = self._core.would_sample(context.trace_id & RANDOMNESS_MASK, agent,
                                                  span.attributes or {})
        self._core.unscored(span, scorers, reason, agent)

    # --- candidates (agent thread, hot path) ------------------------------------------------------
    def _consider(self, call: AgentCall) -> None:
        """Listener body: decide sampling for a finished agent call; stash a candidate if chosen."""
        span = call.span
        owner = getattr(span, "_span_processor", None)
        if owner is not self._last_owner and owner not in self._owners:
            return  # a span of a provider that never started a span through us: no on_end here
        if call.error is not None:
            return
        context = span.get_span_context()
        if not context.trace_flags & 1:  # not sampled by the tracer: never scored
            return
        if self._conversations is not None:  # a deque append; the rest on the core's timer
            self._resource = getattr(span, "resource", None)
            self._conversations.offer(call, _attributes_of(span),  # type: ignore[arg-type]
                                      context.trace_id,
                                      context.span_id)
        randomness = context.trace_id & RANDOMNESS_MASK
        if randomness < self._min_threshold or not span.is_recording():
            return  # no scorer samples this trace: the common, cheap case
        scope = None
        if self._run_scope and not self._may_be_root(context.trace_id, context.span_id):
            scope = "call"  # a sub-agent: run-scope scorers wait for its root
        chosen = self._core.choose(call, randomness, scope=scope)
        if chosen:
            self._stash((context.trace_id, context.span_id), _Candidate(
                Call(call.input, call.output, call.ground_truth, call.name, chosen,
                     unwrapped=True),  # the decorator's own objects: scored as given
                call.context, call.tool_content,
            ))

    def _stash(self, key: tuple[int, int], candidate: _Candidate) -> None:
        candidates = self._candidates
        candidates[key] = candidate
        if len(candidates) > self._max_candidates:  # spans that never reached on_end
            try:
                oldest = candidates.pop(next(iter(candidates)))
            except (StopIteration, KeyError, RuntimeError):
                return
            release_budgets(oldest.call.scorers)

    def _may_be_root(self, trace_id: int, span_id: int) -> bool:
        """Whether the agent call `span_id`, still open, may be its run's root: no other agent
        span of its trace is open."""
        trace = self._kept.get(trace_id)
        return trace is None or not trace.agents - {span_id}

    def _unreadable(self, found: Unreadable, name: str, attributes: Mapping[str, Any]) -> None:
        """Count and log (once per framework and reason) an agent-like span the chain rejected."""
        if otel_context.get_value(sc.CTX_EVAL_RUN_ID) is None:
            self._core.metrics.unreadable(found.framework, found.reason)
            note_unreadable(found, name, attributes)

    def _recognised_candidate(self, span: ReadableSpan, trace: TraceSpans | None = None
                              ) -> _Candidate | None:
        """A candidate from another instrumentation's agent span (opt-in: `recognise`); an
        agent span without content of its own is read from the LLM calls of `trace` below it."""
        try:
            context = span.context
            if context is None or not context.trace_flags.sampled:
                return None
            randomness = context.trace_id & RANDOMNESS_MASK
            if randomness < self._min_threshold:
                return None  # no scorer samples this trace
            scope = span.instrumentation_scope
            if scope is not None and scope.name.startswith("tracescore"):
                return None  # our own agent spans were decided by the listener
            attributes = span.attributes or {}
            if sc.TS_JUDGE in attributes:
                return None  # a judge's own call (`_judge_spans`): never scored
            found = self._read_agent(span, trace, attributes)
            if found is None:
                return None
            if otel_context.get_value(sc.CTX_EVAL_RUN_ID) is not None:
                return None  # ended inside run_evals, which scores its own calls
            call = AgentCall(
                span=span,  # type: ignore[arg-type]
                name=found.agent, input=found.input, output=found.output,
                ground_truth=found.ground_truth, attributes=attributes,
            )
            if self._conversations is not None:
                self._resource = span.resource
                self._conversations.offer(call, attributes, context.trace_id, context.span_id)
            only = "call" if self._run_scope and not is_run_root(trace) else None
            chosen = self._core.choose(call, randomness, scope=only)
            if not chosen:
                return None
            return _Candidate(Call(call.input, call.output, call.ground_truth, call.name, chosen))
        except Exception:  # noqa: BLE001
            self._core.log_once("recognise", "tracescore: could not read an agent span for "
                                "scoring", exc_info=True)
            return None

    def _read_agent(self, span: ReadableSpan, trace: TraceSpans | None,
                    attributes: Mapping[str, Any]) -> RecognisedCall | None:
        """The agent call a finished span of another instrumentation records: by its markers,
        else (with its `trace`) by the trace's shape; from the LLM calls below it when it has no
        content of its own; None when it is no agent call or cannot be read (then counted)."""
        reader, traces, span_id = self._reader, self._traces, span.context.span_id
        found: Any = None
        if not reader.watched.isdisjoint(attributes):
            events, _ = self.log_content.joined(  # and as log records (`_log_processor`)
                (span.context.trace_id, span_id), [(e.name, e.attributes) for e in span.events])
            found, attributes = reader.read(  # content some instrumentations record as events
                span.name, attributes, events, contentless=trace is not None)
        if trace is not None:  # the parent as the gateway sees it (a remote one too)
            parent_id = span.parent.span_id if span.parent is not None else None
            found = reader.settle(traces, trace, span_id, parent_id, _KINDS[span.kind.value],
                                  span.name, found, attributes)
        if isinstance(found, Unreadable):
            self._unreadable(found, span.name, attributes)
        return found if isinstance(found, RecognisedCall) else None

    # --- the core's front-door callbacks ----------------------------------------------------------
    def _export(self, span: ReadableSpan, events: Sequence[EventPayload]) -> None:
        """A span goes downstream, with the events that landed on it."""
        with self._guard_events:  # never lose the span over its events
            span = with_events(span, events)
        self._downstream.on_end(span)

    def _carrier(self, run: ScoreRun, end_ns: int) -> None:
        self._downstream.on_end(carrier_span(
            run.item, run.online.scorer_name, run.events, scored_ns=end_ns,
            agent_name=run.agent,
        ))

    def _conversation_carrier(self, run: ScoreRun, turns: Sequence[Turn], end_ns: int) -> None:
        self._downstream.on_end(conversation_carrier_span(run, turns, end_ns, self._resource))
        for judge in run.judge:  # the judge traced (straight downstream, as `_judge_spans`)
            self._downstream.on_end(readable_span(judge, self._resource))

    def _judge_spans(self, span: ReadableSpan, spans: Sequence[JudgeSpan]) -> None:
        for judge in spans:  # straight downstream: never a candidate of ours
            self._downstream.on_end(readable_span(judge, span.resource))

    def _after_fork(self) -> None:
        # Held spans and candidates belong to the parent, which exports them; the providers
        # that feed us (owners) are the same objects in the child.
        owners, last = self._owners, self._last_owner
        self._init_state()
        self._owners, self._last_owner = owners, last
        self._core.after_fork()


# --- helpers ----------------------------------------------------------------------------------------
def _attributes_of(span: ReadableSpan) -> Mapping[str, Any]:
    """The span's attributes; for SDK spans the plain dict behind them (read only here): each
    lookup through the public read-only view costs ~1 us, several per ended span."""
    plain = getattr(getattr(span, "_attributes", None), "_dict", None)
    return plain if isinstance(plain, dict) else (span.attributes or {})


_KINDS = ("internal", "server", "client", "producer", "consumer")  # SpanKind by value


def _ours(span: ReadableSpan) -> bool:
    """An agent span of tracescore's own decorators."""
    scope = span.instrumentation_scope
    return (scope is not None and scope.name.startswith("tracescore")
            and _attributes_of(span).get(sc.GEN_AI_OPERATION_NAME) == sc.OP_INVOKE_AGENT)


def _key(span: ReadableSpan) -> tuple[int, int]:
    context = span.context
    return context.trace_id, context.span_id


# --- what a processor holds, for the project's own tests and benchmarks (not API) -------------------
def core_of(processor: ScoringSpanProcessor) -> ScoringCore:
    """The processor's scoring core: its worker lanes, hold table and scoring process."""
    return processor._core


def collector_of(processor: ScoringSpanProcessor) -> TraceCollector:
    """The traces it collects now: those with an agent call running that a scorer may sample."""
    return processor._traces


def stashed(processor: ScoringSpanProcessor) -> int:
    """Sampled agent calls of ours waiting for their span to end."""
    return len(processor._candidates)
