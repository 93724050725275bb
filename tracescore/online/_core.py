"""`ScoringCore`: scores agent calls in the background and delivers the events; knows no span type.

Both front doors drive it: the in-process `ScoringSpanProcessor` (SDK spans) and the gateway's
`Engine` (OTLP protobuf spans). A front door recognises an agent call and gives the core

- `choose(call, randomness)`: which scorers sample it (rates, `agents` / `attributes` /
  predicate filters, rate limits, budgets; no I/O: fleet limits are reserved in the worker);
- `submit(key, call, item)`: a chosen `Call`, keyed by (trace id, span id), with an opaque
  `item` (its span as the front door holds it). Span-sink scorers hold the item (`HoldTable`);
  the jobs run in the worker lanes (`_worker`: judged scorers, and a fast lane for the others
  never behind slow judge calls), judged runs in the scoring process (`_isolation`);
- `export(item, events)` (constructor): the item goes on, once, with the events that landed or
  'unscored' events; `carrier(run, end_ns)`: a carrier span for the carrier sink.

Each run is routed to its sinks in one loop (`_delivery`). Every submitted item leaves through
`export` exactly once, whatever happens to its scoring.

(About 640 lines: hand-off, admission, runs and their shutdown share the in-flight bookkeeping
and its lock, and the run and conversation scopes plug in here; split further they would pass
it around.)
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracescore import _semconv as sc
from tracescore._content import finish_text
from tracescore._exceptions import ConfigurationError
from tracescore._guard import Guard
from tracescore._suppress import suppressed
from tracescore.instrument._calls import AgentCall
from tracescore.online import _metrics as reasons
from tracescore.online._choose import choose, would_sample
from tracescore.online._conversation_scope import ConversationCarrier, ConversationScope
from tracescore.online._conversations import (
    ConversationOptions,
    TurnStore,
    is_conversation_scoped,
)
from tracescore.online._delivery import (
    CarrierSink,
    LogSink,
    MetricsSink,
    RecordSink,
    ScoreRun,
    Sink,
    SpanSink,
    call_sink,
)
from tracescore.online._events import (
    EventPayload,
    error_message,
    error_type,
    evaluation_events,
    unscored_event,
)
from tracescore.online._fleet_limits import Reservation
from tracescore.online._hold import Held, HoldTable, Key
from tracescore.online._isolation import ProcessRunner
from tracescore.online._judge_spans import JudgeSpan, judge_spans
from tracescore.online._metrics import OnlineMetrics
from tracescore.online._options import OnlineScorer, ProcessorOptions, reference_fallback
from tracescore.online._records import ResultSink
from tracescore.online._sampling import RANDOMNESS_MASK
from tracescore.online._sinks import result_sinks
from tracescore.online._worker import Worker
from tracescore.online.intake import (
    EMPTY,
    Item,
    RunSource,
    TraceInput,
    TraceLimits,
    run_of,
    trace_input_of,
    unwrap_input,
    unwrap_output,
)
from tracescore.scoring._base import ScorerInput, evaluate_call
from tracescore.scoring._judge_trace import JudgeCall, recording
from tracescore.scoring._provenance import provenance
from tracescore.scoring._runs import Run

_log = logging.getLogger("tracescore")
_NEVER = 1 << 56  # above every trace's randomness
_SCORING_SHARE = 0.8  # of a flush timeout spent waiting for pending scoring
_RECENT = 0.3  # weight of the latest run in a scorer's recent run duration (admission)


@dataclass(slots=True)
class Call:
    """A sampled agent call on its way to its scorers."""

    input: Any
    output: Any
    ground_truth: Any
    agent: str | None
    scorers: tuple[OnlineScorer, ...]
    trace: TraceInput | None = None  # tool calls and context (decoded by the first run)
    items: list[Item] | None = None  # as recorded, decoded in the worker
    dropped: bool = False  # its trace had more spans than `TraceLimits.max_spans`
    run_source: RunSource | None = None  # a run root's: its trace below it (run-scope scorers)
    run: Run | None = None  # read from `run_source` by the first run-scope run
    unwrapped: bool = False  # input and output normalised (`_unwrap`) by the first run
    partial: str | None = None  # why its run may lack spans: its run-scope results say so


@dataclass(slots=True)
class _Job:
    """A worker job (calling it starts its run): one object per job, since every object a held
    call keeps alive brings the next garbage collection closer in the agent's thread."""

    core: ScoringCore
    key: Key
    item: Any
    call: Call
    start_ns: int
    scorers: tuple[OnlineScorer, ...]  # this job's share of the call's scorers

    def __call__(self) -> Awaitable[None]:
        return self.core._run_job(self)


