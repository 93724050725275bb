"""`ScoringSpanProcessor`: samples finished agent calls, scores them in the background and
attaches the results before (span sink) or beside (carrier / log sinks) the agent span's export.

Flow: agent call ends -> listener decides sampling (no I/O) and stashes a candidate by span id
-> `on_end` turns a candidate into a job (holding the span for the span sink) -> the worker runs
the scorers -> sinks. Spans without a candidate go downstream at once (one dict lookup).
Every span reaches the downstream processor exactly once, whatever happens to its scoring.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace as trace_api
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from tracescore import _semconv as sc
from tracescore._content import finish_text
from tracescore._exceptions import ConfigurationError
from tracescore._suppress import suppressed
from tracescore.instrument._calls import (
    AgentCall,
    add_agent_call_listener,
    remove_agent_call_listener,
)
from tracescore.online import _diagnose as diagnose
from tracescore.online import _metrics as reasons
from tracescore.online._diagnose import Diagnoser
from tracescore.online._event_content import with_event_content
from tracescore.online._events import (
    EventPayload,
    error_message,
    error_type,
    evaluation_events,
    unscored_event,
)
from tracescore.online._isolation import ProcessRunner
from tracescore.online._llm_calls import contentless_reader, from_llm_calls, read_llm_call
from tracescore.online._metrics import OnlineMetrics
from tracescore.online._options import (
    OnlineScorer,
    ProcessorOptions,
    as_online_scorers,
    reference_fallback,
)
from tracescore.online._recognise import (
    GENAI,
    RecognisedCall,
    Recogniser,
    as_recognisers,
    recognise,
    recogniser_markers,
)
from tracescore.online._sampling import RANDOMNESS_MASK
from tracescore.online._sinks import (
    ResultSink,
    ScoreRecord,
    carrier_span,
    emit_log_records,
    result_sinks,
    with_events,
)
from tracescore.online._trace_input import (
    EMPTY,
    Item,
    TraceInput,
    TraceLimits,
    TraceSpans,
    as_trace_limits,
    gather,
    read_span,
)
from tracescore.online._worker import Worker
from tracescore.scoring._base import ScorerInput, evaluate_call

_log = logging.getLogger("tracescore")
_MISSING: Any = object()
_SCORING_SHARE = 0.8  # of a flush timeout spent waiting for pending scoring


@dataclass(slots=True)
class _Candidate:
    """A sampled agent call waiting for its span to end."""

    input: Any
    output: Any
    ground_truth: Any
    agent: str | None
    scorers: tuple[OnlineScorer, ...]
    trace: TraceInput | None = None  # tool calls and context (decoded by the first run)
    added: tuple[tuple[int, str], ...] = ()  # (time ns, text) given by `add_context`
    items: list[Item] | None = None  # what the spans inside the call recorded, as recorded
    tool_content: Mapping[int, Mapping[str, str]] | None = None  # kept off spans (capture off)
    dropped: bool = False  # its trace had more spans than `TraceLimits.max_spans`


@dataclass(slots=True)
class _Held:
    """An evaluated span held from export until its span-sink scorers finish."""

    span: ReadableSpan
    waiting: dict[str, OnlineScorer]
    deadline: float
    events: list[EventPayload] = field(default_factory=list)


@dataclass(slots=True)
class _Job:
    span: ReadableSpan
    candidate: _Candidate
    start_ns: int
    scorers: tuple[OnlineScorer, ...]  # this job's share of the candidate's scorers


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
    """

    def __init__(self, downstream: SpanProcessor, scorers: Sequence[Any] | Any, *,
                 max_wait_s: float = 30.0, max_held_spans: int = 2048, queue_size: int = 1000,
                 concurrency: int = 8, shutdown_timeout_s: float = 30.0,
                 score_genai_spans: bool = False, recognise: Sequence[Any] = (),
                 isolation: str = "auto", meter_provider: Any = None, logger_provider: Any = None,
                 sinks: Mapping[str, ResultSink] | None = None,
                 trace_limits: TraceLimits | Mapping[str, Any] | None = None) -> None:
        if not callable(getattr(downstream, "on_end", None)):
            raise ConfigurationError(
                f"ScoringSpanProcessor needs a downstream SpanProcessor, got {downstream!r}"
            )
        self._scorers = as_online_scorers(scorers)
        if not self._scorers:
            raise ConfigurationError("ScoringSpanProcessor needs at least one scorer")
        self._options = ProcessorOptions(
            max_wait_s=max_wait_s, max_held_spans=max_held_spans, queue_size=queue_size,
            concurrency=concurrency, shutdown_timeout_s=shutdown_timeout_s,
            score_genai_spans=score_genai_spans, isolation=isolation,
        )
        if isolation == "thread":  # judges run in this process: check them now, fully
            from tracescore.scoring._resolve import check_judge

            for online in self._scorers:
                judge = getattr(online.scorer, "judge", None)
                if judge is not None:
                    check_judge(judge)
        self._trace_limits = as_trace_limits(trace_limits)
        self._sinks = result_sinks(sorted({n for s in self._scorers for n in s.sinks}), sinks)
        self._downstream = downstream
        self._downstream_on_ending = getattr(downstream, "_on_ending", None)
        recognisers = list(as_recognisers(recognise, "ScoringSpanProcessor recognise"))
        if score_genai_spans and GENAI not in recognisers:
            recognisers.append(GENAI)
        self._recognisers: tuple[Recogniser, ...] = tuple(recognisers)
        # agent spans without content of their own are read from the LLM calls below them
        self._contentless = contentless_reader(self._recognisers)
        self._markers = recogniser_markers(self._recognisers)
        self._any_markers = self._markers | self._contentless.markers
        self._diagnose = Diagnoser(self._recognisers)  # agent-like spans the chain cannot read
        self._watched = self._any_markers | self._diagnose.keys
        self._min_threshold = min(s._threshold for s in self._scorers)
        self._max_candidates = max(1024, 4 * queue_size)
        self._metrics = OnlineMetrics(meter_provider)
        self._logger_provider = logger_provider
        self._worker = Worker(  # judged scorers
            queue_size=queue_size, concurrency=concurrency,
            tick_s=min(1.0, max(0.01, self._options.max_wait_s / 4)), on_tick=self._expire_held,
        )
        # scorers without a judge: a lane of their own, never behind slow judge calls
        self._fast = Worker(queue_size=queue_size, concurrency=concurrency,
                            name="tracescore-online-fast")
        self._isolation = ProcessRunner(isolation) if isolation != "thread" else None
        self._init_state()
        self._shutdown = False
        self._logged: set[str] = set()
        _register(self)

    def _init_state(self) -> None:
        # keyed by (trace id, span id): span ids need only be unique within their trace
        self._candidates: dict[tuple[int, int], _Candidate] = {}
        self._held: dict[tuple[int, int], _Held] = {}
        # runs of span-only scorers in progress, by span: cancelled once their span is exported
        self._inflight: dict[tuple[int, int], list[asyncio.Task[None]]] = {}
        self._lock = threading.Lock()
        # spans taken out of `_held` and not yet handed downstream; shutdown waits for them
        self._releasing = 0
        self._released = threading.Condition(self._lock)
        self._owners: set[object] = set()
        self._last_owner: object = _MISSING
        # traces with an agent call running that a scorer may sample: their tool/context spans
        self._traces: dict[int, TraceSpans] = {}
        self._traces_lock = threading.Lock()

    @property
    def scorers(self) -> tuple[OnlineScorer, ...]:
        """The registered online scorers."""
        return self._scorers

    def stats(self) -> dict[str, int]:
        """Counters (sampled, scored, failed, dropped, dropped.<reason>, held_timeout,
        unreadable.<framework>.<reason>: agent-like spans `recognise` could not read) and gauges
        (held, queued, running) of this processor."""
        counts = self._metrics.snapshot()
        for key in ("sampled", "scored", "failed", "dropped", "held_timeout"):
            counts.setdefault(key, 0)
        counts["held"] = len(self._held)
        counts["queued"] = self._worker.pending + self._fast.pending
        counts["running"] = self._worker.running + self._fast.running
        if self._isolation is not None:
            counts["in_thread"] = self._isolation.in_thread
        for name, sink in self._sinks.items():
            for key, value in _sink_stats(sink).items():
                counts[f"{name}.{key}"] = value
        return counts

    # --- SpanProcessor ----------------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        owner = getattr(span, "_span_processor", None)
        if owner is not self._last_owner:  # remember which providers feed us (cheap: usually one)
            self._last_owner = owner
            self._owners.add(owner)
        context = span.context
        if (context is not None and context.trace_flags & 1
                and context.trace_id & RANDOMNESS_MASK >= self._min_threshold):
            try:
                self._track_start(span, context.trace_id, context.span_id)
            except Exception:  # noqa: BLE001 - never into the user's code: scored without them
                self._log_once("trace_start", "tracescore: could not follow an agent call's "
                               "tool calls", exc_info=True)
        self._downstream.on_start(span, parent_context=parent_context)

    def _on_ending(self, span: Span) -> None:
        on_ending = self._downstream_on_ending
        if on_ending is not None:
            on_ending(span)

    def on_end(self, span: ReadableSpan) -> None:
        trace = self._track_end(span) if self._traces else None
        if self._candidates or self._recognisers:  # else: no candidate possible, export at once
            candidate = self._candidate_of(span, trace)
            if candidate is not None:
                if ((trace is not None and (trace.items or trace.dropped))
                        or candidate.added):
                    self._collect(span, trace, candidate)
                self._submit(span, candidate)
                return
        self._downstream.on_end(span)

    # --- tool calls and context of agent calls (sampled traces only) ----------------------------
    def _track_start(self, span: Span, trace_id: int, span_id: int) -> None:
        """An agent span starting in a trace a scorer may sample: collect that trace's spans."""
        attributes = _attributes_of(span)
        operation = attributes.get(sc.GEN_AI_OPERATION_NAME)
        if operation is not None:
            if operation != sc.OP_INVOKE_AGENT and operation != sc.OP_INVOKE_WORKFLOW:
                return
        elif not self._recognisers or (self._markers.isdisjoint(attributes)
                                       and not self._contentless.accepts(span.name, attributes)):
            return
        if sc.TS_EVAL_RUN_ID in attributes or otel_context.get_value(sc.CTX_EVAL_RUN_ID):
            return  # run_evals scores its own calls (its item span, and agents inside it)
        traces = self._traces
        with self._traces_lock:
            trace = traces.get(trace_id)
            if trace is None:
                if len(traces) >= self._max_candidates:  # agent spans that never ended
                    traces.pop(next(iter(traces)))
                trace = traces[trace_id] = TraceSpans(time.monotonic())
            trace.agents.add(span_id)

    def _track_end(self, span: ReadableSpan) -> TraceSpans | None:
        """Remember a finished span of a collected trace; the trace when `span` is its agent."""
        context = span.context
        if context is None:
            return None
        trace = self._traces.get(context.trace_id)
        if trace is None:
            return None
        try:
            attributes = _attributes_of(span)
            item = read_span(span.name, attributes, span.start_time or 0,
                             functools.partial(_error_of, span, attributes))
            llm = read_llm_call(attributes, span.start_time or 0) if self._contentless else None
        except Exception:  # noqa: BLE001 - a span we cannot read contributes nothing
            self._log_once("trace_input", "tracescore: could not read a tool or context span",
                           exc_info=True)
            item = llm = None
        parent = span.parent
        with self._traces_lock:
            trace.add(context.span_id, parent.span_id if parent is not None else None, item,
                      self._trace_limits.max_spans, llm)
            if context.span_id not in trace.agents:
                return None
            trace.agents.discard(context.span_id)
            if not trace.agents:
                self._traces.pop(context.trace_id, None)
            return trace

    def _collect(self, span: ReadableSpan, trace: TraceSpans | None,
                 candidate: _Candidate) -> None:
        """Give `candidate` the items of the spans inside its call (decoded later, in the worker)."""
        try:
            items = [Item(at, None, (text,), len(text)) for at, text in candidate.added]
            if trace is not None:
                with self._traces_lock:
                    items.extend(trace.under(span.context.span_id, candidate.tool_content))
                    candidate.dropped = trace.dropped > 0
            candidate.items = items
        except Exception:  # noqa: BLE001 - scored without them rather than not at all
            self._log_once("trace_input", "tracescore: could not collect an agent call's tool "
                           "calls and context", exc_info=True)

    def _trace_of(self, candidate: _Candidate) -> TraceInput:
        """The candidate's tool calls and context within the limits (worker side, cached)."""
        trace = candidate.trace
        if trace is None:
            try:
                trace = gather(candidate.items or (), self._trace_limits)
                if candidate.dropped and not trace.truncated:
                    trace = TraceInput(trace.tool_calls, trace.context, True)
            except Exception:  # noqa: BLE001 - scored without them rather than not at all
                self._log_once("trace_input", "tracescore: could not read an agent call's tool "
                               "calls and context", exc_info=True)
                trace = EMPTY
            candidate.trace = trace
        return trace

    def _candidate_of(self, span: ReadableSpan, trace: TraceSpans | None = None
                      ) -> _Candidate | None:
        candidate = None
        if self._candidates:
            context = span.context
            if context is not None:
                candidate = self._candidates.pop((context.trace_id, context.span_id), None)
        if candidate is None and self._recognisers:
            candidate = self._recognised_candidate(span, trace)
        return candidate

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait (bounded) for pending scoring, export every held span, flush downstream."""
        timeout = max(0, timeout_millis) / 1000
        deadline = time.monotonic() + timeout
        # scoring gets most of the time; the rest is kept for exporting what it released
        idle = self._wait_idle(timeout * _SCORING_SHARE)
        self._release_all(reasons.FLUSH)
        for sink in self._sinks.values():
            idle = self._call_sink(sink, "force_flush", deadline - time.monotonic()) and idle
        remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
        try:
            flushed = self._downstream.force_flush(remaining_ms)
        except Exception:  # noqa: BLE001
            self._log_once("flush", "tracescore: downstream force_flush failed", exc_info=True)
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
            self._shutdown = True
        _unregister(self)
        with self._lock:
            orphans = list(self._candidates.values())
            self._candidates.clear()
        for candidate in orphans:
            _release_budgets(candidate.scorers)
        wait = self._options.shutdown_timeout_s
        if timeout_millis is not None:
            wait = min(wait, max(0, timeout_millis) / 1000 * _SCORING_SHARE)
        deadline = time.monotonic() + wait
        self._wait_idle(wait)
        # a job stuck in blocking code cannot hold shutdown: held spans are released regardless
        for worker in (self._fast, self._worker):
            for never_run in worker.stop(timeout=min(0.5, wait)):
                job = never_run.args[0]  # type: ignore[attr-defined]
                self._count_shutdown_drop(job.candidate, job.scorers)
        self._release_all(reasons.SHUTDOWN)
        with self._lock:  # spans other threads are releasing must reach downstream before it closes
            self._released.wait_for(lambda: not self._releasing, timeout=max(wait, 1.0))
        for sink in self._sinks.values():  # what scoring left of the wait (sends take little)
            self._call_sink(sink, "shutdown", max(0.5, deadline - time.monotonic()))
        try:
            self._downstream.shutdown()
        except Exception:  # noqa: BLE001
            _log.warning("tracescore: downstream processor shutdown failed", exc_info=True)
        # last: a scoring process that does not answer its EOF (stuck in blocking code, or still
        # importing on a loaded machine) takes seconds to end, and a bounded shutdown (interpreter
        # exit) must not spend them before the held spans are out
        if self._isolation is not None:
            self._isolation.stop(timeout=min(2.0, max(wait, 0.5)))

    def _wait_idle(self, timeout: float) -> bool:
        """Wait for both lanes to be idle, `timeout` seconds in all."""
        deadline = time.monotonic() + timeout
        fast = self._fast.wait_idle(timeout)
        return self._worker.wait_idle(max(0.0, deadline - time.monotonic())) and fast

    def offer(self, span: ReadableSpan, call: RecognisedCall, trace: TraceInput = EMPTY) -> bool:
        """Score a finished span recognised as an agent call outside this process (the gateway,
        `tracescore rescore`): sampling, filters, limits, holding and sinks as for in-process
        calls. `trace`: the call's tool calls and context, read by the caller from the spans of
        its trace. True when a scorer took it; else the span went downstream at once. Never
        raises.
        """
        try:
            context = span.context
            chosen: tuple[OnlineScorer, ...] = ()
            if context is not None and not self._shutdown:
                randomness = context.trace_id & RANDOMNESS_MASK
                if randomness >= self._min_threshold:
                    agent_call = AgentCall(
                        span=span,  # type: ignore[arg-type]
                        name=call.agent, input=call.input, output=call.output,
                        ground_truth=call.ground_truth, attributes=span.attributes or {},
                    )
                    chosen = self._choose(agent_call, randomness)
        except Exception:  # noqa: BLE001
            self._log_once("offer", "tracescore: could not consider an offered agent span",
                           exc_info=True)
            chosen = ()
        if not chosen:
            self._export(span, ())
            return False
        self._submit(span, _Candidate(call.input, call.output, call.ground_truth, call.agent,
                                      chosen, trace))
        return True

    def offer_unscored(self, span: ReadableSpan, agent: str, reason: str) -> None:
        """Export a span the caller recognised as an agent call but could not read (e.g. its LLM
        calls never arrived at the gateway), with an 'unscored' event per scorer that would have
        sampled it (trace id, `agents` and `attributes` filters), each counted as dropped with
        `reason`. Never raises."""
        scorers: dict[str, OnlineScorer] = {}
        try:
            context = span.context
            attributes = span.attributes or {}
            if context is not None:
                randomness = context.trace_id & RANDOMNESS_MASK
                for online in self._scorers:
                    if randomness < online._threshold or (
                            online.agents is not None and agent not in online.agents):
                        continue
                    if all(_same_value(attributes.get(key, _MISSING), expected)
                           for key, expected in (online.attributes or {}).items()):
                        scorers[online.scorer_id] = online
        except Exception:  # noqa: BLE001 - forwarded as it is rather than not at all
            self._log_once("offer", "tracescore: could not consider an offered agent span",
                           exc_info=True)
        self._unscored(span, scorers, reason, agent)

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
        randomness = context.trace_id & RANDOMNESS_MASK
        if randomness < self._min_threshold or not span.is_recording():
            return  # no scorer samples this trace: the common, cheap case
        chosen = self._choose(call, randomness)
        if chosen:
            self._stash((context.trace_id, context.span_id), _Candidate(
                call.input, call.output, call.ground_truth, call.name, chosen,
                added=call.context, tool_content=call.tool_content,
            ))

    def _choose(self, call: AgentCall, randomness: int) -> tuple[OnlineScorer, ...]:
        chosen: list[OnlineScorer] = []
        for online in self._scorers:
            if randomness < online._threshold or (
                online._filtered and not self._matches(online, call)
            ):
                continue
            if online._limiter is not None and not online._limiter.try_acquire():
                self._metrics.dropped(online.scorer_id, call.name, reasons.RATE_LIMITED)
                continue
            if online._budget is not None and not online._budget.try_reserve():
                self._metrics.dropped(online.scorer_id, call.name, reasons.BUDGET)
                continue
            chosen.append(online)
        return tuple(chosen)

    def _matches(self, online: OnlineScorer, call: AgentCall) -> bool:
        agents = online.agents
        if agents is not None and call.name not in agents:
            return False
        if online.attributes:
            span_attributes = getattr(call.span, "attributes", None) or {}
            for key, expected in online.attributes.items():
                value = call.attributes.get(key, _MISSING) if call.attributes else _MISSING
                if value is _MISSING:
                    value = span_attributes.get(key, _MISSING)
                if not _same_value(value, expected):
                    return False
        if online.predicate is not None:
            try:
                return bool(online.predicate(call))
            except Exception:  # noqa: BLE001 - a broken predicate skips, never raises
                self._log_once(f"predicate:{online.scorer_id}",
                               "tracescore: predicate of online scorer %r raised; skipping calls",
                               online.scorer_id, exc_info=True)
                return False
        return True

    def _stash(self, key: tuple[int, int], candidate: _Candidate) -> None:
        candidates = self._candidates
        candidates[key] = candidate
        if len(candidates) > self._max_candidates:  # spans that never reached on_end
            try:
                oldest = candidates.pop(next(iter(candidates)))
            except (StopIteration, KeyError, RuntimeError):
                return
            _release_budgets(oldest.scorers)

    def _unreadable(self, name: str, attributes: Mapping[str, Any]) -> None:
        """Count and log (once per framework and reason) an agent-like span the chain rejected."""
        found = self._diagnose(name, attributes)
        if found is not None and otel_context.get_value(sc.CTX_EVAL_RUN_ID) is None:
            self._metrics.unreadable(found.framework, found.reason)
            diagnose.note(found, name, attributes)

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
            if self._watched.isdisjoint(attributes):
                return None  # neither a recogniser nor a diagnosis could take it: skip the chain
            found = None
            if not self._any_markers.isdisjoint(attributes):
                if span.events:  # content some instrumentations record as events
                    attributes = with_event_content(
                        attributes, ((e.name, e.attributes) for e in span.events))
                found = recognise(span.name, attributes, self._recognisers)
                if found is None and trace is not None and self._contentless:
                    agent = self._contentless(span.name, attributes)
                    if agent is not None:
                        with self._traces_lock:
                            trace.agent_spans.add(context.span_id)  # its LLM calls: its own
                            calls = trace.llm_under(context.span_id)
                            container = trace.agents_below(context.span_id)
                        found = from_llm_calls(agent, calls)
                        if found is None and container:
                            return None  # it only contains agent spans
                elif found is not None and trace is not None:
                    with self._traces_lock:
                        trace.agent_spans.add(context.span_id)  # the LLM calls below are its own
            if found is None:
                self._unreadable(span.name, attributes)
                return None
            if otel_context.get_value(sc.CTX_EVAL_RUN_ID) is not None:
                return None  # ended inside run_evals, which scores its own calls
            call = AgentCall(
                span=span,  # type: ignore[arg-type]
                name=found.agent, input=found.input, output=found.output,
                ground_truth=found.ground_truth, attributes=attributes,
            )
            chosen = self._choose(call, randomness)
            if not chosen:
                return None
            return _Candidate(call.input, call.output, call.ground_truth, call.name, chosen)
        except Exception:  # noqa: BLE001
            self._log_once("recognise", "tracescore: could not read an agent span for scoring",
                           exc_info=True)
            return None

    # --- hand-off (agent thread, sampled path) ------------------------------------------------------
    def _submit(self, span: ReadableSpan, candidate: _Candidate) -> None:
        if self._shutdown:
            _release_budgets(candidate.scorers)
            self._downstream.on_end(span)
            return
        agent = candidate.agent
        for online in candidate.scorers:
            self._metrics.sampled(online.scorer_id, agent)
        key = _key(span)
        holding = {s.scorer_id: s for s in candidate.scorers if "span" in s.sinks}
        others = any(sink != "span" for s in candidate.scorers for sink in s.sinks)
        held = None
        if holding:
            with self._lock:
                if len(self._held) < self._options.max_held_spans:
                    held = _Held(span, holding, time.monotonic() + self._options.max_wait_s)
                    self._held[key] = held
            if held is None:
                self._unscored(span, holding, reasons.HELD_OVERFLOW, agent)
                # scorers whose only sink was the span just exported have nothing left to do
                idle = tuple(s for s in candidate.scorers if s.sinks == {"span"})
                _release_budgets(idle)
                if not others:
                    return
                candidate.scorers = tuple(s for s in candidate.scorers if s.sinks != {"span"})
        else:
            self._export(span, ())  # a failing downstream must not cost the scoring
        start_ns = time.time_ns()
        judged = tuple(o for o in candidate.scorers if self._waits(o))
        cheap = tuple(o for o in candidate.scorers if o not in judged)
        for worker, scorers in ((self._fast, cheap), (self._worker, judged)):
            if scorers and not worker.submit(functools.partial(
                    self._run_job, _Job(span, candidate, start_ns, scorers))):
                self._refused(key, span, scorers, holding, held is not None, agent)

    def _waits(self, online: OnlineScorer) -> bool:
        """Whether a run of `online` waits on something slow (a judge, the scoring process)."""
        isolation = self._isolation
        return (getattr(online.scorer, "uses_judge", True) is not False
                or (isolation is not None and isolation.mode == "process"))

    def _refused(self, key: tuple[int, int], span: ReadableSpan,
                 scorers: tuple[OnlineScorer, ...], holding: dict[str, OnlineScorer],
                 was_held: bool, agent: str | None) -> None:
        """A full queue refused the job of `scorers`: count them, and mark them unscored on the
        held span (exported once nothing else is waiting for it)."""
        self._log_once("queue_full", "tracescore: online scoring queue is full (%d jobs); "
                       "dropping jobs (counted in tracescore.evaluation.dropped)",
                       self._options.queue_size)
        _release_budgets(scorers)
        for online in scorers:
            if online.scorer_id not in holding or was_held:
                self._metrics.dropped(online.scorer_id, agent, reasons.QUEUE_FULL)
        if was_held:
            self._settle(key, {o.scorer_id: [unscored_event(
                scorer_id=o.scorer_id, scorer_name=o.scorer_name, reason=reasons.QUEUE_FULL,
                sampling_rate=o.rate)] for o in scorers})

    def _settle(self, key: tuple[int, int], events: dict[str, list[EventPayload]]) -> bool:
        """Put the events of the scorers in `events` on the held span `key` if it still waits
        for them, and export it once it waits for nothing. True when any of them landed."""
        done, landed = None, False
        with self._lock:
            held = self._held.get(key)
            if held is not None:
                for scorer_id, payloads in events.items():
                    if held.waiting.pop(scorer_id, None) is not None:
                        landed = True
                        held.events.extend(payloads)
                if not held.waiting:
                    done = self._take(key)
        if done is not None:
            try:
                self._export(done.span, done.events)
            finally:
                self._taken(1)
        return landed

    def _unscored(self, span: ReadableSpan, scorers: dict[str, OnlineScorer], reason: str,
                  agent: str | None, events: Sequence[EventPayload] = (), count: bool = True
                  ) -> None:
        """Export `span` now with what it has plus one 'unscored' event per waiting scorer."""
        extra = list(events)
        for online in scorers.values():
            extra.append(unscored_event(scorer_id=online.scorer_id, scorer_name=online.scorer_name,
                                        reason=reason, sampling_rate=online.rate))
            if count:
                self._metrics.dropped(online.scorer_id, agent, reason)
        self._export(span, extra)

    def _export(self, span: ReadableSpan, events: Sequence[EventPayload]) -> None:
        try:
            span = with_events(span, events)
        except Exception:  # noqa: BLE001 - never lose the span over its events
            self._log_once("events", "tracescore: could not attach score events", exc_info=True)
        try:
            self._downstream.on_end(span)
        except Exception:  # noqa: BLE001
            self._log_once("export", "tracescore: downstream on_end failed", exc_info=True)

    # --- worker side --------------------------------------------------------------------------------
    async def _run_job(self, job: _Job) -> None:
        tasks = [asyncio.ensure_future(self._run_scorer(job, online)) for online in job.scorers]
        # a run whose only sink is a span already exported can no longer land: cancellable
        watched = [t for o, t in zip(job.scorers, tasks) if o.sinks == {"span"}]
        key = _key(job.span)
        if watched:
            with self._lock:
                self._inflight.setdefault(key, []).extend(watched)
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            if watched:
                with self._lock:
                    left = [t for t in self._inflight.pop(key, ()) if t not in watched]
                    if left:
                        self._inflight[key] = left

    def _cancel_inflight(self, keys: Sequence[tuple[int, int]]) -> None:
        """Cancel the runs still scoring for spans just exported without them (any thread)."""
        with self._lock:
            tasks = [t for key in keys for t in self._inflight.pop(key, ())]
        for task in tasks:
            try:
                task.get_loop().call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the worker's loop is closed: nothing left to cancel
                pass

    def _still_waited_for(self, job: _Job, online: OnlineScorer) -> bool:
        """False when `online` only feeds the span and that span left without it."""
        if online.sinks != {"span"}:
            return True
        with self._lock:
            held = self._held.get(_key(job.span))
            return held is not None and online.scorer_id in held.waiting

    async def _run_scorer(self, job: _Job, online: OnlineScorer) -> None:
        candidate = job.candidate
        if not self._still_waited_for(job, online):
            _release_budgets((online,))  # counted as dropped when the span was exported
            return
        run_id = uuid.uuid4().hex
        result, error, fallback = None, None, None
        try:
            ground_truth = candidate.ground_truth
            if ground_truth is None:
                ground_truth = online.lookup_reference(candidate.input)
            if ground_truth is None:
                fallback = reference_fallback(online.scorer_id, online.scorer)
            trace = self._trace_of(candidate)
            with suppressed():
                if self._isolation is not None:
                    run = self._isolation.run(online.scorer, input=candidate.input,
                                              output=candidate.output, ground_truth=ground_truth,
                                              run_id=run_id, timeout_s=online.timeout_s,
                                              tool_calls=trace.tool_calls, context=trace.context)
                else:
                    run = evaluate_call(online.scorer, ScorerInput(
                        input=candidate.input, output=candidate.output,
                        ground_truth=ground_truth, run_id=run_id,
                        tool_calls=tuple(trace.tool_calls), context=tuple(trace.context)))
                result = await asyncio.wait_for(run, online.timeout_s)
        except asyncio.CancelledError:  # shutdown gave up on this run
            self._count_shutdown_drop(candidate, (online,))
            raise
        except Exception as exc:  # noqa: BLE001 - failures are data
            error = exc
        try:
            self._deliver(job, online, result, error, run_id, fallback)
        except Exception:  # noqa: BLE001
            self._log_once("deliver", "tracescore: delivering an online score failed",
                           exc_info=True)

    def _deliver(self, job: _Job, online: OnlineScorer, result: Any, error: BaseException | None,
                 run_id: str, fallback: str | None = None) -> None:
        agent = job.candidate.agent
        if online._budget is not None:
            online._budget.settle(_cost_of(result))
        events, error = self._result_events(online, result, error, run_id)
        if fallback is not None and error is None:  # scored, but not against a ground truth
            events[0][1][sc.TS_REFERENCE_MISSING] = True
            events[0][1][sc.TS_REFERENCE_FALLBACK] = fallback
        span = job.span
        # counted as scored (or failed) only where it lands; a span exported without it
        # already counted it as dropped
        landed = any(name != "span" for name in online.sinks) and not self._shutdown
        if "span" in online.sinks:
            landed = self._settle(_key(span), {online.scorer_id: events}) or landed
        if landed and error is None:
            self._metrics.scored(online.scorer_id, agent, float(result.score))
        elif landed and error is not None:
            self._metrics.failed(online.scorer_id, agent, error_type(error))
        if error is not None:
            self._log_once(f"failed:{online.scorer_id}:{error_type(error)}",
                           "tracescore: online scorer %r failed (%s: %s); recorded as an "
                           "evaluation event with error.type", online.scorer_id,
                           error_type(error), finish_text(error_message(error)))
        if "carrier" in online.sinks and not self._shutdown:
            try:
                self._downstream.on_end(carrier_span(
                    span, online.scorer_name, events, start_ns=job.start_ns,
                    end_ns=time.time_ns(), agent_name=agent,
                ))
            except Exception:  # noqa: BLE001
                self._log_once("carrier", "tracescore: carrier span export failed", exc_info=True)
        if ("log" in online.sinks and span.context is not None
                and not emit_log_records(span.context, events, self._logger_provider)):
            self._log_once("log", "tracescore: the 'log' sink needs a LoggerProvider "
                               "(opentelemetry._logs.set_logger_provider); no records emitted")
        if span.context is not None and any(name in self._sinks for name in online.sinks):
            record = ScoreRecord(
                trace_id=span.context.trace_id, span_id=span.context.span_id,
                scorer_id=online.scorer_id, scorer_name=online.scorer_name,
                judged=bool(getattr(online.scorer, "uses_judge", True)),
                scorer_version=_scorer_version(online.scorer), attributes=events[0][1],
            )
            for name in online.sinks:
                sink = self._sinks.get(name)
                if sink is not None:
                    self._call_sink(sink, "emit", record)

    @staticmethod
    def _result_events(online: OnlineScorer, result: Any, error: BaseException | None,
                       run_id: str) -> tuple[list[EventPayload], BaseException | None]:
        """Events of one run; a result that cannot be read (no score...) counts as a failure."""
        if error is None:
            try:
                float(result.score)
                return evaluation_events(
                    result, scorer_id=online.scorer_id, scorer_name=online.scorer_name,
                    sampling_rate=online.rate, run_id=run_id,
                ), None
            except Exception as exc:  # noqa: BLE001 - a scorer broke the result contract
                error = TypeError(f"scorer {online.scorer_id!r} returned an unusable result: "
                                  f"{type(exc).__name__}: {error_message(exc)}")
        return evaluation_events(
            None, scorer_id=online.scorer_id, scorer_name=online.scorer_name, error=error,
            sampling_rate=online.rate, run_id=run_id,
        ), error

    def _expire_held(self) -> None:
        """Export held spans whose max wait has passed (oldest first; deadlines are ordered)."""
        now = time.monotonic()
        expired: list[_Held] = []
        with self._lock:
            for held in self._held.values():
                if held.deadline > now:
                    break
                expired.append(held)
            for held in expired:
                self._take(_key(held.span))
        self._cancel_inflight([_key(held.span) for held in expired])
        try:
            for held in expired:
                agent = _agent_name(held.span)
                self._metrics.held_timeout(agent)
                self._unscored(held.span, held.waiting, reasons.TIMEOUT, agent, held.events)
        finally:
            self._taken(len(expired))

    def _count_shutdown_drop(self, candidate: _Candidate, scorers: Sequence[OnlineScorer]) -> None:
        """Count runs lost to shutdown; span-sink runs are counted when their span is released."""
        _release_budgets(scorers)
        for online in scorers:
            if "span" not in online.sinks:
                self._metrics.dropped(online.scorer_id, candidate.agent, reasons.SHUTDOWN)

    def _release_all(self, reason: str) -> None:
        with self._lock:
            released = list(self._held.values())
            self._held.clear()
            self._releasing += len(released)
        self._cancel_inflight([_key(held.span) for held in released])
        try:
            for held in released:
                self._unscored(held.span, held.waiting, reason, _agent_name(held.span),
                               held.events)
        finally:
            self._taken(len(released))

    def _take(self, key: tuple[int, int]) -> _Held | None:
        """Remove a held span for export (caller holds the lock; pair with `_taken`)."""
        held = self._held.pop(key, None)
        if held is not None:
            self._releasing += 1
        return held

    def _taken(self, count: int) -> None:
        """`count` spans taken with `_take` have been handed downstream."""
        if count:
            with self._lock:
                self._releasing -= count
                if not self._releasing:
                    self._released.notify_all()

    def _after_fork(self) -> None:
        # Held spans and candidates belong to the parent, which exports them; the providers
        # that feed us (owners) are the same objects in the child.
        owners, last = self._owners, self._last_owner
        self._init_state()
        self._owners, self._last_owner = owners, last
        # A parent thread that held one of these locks at fork does not exist here: fresh ones,
        # or the child's agent would wait forever on its first sampled call.
        self._metrics._lock = threading.Lock()
        for online in self._scorers:
            for state in (online._limiter, online._budget):
                if state is not None:
                    state._lock = threading.Lock()

    def _call_sink(self, sink: ResultSink, method: str, *args: Any) -> bool:
        """`sink.method(*args)`; a raising sink is logged once and counts as a failed call."""
        try:
            return getattr(sink, method)(*args) is not False
        except Exception:  # noqa: BLE001 - a broken sink must not cost the others or the spans
            self._log_once(f"sink:{method}", "tracescore: result sink %r failed in %s",
                           sink, method, exc_info=True)
            return False

    def _log_once(self, key: str, message: str, *args: object, exc_info: bool = False) -> None:
        if key not in self._logged:
            self._logged.add(key)
            _log.warning(message, *args, exc_info=exc_info)


# --- the agent-call listener shared by all processors ---------------------------------------------
# A tuple of weak references: iterating it is cheap on the hot path (a WeakSet is not), and a
# processor dropped without shutdown does not stay alive because of us.
_active: tuple[weakref.ref[ScoringSpanProcessor], ...] = ()
_registry_lock = threading.Lock()


def _live() -> list[ScoringSpanProcessor]:
    return [p for p in (ref() for ref in _active) if p is not None]


# (the `_active` it was computed for, the lowest sampling threshold of its live processors)
_lowest: tuple[tuple[weakref.ref[ScoringSpanProcessor], ...], int] = ((), 1 << 56)


def _wants_call(span: trace_api.Span) -> bool:
    """Filter of the shared listener, run when an agent span starts (cheap, no I/O): could any
    processor sample this call? Calls made inside `run_evals` are left to the eval."""
    global _lowest
    active, lowest = _lowest
    if active is not _active:
        active = _active
        lowest = min((p._min_threshold for p in _live()), default=1 << 56)
        _lowest = (active, lowest)
    context = span.get_span_context()
    return bool(
        context.trace_flags & 1  # not sampled by the tracer: never scored
        and context.trace_id & RANDOMNESS_MASK >= lowest
        and otel_context.get_value(sc.CTX_EVAL_RUN_ID) is None
    )


def _on_agent_call(call: AgentCall) -> None:
    for ref in _active:
        processor = ref()
        if processor is None:
            continue
        try:
            processor._consider(call)
        except Exception:  # noqa: BLE001
            _log.warning("tracescore: online scoring could not consider an agent call",
                         exc_info=True)


def _register(processor: ScoringSpanProcessor) -> None:
    global _active
    with _registry_lock:
        _active = (*(weakref.ref(p) for p in _live() if p is not processor),
                   weakref.ref(processor))
    add_agent_call_listener(_on_agent_call, _wants_call)


def _unregister(processor: ScoringSpanProcessor) -> None:
    global _active
    with _registry_lock:
        _active = tuple(weakref.ref(p) for p in _live() if p is not processor)
        if not _active:
            remove_agent_call_listener(_on_agent_call)


def _after_fork_in_child() -> None:
    global _registry_lock
    _registry_lock = threading.Lock()
    for processor in _live():
        processor._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# --- helpers ----------------------------------------------------------------------------------------
def _release_budgets(scorers: Sequence[OnlineScorer]) -> None:
    for online in scorers:
        if online._budget is not None:
            online._budget.release()


def _same_value(value: object, expected: object) -> bool:
    if isinstance(expected, list):
        expected = tuple(expected)
    if isinstance(value, list):
        value = tuple(value)
    return value == expected


def _cost_of(result: Any) -> float | None:
    """Judge cost of a run's result, None when unknown or unreadable."""
    try:
        cost = result.usage.cost_usd
    except Exception:  # noqa: BLE001 - no result, or one that breaks the contract
        return None
    return float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None


