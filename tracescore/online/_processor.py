"""`ScoringSpanProcessor`: the OpenTelemetry SDK front door of online scoring, a translator from
SDK callbacks to the scoring core (`_core`) and from its results back to exported spans.

- `_consider`, called by the agent-call listener all processors share (`_listener`), decides
  sampling for our own `@agent` calls as they finish (no I/O) and stashes a candidate by span id;
- `on_start` / `on_end` feed the spans of traces a scorer may sample to `SdkTraces` (tool calls,
  context, run steps; other instrumentations' agent spans read with `recognise`);
- `on_end` hands a candidate's span to the core, which sends it downstream with its score events
  (`Downstream`) once its span-sink scorers are done. Spans without a candidate go downstream at
  once (one dict lookup).

Every span reaches the downstream processor exactly once, whatever happens to its scoring.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from tracescore._exceptions import ConfigurationError
from tracescore._guard import Guard
from tracescore.instrument._calls import AgentCall
from tracescore.online._conversations import (
    ConversationOptions,
    as_conversation_options,
)
from tracescore.online._core import ScoringCore
from tracescore.online._downstream import Downstream
from tracescore.online._jobs import Call
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
from tracescore.online._sdk_traces import SdkTraces, attributes_of
from tracescore.online.intake import (
    EMPTY,
    GENAI,
    RecognisedCall,
    TraceCollector,
    TraceInput,
    TraceLimits,
    TraceSpans,
    as_recognisers,
    as_trace_limits,
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
        recognisers = list(as_recognisers(recognise, "ScoringSpanProcessor recognise"))
        if score_genai_spans and GENAI not in recognisers:
            recognisers.append(GENAI)
        # never into the user's code: failures counted by site, each site logged once
        guard = Guard(_log)
        self._downstream = downstream
        self._downstream_on_ending = getattr(downstream, "_on_ending", None)
        self._out = out = Downstream(downstream, guard)
        self._core = ScoringCore(online, options, export=out.export, carrier=out.carrier,
                                 trace_limits=as_trace_limits(trace_limits),
                                 metrics=OnlineMetrics(meter_provider),
                                 logger_provider=logger_provider, sinks=sinks,
                                 conversations=as_conversation_options(conversations),
                                 conversation_carrier=out.conversation_carrier,
                                 judge_spans=out.judge_spans, guard=guard)
        self._max_candidates = max(1024, 4 * queue_size)
        self._run_scope = has_run_scope(online)  # run-scope scorers score at a run's root only
        self._follow = SdkTraces(tuple(recognisers), self._core.trace_limits,
                                 self._max_candidates, run_scope=self._run_scope,
                                 metrics=self._core.metrics, guard=guard)
        self._recognisers = self._follow.recognisers
        self.log_content = self._follow.log_content  # read by `ScoringLogRecordProcessor`
        # conversation scorers: every agent call with a conversation id is a turn (None: none)
        self._conversations = (self._core.conversations.tracker
                               if self._core.conversations is not None else None)
        # every agent call may be a turn of a conversation (sampled by its id, not the trace's)
        self._min_threshold = self._follow.read_threshold = (
            0 if self._conversations is not None else self._core.threshold)
        # traces are collected only where a scorer that reads tool calls or context (or an agent
        # span read from its LLM calls) may sample: the lowest rejection threshold among those
        readers = [o.threshold for o in online if reads_trace(o.scorer) or is_run_scoped(o)]
        if self._follow.contentless:
            readers.append(self._core.threshold)
        self._trace_threshold = self._follow.trace_threshold = min(readers, default=_NEVER)
        self._guard_start = guard.site("trace_start", "tracescore: could not follow an agent "
                                       "call's tool calls")  # scored without them
        self._guard_collect = guard.site("trace_input", "tracescore: could not collect an agent "
                                         "call's tool calls and context")
        self._guard_offer = guard.site("offer", "tracescore: could not consider an offered "
                                       "agent span")  # forwarded as it is
        self._guard_recognise = guard.site("recognise", "tracescore: could not read an agent "
                                           "span for scoring")  # exported unscored
        self._guard_flush = guard.site("flush", "tracescore: downstream force_flush failed")
        self._guard_shutdown = guard.site("shutdown", "tracescore: downstream processor "
                                          "shutdown failed")
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
        self._follow.reset()
        self._kept = self._follow.kept  # empty: no agent call running that a scorer may sample

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
                self._follow.start(span, context.trace_id, context.span_id)
        self._downstream.on_start(span, parent_context=parent_context)

    def _on_ending(self, span: Span) -> None:
        on_ending = self._downstream_on_ending
        if on_ending is not None:
            on_ending(span)

    def on_end(self, span: ReadableSpan) -> None:
        if not (self._candidates or self._recognisers):  # no candidate possible: on at once
            if self._kept or self._follow.shapes:
                self._follow.end(span)
            self._downstream.on_end(span)
            return
        context = span.context
        candidate = None
        if self._candidates and context is not None:
            candidate = self._candidates.pop((context.trace_id, context.span_id), None)
        trace, found = self._follow.span_ended(span, read=candidate is None)
        if found is not None:
            with self._guard_recognise:  # exported unscored rather than not at all
                candidate = self._recognised_candidate(span, trace, found)
        if candidate is None:
            self._downstream.on_end(span)
            return
        call = candidate.call
        if self._run_scope:  # a call that is not its run's root: no run-scope scorer
            call.scorers, waiting = keep_run_scorers(call.scorers, is_run_root(trace))
            self._core.release_budgets(waiting)
            if not call.scorers:
                self._downstream.on_end(span)
                return
        if (trace is not None and (trace.items or trace.dropped or trace.marks)
                ) or candidate.added:
            with self._guard_collect:  # scored without them rather than not at all
                self._follow.collect(span, trace, call, candidate.added,
                                     candidate.tool_content)
        self._core.submit(_key(span), call, span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait (bounded) for pending scoring, export every held span, flush downstream."""
        timeout = max(0, timeout_millis) / 1000
        deadline = time.monotonic() + timeout
        idle = self._core.flush(timeout)
        remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
        flushed: Any = False
        with self._guard_flush:
            flushed = self._downstream.force_flush(remaining_ms)
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
            self._core.release_budgets(candidate.call.scorers)
        wait = self._core.options.shutdown_timeout_s
        if timeout_millis is not None:
            wait = min(wait, max(0, timeout_millis) / 1000 * 0.8)
        self._core.close(wait)
        with self._guard_shutdown:
            self._downstream.shutdown()
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
            self._out.resource = getattr(span, "resource", None)
            self._conversations.offer(call, attributes_of(span),  # type: ignore[arg-type]
                                      context.trace_id,
                                      context.span_id)
        randomness = context.trace_id & RANDOMNESS_MASK
        if randomness < self._min_threshold or not span.is_recording():
            return  # no scorer samples this trace: the common, cheap case
        scope = None
        if self._run_scope and not self._follow.may_be_root(context.trace_id, context.span_id):
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
            self._core.release_budgets(oldest.call.scorers)

    def _recognised_candidate(self, span: ReadableSpan, trace: TraceSpans | None,
                              found: RecognisedCall) -> _Candidate | None:
        """A candidate from another instrumentation's agent span (opt-in: `recognise`), read by
        `SdkTraces.span_ended`: offered as a conversation turn, given the scorers that sample it."""
        context = span.context
        attributes = span.attributes or {}
        call = AgentCall(
            span=span,  # type: ignore[arg-type]
            name=found.agent, input=found.input, output=found.output,
            ground_truth=found.ground_truth, attributes=attributes,
        )
        if self._conversations is not None:
            self._out.resource = span.resource
            self._conversations.offer(call, attributes, context.trace_id, context.span_id)
        only = "call" if self._run_scope and not is_run_root(trace) else None
        chosen = self._core.choose(call, context.trace_id & RANDOMNESS_MASK, scope=only)
        if not chosen:
            return None
        return _Candidate(Call(call.input, call.output, call.ground_truth, call.name, chosen))

    def _after_fork(self) -> None:
        # Held spans and candidates belong to the parent, which exports them; the providers
        # that feed us (owners) are the same objects in the child.
        owners, last = self._owners, self._last_owner
        self._init_state()
        self._owners, self._last_owner = owners, last
        self._core.after_fork()


def _key(span: ReadableSpan) -> tuple[int, int]:
    context = span.context
    return context.trace_id, context.span_id


# --- what a processor holds, for the project's own tests and benchmarks (not API) -------------------
def core_of(processor: ScoringSpanProcessor) -> ScoringCore:
    """The processor's scoring core: its worker lanes, hold table and scoring process."""
    return processor._core


def collector_of(processor: ScoringSpanProcessor) -> TraceCollector:
    """The traces it collects now: those with an agent call running that a scorer may sample."""
    return processor._follow.traces


def stashed(processor: ScoringSpanProcessor) -> int:
    """Sampled agent calls of ours waiting for their span to end."""
    return len(processor._candidates)