@dataclass(slots=True)
class _Plan:
    """How the calls a set of scorers samples are handed off (the same each time: cached)."""

    scorers: tuple[OnlineScorer, ...]
    holding: dict[str, OnlineScorer]  # span-sink scorers by id (copied per call: it shrinks)
    others: bool  # whether any sink besides the span takes their runs
    lanes: tuple[tuple[Worker, tuple[OnlineScorer, ...]], ...]  # the non-empty worker lanes


_MAX_PLANS = 256  # distinct scorer sets remembered (a call samples a subset of the scorers)


class ScoringCore:
    """Chooses, queues, runs and delivers the scorers of agent calls (see the module doc)."""

    def __init__(self, scorers: tuple[OnlineScorer, ...], options: ProcessorOptions, *,
                 export: Callable[[Any, Sequence[EventPayload]], None],
                 carrier: Callable[[ScoreRun, int], None],
                 trace_limits: TraceLimits, metrics: OnlineMetrics | None = None,
                 logger_provider: Any = None,
                 sinks: Mapping[str, ResultSink] | None = None,
                 conversations: ConversationOptions | None = None,
                 conversation_carrier: ConversationCarrier | None = None,
                 turn_store: TurnStore | None = None,
                 judge_spans: Callable[[Any, Sequence[JudgeSpan]], None] | None = None) -> None:
        if not scorers:
            raise ConfigurationError("ScoringSpanProcessor needs at least one scorer")
        if options.isolation == "thread":  # judges run in this process: check them now, fully
            from tracescore.scoring._resolve import check_judge

            for online in scorers:
                judge = getattr(online.scorer, "judge", None)
                if judge is not None:
                    check_judge(judge)
        self.scorers = scorers
        # conversation scorers are never chosen per call (`_conversation_scope`)
        talks = tuple(o for o in scorers if is_conversation_scoped(o))
        self._call_scorers = tuple(o for o in scorers if o not in talks)  # call and run scope
        self.run_scorers = tuple(o for o in scorers if getattr(o.scorer, "scope", "") == "run")
        self.call_scorers = tuple(o for o in self._call_scorers if o not in self.run_scorers)
        self.options = options
        self.trace_limits = trace_limits
        # the lowest rejection threshold: a trace whose randomness is below it is never sampled
        self.threshold = min((s._threshold for s in self._call_scorers), default=_NEVER)
        conversation_options = conversations or ConversationOptions()
        self.result_sinks = result_sinks(sorted({n for s in scorers for n in s.sinks}), sinks)
        self.metrics = metrics if metrics is not None else OnlineMetrics()
        self.metrics.quality.describe(scorers)
        self._export_item = export
        self._judge_spans = judge_spans  # the judge traced (`_judge_spans`); None: not traced
        self.closing = False
        self.guard = Guard(_log)  # failures counted by site, each site logged once
        self.log_once = self.guard.once
        self.held = HoldTable(max_held=options.max_held_spans, max_wait_s=options.max_wait_s,
                              release=self._release)
        self.worker = Worker(  # judged scorers
            queue_size=options.queue_size, concurrency=options.concurrency,
            tick_s=min(1.0, max(0.01, min(options.max_wait_s,
                                          conversation_options.quiet_s) / 4)),
            on_tick=self._tick,
        )
        self._timers: list[Callable[[], None]] = []  # `add_timer`
        # scorers without a judge: a lane of their own, never behind slow judge calls
        self.fast = Worker(queue_size=options.queue_size, concurrency=options.concurrency,
                           name="tracescore-online-fast")
        self.isolation = ProcessRunner(options.isolation) if options.isolation != "thread" else None
        self._routes = {o.scorer_id: self._route(o, carrier, logger_provider) for o in scorers}
        self._inflight: dict[Key, list[asyncio.Task[None]]] = {}
        self._lock = threading.Lock()
        self._plans: dict[tuple[OnlineScorer, ...], _Plan] = {}
        # admission of span-sink runs: a scorer's recent run duration (seconds), by scorer id
        self._durations: dict[str, float] = {}
        self.conversations: ConversationScope | None = None  # None: no conversation scorer
        if talks:
            self.conversations = ConversationScope(
                talks, conversation_options, lanes=(self.fast, self.worker),
                metrics=self.metrics, carrier=conversation_carrier or _no_carrier,
                logger_provider=logger_provider, result_sinks=self.result_sinks,
                result_events=_result_events, log_once=self.log_once, store=turn_store)
            self.add_timer(self.conversations.tracker.expire)

    def _route(self, online: OnlineScorer, carrier: Callable[[ScoreRun, int], None],
               logger_provider: Any) -> tuple[bool, tuple[Sink, ...]]:
        """(whether any sink besides the span takes its runs, its sinks in delivery order)."""
        route: list[Sink] = []
        if "span" in online.sinks:
            route.append(SpanSink(self.held))
        route.append(MetricsSink(self.metrics))
        if "carrier" in online.sinks:
            route.append(CarrierSink(carrier, self.log_once))
        if "log" in online.sinks:
            route.append(LogSink(logger_provider, self.log_once))
        route.extend(RecordSink(self.result_sinks[n], self.log_once)
                     for n in sorted(online.sinks) if n in self.result_sinks)
        return any(name != "span" for name in online.sinks), tuple(route)

    def add_timer(self, timer: Callable[[], None]) -> None:
        """Call `timer` on the core's timer thread (each tick: at most 1 s apart), from now on
        (e.g. a `QuietTable`'s `expire`)."""
        self._timers.append(timer)
        self.worker.start()

    def _tick(self) -> None:
        self.held.expire()
        for timer in self._timers:
            timer()

    def stats(self) -> dict[str, int]:
        """Counters and gauges (see `ScoringSpanProcessor.stats`)."""
        counts = self.metrics.snapshot()
        for key in ("sampled", "scored", "failed", "dropped", "held_timeout"):
            counts.setdefault(key, 0)
        counts["held"] = len(self.held)
        counts["queued"] = self.worker.pending + self.fast.pending
        counts["running"] = self.worker.running + self.fast.running
        if self.isolation is not None:
            counts["in_thread"] = self.isolation.in_thread
        if self.conversations is not None:
            counts.update(self.conversations.tracker.stats())
        for name, sink in self.result_sinks.items():
            for key, value in _sink_stats(sink).items():
                counts[f"{name}.{key}"] = value
        return counts

    # --- choosing (the agent's thread: cheap, no I/O) ---------------------------------------------
    def choose(self, call: AgentCall, randomness: int, *, scope: str | None = None
               ) -> tuple[OnlineScorer, ...]:
        """The scorers that sample `call` (each holding its rate limit and budget); `scope`
        "call" or "run": only the scorers of that scope (a call that is not its run's root takes
        no rate limit or budget of a run-scope scorer)."""
        scorers = (self._call_scorers if scope is None else self.run_scorers if scope == "run"
                   else self.call_scorers)
        return choose(scorers, call, randomness, self.metrics, self.log_once) if scorers else ()

    def would_sample(self, randomness: int, agent: str,
                     attributes: Mapping[str, Any]) -> dict[str, OnlineScorer]:
        """The scorers whose rate, `agents` and `attributes` filters take a call (no limits,
        budgets nor predicates): those that note it 'unscored' when it cannot be read."""
        return would_sample(self._call_scorers, randomness, agent, attributes)

    # --- the doors' shared tail ----------------------------------------------------------------------
    def take(self, key: Key, call: AgentCall, item: Any, trace: TraceInput = EMPTY, *,
             threshold: int = 0, end_ns: int | None = None,
             defer: Callable[[], bool] | None = None,
             chooser: Callable[[AgentCall, int], tuple[OnlineScorer, ...]] | None = None
             ) -> bool:
        """An agent call a front door has read, with its span as `item`: offered as a turn of
        its conversation (`end_ns`: its span's end), kept by the door when `defer` says so (the
        gateway's run scope), else given the scorers that sample it (`chooser`, default
        `choose`; none below `threshold`) and submitted; with no scorer `item` goes on at once.
        True when it was submitted or deferred. Never raises."""
        chosen: tuple[OnlineScorer, ...] = ()
        try:
            if not self.closing:
                scope = self.conversations
                if scope is not None:  # whatever happens to the call's scoring
                    scope.tracker.offer(call, call.attributes, key[0], key[1], end_ns)
                if defer is not None and defer():
                    return True
                randomness = key[0] & RANDOMNESS_MASK
                if randomness >= threshold:
                    chosen = (chooser or self.choose)(call, randomness)
        except Exception:  # noqa: BLE001 - the item goes on unscored rather than not at all
            self.log_once("offer", "tracescore: could not consider an offered agent span",
                          exc_info=True)
            chosen = ()
        if not chosen:
            self.export(item, ())
            return False
        self.submit(key, Call(call.input, call.output, call.ground_truth, call.name, chosen,
                              trace), item)
        return True

    # --- hand-off -----------------------------------------------------------------------------------
    def submit(self, key: Key, call: Call, item: Any) -> None:
        """Score `call` (its `scorers` chosen); `item` goes on through `export` exactly once."""
        if self.closing:
            release_budgets(call.scorers)
            self.export(item, ())
            return
        agent = call.agent
        metrics = self.metrics
        for online in call.scorers:
            metrics.sampled(online.scorer_id, agent)
        plan = self._plan(call.scorers)
        call.scorers = plan.scorers  # the cached tuple: the call's own goes at once
        holding = plan.holding
        was_held = False
        if holding:
            holding = dict(holding)
            was_held = self.held.hold(key, item, agent, holding)
            if not was_held:
                self.unscored(item, holding, reasons.HELD_OVERFLOW, agent)
                # scorers whose only sink was the span just exported have nothing left to do
                release_budgets(tuple(s for s in call.scorers if s.sinks == {"span"}))
                if not plan.others:
                    return
                call.scorers = tuple(s for s in call.scorers if s.sinks != {"span"})
                plan = self._plan(call.scorers)
        else:
            self.export(item, ())  # a failing downstream must not cost the scoring
        start_ns = time.time_ns()
        for worker, scorers in plan.lanes:
            if not worker.submit(_Job(self, key, item, call, start_ns, scorers)):
                self._refused(key, scorers, holding, was_held, agent)

    def _plan(self, scorers: tuple[OnlineScorer, ...]) -> _Plan:
        """The hand-off of calls sampled by `scorers`: which hold the span, which lane runs them."""
        plan = self._plans.get(scorers)
        if plan is None:
            judged = tuple(o for o in scorers if self._waits(o))
            cheap = tuple(o for o in scorers if o not in judged)
            plan = _Plan(scorers, {s.scorer_id: s for s in scorers if "span" in s.sinks},
                         any(sink != "span" for s in scorers for sink in s.sinks),
                         tuple((w, lane) for w, lane in ((self.fast, cheap), (self.worker, judged))
                               if lane))
            if len(self._plans) < _MAX_PLANS:
                self._plans[scorers] = plan
        return plan

    def _waits(self, online: OnlineScorer) -> bool:
        """Whether a run of `online` waits on something slow (a judge, the scoring process)."""
        isolation = self.isolation
        return (getattr(online.scorer, "uses_judge", True) is not False
                or (isolation is not None and isolation.mode == "process"))

    def _refused(self, key: Key, scorers: tuple[OnlineScorer, ...],
                 holding: dict[str, OnlineScorer], was_held: bool, agent: str | None) -> None:
        """A full queue refused the job of `scorers`: count them, and mark them unscored on the
        held span (exported once nothing else is waiting for it)."""
        self.log_once("queue_full", "tracescore: online scoring queue is full (%d jobs); "
                      "dropping jobs (counted in tracescore.evaluation.dropped)",
                      self.options.queue_size)
        release_budgets(scorers)
        for online in scorers:
            if online.scorer_id not in holding or was_held:
                self.metrics.dropped(online.scorer_id, agent, reasons.QUEUE_FULL)
        if was_held:
            self.held.settle(key, {o.scorer_id: [unscored_event(
                scorer_id=o.scorer_id, scorer_name=o.scorer_name, reason=reasons.QUEUE_FULL,
                sampling_rate=o.rate)] for o in scorers})

    def unscored(self, item: Any, scorers: Mapping[str, OnlineScorer], reason: str,
                 agent: str | None, events: Sequence[EventPayload] = ()) -> None:
        """Export `item` now with `events` plus one 'unscored' event (counted as dropped with
        `reason`) per scorer in `scorers`."""
        extra = list(events)
        for online in scorers.values():
            extra.append(unscored_event(scorer_id=online.scorer_id, scorer_name=online.scorer_name,
                                        reason=reason, sampling_rate=online.rate))
            self.metrics.dropped(online.scorer_id, agent, reason)
        self.export(item, extra)

    def export(self, item: Any, events: Sequence[EventPayload]) -> None:
        """Hand `item` on with `events` (a failing exporter is logged once, never raised)."""
        try:
            self._export_item(item, events)
        except Exception:  # noqa: BLE001
            self.log_once("export", "tracescore: downstream on_end failed", exc_info=True)

    def _release(self, held: Held, reason: str | None) -> None:
        """A held item leaves: settled (`reason` None), or with its waiting scorers unscored."""
        if reason is None:
            self.export(held.item, held.events or ())
            return
        self._cancel_inflight(held.key)
        if reason == reasons.TIMEOUT:
            self.metrics.held_timeout(held.agent)
        self.unscored(held.item, held.waiting, reason, held.agent, held.events or ())

    # --- worker side --------------------------------------------------------------------------------
    async def _run_job(self, job: _Job) -> None:
        self.metrics.flush_pending()  # the agent's thread left its meter adds to this one
        tasks = [asyncio.ensure_future(self._run_scorer(job, online)) for online in job.scorers]
        # a run whose only sink is a span already exported can no longer land: cancellable
        watched = [t for o, t in zip(job.scorers, tasks) if o.sinks == {"span"}]
        key = job.key
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

    def _cancel_inflight(self, key: Key) -> None:
        """Cancel the runs still scoring for a span just exported without them (any thread)."""
        if not self._inflight:
            return
        with self._lock:
            tasks = self._inflight.pop(key, ())
        for task in tasks:
            try:
                task.get_loop().call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the worker's loop is closed: nothing left to cancel
                pass

    def _run_of(self, call: Call, online: OnlineScorer) -> Run | None:
        """The run a run-scope scorer judges (worker side, cached); None for other scorers."""
        if call.run_source is None or getattr(online.scorer, "scope", "call") != "run":
            return None
        if call.run is None:
            try:
                call.run = run_of(call.run_source, self.trace_limits, call.output)
            except Exception:  # noqa: BLE001 - scored with its tool calls rather than not at all
                self.log_once("run_steps", "tracescore: could not read a run's steps",
                              exc_info=True)
                call.run_source = None
        return call.run

    def _trace_of(self, call: Call) -> TraceInput:
        """The call's tool calls and context within the limits (worker side, cached)."""
        trace = call.trace
        if trace is None:
            try:
                trace = trace_input_of(call.items or [], call.dropped, self.trace_limits)
            except Exception:  # noqa: BLE001 - scored without them rather than not at all
                self.log_once("trace_input", "tracescore: could not read an agent call's tool "
                              "calls and context", exc_info=True)
                trace = EMPTY
        if trace.last_tool is not None:  # the answer channel left out, once the answer is read
            trace = call.trace = trace.for_answer(call.output)
        else:
            call.trace = trace
        return trace

    async def _run_scorer(self, job: _Job, online: OnlineScorer) -> None:
        if online.sinks == {"span"} and not self._admits(job.key, online):
            release_budgets((online,))  # counted as dropped when the span leaves without it
            return
        try:
            fleet = await online.admit_fleet()  # here, never in the agent's thread
        except asyncio.CancelledError:
            self.count_shutdown_drop(job.call.agent, (online,))
            raise
        if fleet is None:
            self._fleet_refused(job, online)
            return
        scorer_id = online.scorer_id
        started = time.monotonic()
        try:
            await self._run_admitted(job, online, fleet)
        except asyncio.CancelledError:  # its span left: it would have taken at least this long
            self._durations[scorer_id] = max(self._durations.get(scorer_id, 0.0),
                                             time.monotonic() - started)
            raise
        elapsed = time.monotonic() - started
        last = self._durations.get(scorer_id)
        self._durations[scorer_id] = elapsed if last is None else (
            _RECENT * elapsed + (1 - _RECENT) * last)

    def _admits(self, key: Key, online: OnlineScorer) -> bool:
        """Whether a run whose only sink is the held span starts: the span still waits for it
        and has at least the scorer's recent run duration left before it is released. A run
        refused here spends no judge request; its span leaves at its deadline and counts the
        drop as before. (Runs longer than `max_wait_s` are always let start, as they were: one
        that lands again refreshes the duration.)"""
        if not self.held.waits_for(key, online.scorer_id):
            return False
        expected = self._durations.get(online.scorer_id)
        if expected is None or expected >= self.options.max_wait_s:
            return True
        left = self.held.time_left(key)
        return left is not None and left >= expected

    def _fleet_refused(self, job: _Job, online: OnlineScorer) -> None:
        """The fleet's limits refused a run: dropped as rate_limited, and 'unscored' on its held
        span (a span already released counted its drop then)."""
        landed = "span" in online.sinks and self.held.settle(job.key, {online.scorer_id: [
            unscored_event(scorer_id=online.scorer_id, scorer_name=online.scorer_name,
                           reason=reasons.RATE_LIMITED, sampling_rate=online.rate)]})
        if landed or "span" not in online.sinks:
            self.metrics.dropped(online.scorer_id, job.call.agent, reasons.RATE_LIMITED)

    async def _run_admitted(self, job: _Job, online: OnlineScorer, fleet: Reservation) -> None:
        call = job.call
        run_id = uuid.uuid4().hex
        result, error, fallback, judge_calls = None, None, None, None
        try:
            if not call.unwrapped:  # in the worker: the agent's thread never parses content
                call.input, call.output = unwrap_input(call.input), unwrap_output(call.output)
                call.unwrapped = True
            ground_truth = call.ground_truth
            if ground_truth is None:
                ground_truth = online.lookup_reference(call.input)
            if ground_truth is None:
                fallback = reference_fallback(online.scorer_id, online.scorer)
            trace = self._trace_of(call)
            steps = self._run_of(call, online)
            with suppressed(), recording(bool(online.trace_judge) and self._judge_spans is not None
                                         ) as judge_calls:
                if self.isolation is not None:
                    run = self.isolation.run(online.scorer, input=call.input, output=call.output,
                                             ground_truth=ground_truth, run_id=run_id,
                                             timeout_s=online.timeout_s,
                                             tool_calls=trace.tool_calls, context=trace.context,
                                             run=steps)
                else:
                    run = evaluate_call(online.scorer, ScorerInput(
                        input=call.input, output=call.output, ground_truth=ground_truth,
                        run_id=run_id, tool_calls=tuple(trace.tool_calls),
                        context=tuple(trace.context), run=steps))
                result = await asyncio.wait_for(run, online.timeout_s)
        except asyncio.CancelledError:  # shutdown gave up on this run
            online.release_budget(fleet)
            self.count_shutdown_drop(call.agent, (online,), released=True)
            raise
        except Exception as exc:  # noqa: BLE001 - failures are data
            error = exc
        try:
            self._deliver(job, online, result, error, run_id, fallback, judge_calls, fleet)
        except Exception:  # noqa: BLE001
            self.log_once("deliver", "tracescore: delivering an online score failed",
                          exc_info=True)

    def _deliver(self, job: _Job, online: OnlineScorer, result: Any, error: BaseException | None,
                 run_id: str, fallback: str | None = None,
                 judge_calls: Sequence[JudgeCall] | None = None,
                 fleet: Reservation | None = None) -> None:
        online.settle_budget(_cost_of(result), fleet)
        events, error = _result_events(online, result, error, run_id)
        traced = judge_spans(judge_calls or (), job.key, scorer_id=online.scorer_id,
                             scorer_name=online.scorer_name, result=events[0][1])
        if fallback is not None and error is None:  # scored, but not against a ground truth
            events[0][1][sc.TS_REFERENCE_MISSING] = True
            events[0][1][sc.TS_REFERENCE_FALLBACK] = fallback
        if job.call.partial is not None and getattr(online.scorer, "scope", "call") == "run":
            events[0][1][sc.TS_RUN_PARTIAL] = job.call.partial
        others, route = self._routes[online.scorer_id]
        run = ScoreRun(job.key, job.item, online, job.call.agent, events, error,
                       None if error is not None else float(result.score), job.start_ns,
                       self.closing)
        # counted as scored (or failed) only where it lands (the carrier, log and result sinks
        # take it also while closing: their downstream closes after the core); a span exported
        # without it already counted it as dropped
        run.landed = others
        for sink in route:
            if sink.deliver(run):
                run.landed = True
        if error is not None:
            self.log_once(f"failed:{online.scorer_id}:{error_type(error)}",
                          "tracescore: online scorer %r failed (%s: %s); recorded as an "
                          "evaluation event with error.type", online.scorer_id,
                          error_type(error), finish_text(error_message(error)))
        if traced and self._judge_spans is not None:  # the judge traced, its id on the event
            self._judge_spans(job.item, traced)

    def count_shutdown_drop(self, agent: str | None, scorers: Sequence[OnlineScorer], *,
                            released: bool = False) -> None:
        """Count runs lost to shutdown (their budgets given back unless `released`); span-sink
        runs are counted when their span is released."""
        if not released:
            release_budgets(scorers)
        for online in scorers:
            if "span" not in online.sinks:
                self.metrics.dropped(online.scorer_id, agent, reasons.SHUTDOWN)

    # --- flush and shutdown -----------------------------------------------------------------------
    def wait_idle(self, timeout: float) -> bool:
        """Wait for both lanes to be idle, `timeout` seconds in all."""
        deadline = time.monotonic() + timeout
        fast = self.fast.wait_idle(timeout)
        return self.worker.wait_idle(max(0.0, deadline - time.monotonic())) and fast

    def flush(self, timeout: float) -> bool:
        """Wait (bounded) for pending scoring, release every held item, flush the result sinks;
        True when all of it finished in time."""
        deadline = time.monotonic() + timeout
        # scoring gets most of the time; the rest is kept for exporting what it released
        idle = self.wait_idle(timeout * _SCORING_SHARE)
        self.held.release_all(reasons.FLUSH)
        for sink in self.result_sinks.values():
            idle = call_sink(sink, "force_flush", self.log_once,
                             deadline - time.monotonic()) and idle
        return idle

    def close(self, wait: float) -> float:
        """Stop taking calls, wait (bounded by `wait` seconds) for pending scoring, release
        every held item (reason "shutdown"); the deadline left for the caller's downstream."""
        deadline = time.monotonic() + wait
        if self.conversations is not None and self.conversations.keeps_nothing:
            self.conversations.tracker.release_all()  # nothing keeps them: score them now
        self.closing = True
        self.wait_idle(wait)
        # a job stuck in blocking code cannot hold shutdown: held spans are released regardless
        for worker in (self.fast, self.worker):
            for job in worker.stop(timeout=min(0.5, wait)):
                # a call's job, or a conversation's (`_conversation_scope`): both name theirs
                agent = job.call.agent if isinstance(job, _Job) else getattr(job, "agent", None)
                self.count_shutdown_drop(agent, getattr(job, "scorers", ()))
        self.held.release_all(reasons.SHUTDOWN)
        # spans other threads are releasing must reach downstream before it closes
        self.held.wait_released(max(wait, 1.0))
        for sink in self.result_sinks.values():  # what scoring left of the wait (sends take little)
            call_sink(sink, "shutdown", self.log_once, max(0.5, deadline - time.monotonic()))
        return deadline

    def stop_isolation(self, wait: float) -> None:
        """Last: a scoring process that does not answer its EOF (stuck in blocking code, or
        still importing on a loaded machine) takes seconds to end, and a bounded shutdown
        (interpreter exit) must not spend them before the held spans are out."""
        if self.isolation is not None:
            self.isolation.stop(timeout=min(2.0, max(wait, 0.5)))

    def after_fork(self) -> None:
        """In a forked child: what was held and in flight belongs to the parent, which exports
        it; a lock a parent thread held at fork would never be released here."""
        self.held.reset()
        self._inflight = {}
        self._lock = threading.Lock()
        self.metrics._lock = threading.Lock()
        for online in self.scorers:
            online.after_fork()