def _scorer_version(scorer: Any) -> str:
    """`scorer.version` when it has one, else the tracescore release that defines the scorer."""
    version = getattr(scorer, "version", None)
    if version is not None:
        return str(version)
    from tracescore import __version__

    return f"tracescore {__version__}"


def _sink_stats(sink: ResultSink) -> dict[str, int]:
    try:
        stats = sink.stats()
        return {str(k): int(v) for k, v in stats.items()}
    except Exception:  # noqa: BLE001 - stats are best effort
        return {}


def _attributes_of(span: ReadableSpan) -> Mapping[str, Any]:
    """The span's attributes; for SDK spans the plain dict behind them (read only here): each
    lookup through the public read-only view costs ~1 us, several per ended span."""
    plain = getattr(getattr(span, "_attributes", None), "_dict", None)
    return plain if isinstance(plain, dict) else (span.attributes or {})


def _error_of(span: ReadableSpan, attributes: Mapping[str, Any]) -> str | None:
    """The error text of a failed span (status description, else `error.type`), None if it
    did not fail."""
    status = span.status
    error_type_ = attributes.get(sc.ERROR_TYPE)
    if status is None or status.status_code is not trace_api.StatusCode.ERROR:
        return None if error_type_ is None else str(error_type_)
    return status.description or (str(error_type_) if error_type_ is not None else "error")


def _key(span: ReadableSpan) -> tuple[int, int]:
    context = span.context
    return context.trace_id, context.span_id


def _agent_name(span: ReadableSpan) -> str | None:
    name = (span.attributes or {}).get(sc.GEN_AI_AGENT_NAME)
    return str(name) if name is not None else None
