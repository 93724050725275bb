"""`ScoringCore`: scores agent calls in the background and delivers the events; knows no span type.

Both front doors drive it: the in-process `ScoringSpanProcessor` (SDK spans) and the gateway's
`Engine` (OTLP protobuf spans). A front door recognises an agent call and gives the core

- `choose(call, randomness)`: which scorers sample it (rates, `agents` / `attributes` /
  predicate filters, rate limits, budgets; no I/O: fleet limits are reserved in the worker);
- `submit(key, call, item)`: a chosen `Call`, keyed by (trace id, span id), with an opaque
  `item` (its span as the front door holds it). Span-sink scorers hold the item (`HoldTable`);
  its `Job`s go to the worker lanes (`_worker`: judged scorers, and a fast lane for the others
  never behind slow judge calls), where `_jobs` runs and delivers them;
- `export(item, events)` (constructor): the item goes on, once, with the events that landed or
  'unscored' events; `carrier(run, end_ns)`: a carrier span for the carrier sink.

This module is the agent's-thread side (choose, hand off, hold, release) and the lifecycle
(flush, close); every submitted item leaves through `export` exactly once, whatever happens to
its scoring.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore._guard import Guard
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
from tracescore.online._events import EventPayload, unscored_event
from tracescore.online._hold import Held, HoldTable, Key
from tracescore.online._isolation import ProcessRunner
from tracescore.online._jobs import Call, Job, Route, Runner, result_events
from tracescore.online._judge_spans import JudgeSpan
from tracescore.online._metrics import OnlineMetrics
from tracescore.online._options import OnlineScorer, ProcessorOptions
from tracescore.online._records import ResultSink
from tracescore.online._sampling import RANDOMNESS_MASK
from tracescore.online._sinks import result_sinks
from tracescore.online._worker import Worker
from tracescore.online.intake import EMPTY, TraceInput, TraceLimits

_log = logging.getLogger("tracescore")
_NEVER = 1 << 56  # above every trace's randomness
_SCORING_SHARE = 0.8  # of a flush timeout spent waiting for pending scoring


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
                 judge_spans: Callable[[Any, Sequence[JudgeSpan]], None] | None = None,
                 guard: Guard | None = None) -> None:
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
        self.closing = False
        # failures counted by site, each site logged once (a guard shared with the front door)
        self.guard = guard if guard is not None else Guard(_log)
        self.log_once = self.guard.once
        self._guard_export = self.guard.site("export", "tracescore: downstream on_end failed")
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
        self.runner = Runner(
            held=self.held, metrics=self.metrics, max_wait_s=options.max_wait_s,
            isolation=self.isolation, trace_limits=trace_limits, closing=self._closing,
            routes={o.scorer_id: self._route(o, carrier, logger_provider) for o in scorers},
            guard=self.guard, judge_spans=judge_spans)
        self._plans: dict[tuple[OnlineScorer, ...], _Plan] = {}
        self.conversations: ConversationScope | None = None  # None: no conversation scorer
        if talks:
            self.conversations = ConversationScope(
                talks, conversation_options, lanes=(self.fast, self.worker),
                metrics=self.metrics, carrier=conversation_carrier or _no_carrier,
                logger_provider=logger_provider, result_sinks=self.result_sinks,
                result_events=result_events, guard=self.guard, store=turn_store)
            self.add_timer(self.conversations.tracker.expire)

    def _route(self, online: OnlineScorer, carrier: Callable[[ScoreRun, int], None],
               logger_provider: Any) -> Route:
        """(whether any sink besides the span takes its runs, its sinks in delivery order)."""
        route: list[Sink] = []
        if "span" in online.sinks:
            route.append(SpanSink(self.held))
        route.append(MetricsSink(self.metrics))
        if "carrier" in online.sinks:
            route.append(CarrierSink(carrier, self.guard.site(
                "carrier", "tracescore: carrier span export failed")))
        if "log" in online.sinks:
            route.append(LogSink(logger_provider, self.log_once))
        route.extend(RecordSink(self.result_sinks[n], self.log_once)
                     for n in sorted(online.sinks) if n in self.result_sinks)
        return any(name != "span" for name in online.sinks), tuple(route)

    def _closing(self) -> bool:
        return self.closing

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

    def release_budgets(self, scorers: Sequence[OnlineScorer]) -> None:
        """Give back the budgets `choose` reserved for scorers that will not run (a call the
        door or the hand-off dropped)."""
        for online in scorers:
            online.release_budget()

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
            self.release_budgets(call.scorers)
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
                self.release_budgets(tuple(s for s in call.scorers if s.sinks == {"span"}))
                if not plan.others:
                    return
                call.scorers = tuple(s for s in call.scorers if s.sinks != {"span"})
                plan = self._plan(call.scorers)
        else:
            self.export(item, ())  # a failing downstream must not cost the scoring
        start_ns = time.time_ns()
        for worker, scorers in plan.lanes:
            if not worker.submit(Job(self.runner, key, item, call, start_ns, scorers)):
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
        self.release_budgets(scorers)
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
        with self._guard_export:
            self._export_item(item, events)

    def _release(self, held: Held, reason: str | None) -> None:
        """A held item leaves: settled (`reason` None), or with its waiting scorers unscored."""
        if reason is None:
            self.export(held.item, held.events or ())
            return
        self.runner.cancel(held.key)
        if reason == reasons.TIMEOUT:
            self.metrics.held_timeout(held.agent)
        self.unscored(held.item, held.waiting, reason, held.agent, held.events or ())

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
                agent = job.call.agent if isinstance(job, Job) else getattr(job, "agent", None)
                self.runner.count_shutdown_drop(agent, getattr(job, "scorers", ()))
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
        self.runner.after_fork()
        self.metrics.after_fork()
        for online in self.scorers:
            online.after_fork()



def _no_carrier(*args: object) -> None:
    return None


def _sink_stats(sink: ResultSink) -> dict[str, int]:
    try:
        stats = sink.stats()
        return {str(k): int(v) for k, v in stats.items()}
    except Exception:  # noqa: BLE001 - stats are best effort
        return {}