def _result_events(online: OnlineScorer, result: Any, error: BaseException | None,
                   run_id: str) -> tuple[list[EventPayload], BaseException | None]:
    """Events of one run; a result that cannot be read (no score...) counts as a failure."""
    if error is None:
        try:
            float(result.score)
            return evaluation_events(
                result, scorer_id=online.scorer_id, scorer_name=online.scorer_name,
                sampling_rate=online.rate, run_id=run_id, **provenance(online.scorer),
            ), None
        except Exception as exc:  # noqa: BLE001 - a scorer broke the result contract
            error = TypeError(f"scorer {online.scorer_id!r} returned an unusable result: "
                              f"{type(exc).__name__}: {error_message(exc)}")
    return evaluation_events(
        None, scorer_id=online.scorer_id, scorer_name=online.scorer_name, error=error,
        sampling_rate=online.rate, run_id=run_id, **provenance(online.scorer),
    ), error


def _no_carrier(*args: object) -> None:
    return None


def release_budgets(scorers: Sequence[OnlineScorer]) -> None:
    """Give back the budget reservations of scorers that will not run."""
    for online in scorers:
        online.release_budget()


def _cost_of(result: Any) -> float | None:
    """Judge cost of a run's result, None when unknown or unreadable."""
    try:
        cost = result.usage.cost_usd
    except Exception:  # noqa: BLE001 - no result, or one that breaks the contract
        return None
    return float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None


def _sink_stats(sink: ResultSink) -> dict[str, int]:
    try:
        stats = sink.stats()
        return {str(k): int(v) for k, v in stats.items()}
    except Exception:  # noqa: BLE001 - stats are best effort
        return {}
