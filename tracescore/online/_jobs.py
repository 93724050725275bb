"""The worker side of one handed-off agent call: its `Job` runs its scorers (`Runner`).

A run whose only sink is the held span starts only while that span has time left for it
(`_admits`); the fleet's limits are reserved here, never in the agent's thread; the scorer runs
in the worker or the scoring process (`_isolation`) with its tool calls, context and run steps
decoded on first use; its events are routed to the scorer's sinks (`_delivery`). Runs still
scoring for a span that left without them are cancelled (`Runner.cancel`).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tracescore import _semconv as sc
from tracescore._content import finish_text
from tracescore._guard import Guard
from tracescore._suppress import suppressed
from tracescore.online import _metrics as reasons
from tracescore.online._delivery import ScoreRun, Sink
from tracescore.online._events import (
    EventPayload,
    error_message,
    error_type,
    evaluation_events,
    unscored_event,
)
from tracescore.online._fleet_limits import Reservation
from tracescore.online._hold import HoldTable, Key
from tracescore.online._isolation import ProcessRunner
from tracescore.online._judge_spans import JudgeSpan, judge_spans
from tracescore.online._metrics import OnlineMetrics
from tracescore.online._options import OnlineScorer, reference_fallback
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

_RECENT = 0.3  # weight of the latest run in a scorer's recent run duration (admission)

Route = tuple[bool, tuple[Sink, ...]]  # (any sink besides the span takes its runs, its sinks)


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
class Job:
    """A worker job (calling it starts its run): one object per job, since every object a held
    call keeps alive brings the next garbage collection closer in the agent's thread."""

    runner: Runner
    key: Key
    item: Any
    call: Call
    start_ns: int
    scorers: tuple[OnlineScorer, ...]  # this job's share of the call's scorers

    def __call__(self) -> Awaitable[None]:
        return self.runner.run(self)


class Runner:
    """Runs jobs in the worker lanes and delivers each run to its scorer's sinks."""

    def __init__(self, *, held: HoldTable, metrics: OnlineMetrics, max_wait_s: float,
                 isolation: ProcessRunner | None, trace_limits: TraceLimits,
                 routes: dict[str, Route], closing: Callable[[], bool], guard: Guard,
                 judge_spans: Callable[[Any, Sequence[JudgeSpan]], None] | None) -> None:
        self.held, self.metrics, self.max_wait_s = held, metrics, max_wait_s
        self.isolation, self.trace_limits, self.routes = isolation, trace_limits, routes
        self.closing, self._judge_spans = closing, judge_spans
        self.log_once = guard.once
        self._guard_deliver = guard.site("deliver", "tracescore: delivering an online score "
                                         "failed")
        self._inflight: dict[Key, list[asyncio.Task[None]]] = {}
        self._lock = threading.Lock()
        # admission of span-sink runs: a scorer's recent run duration (seconds), by scorer id
        self._durations: dict[str, float] = {}

    async def run(self, job: Job) -> None:
        """Run the job's scorers side by side (in the worker's loop)."""
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

    def cancel(self, key: Key) -> None:
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

    def count_shutdown_drop(self, agent: str | None, scorers: Sequence[OnlineScorer], *,
                            released: bool = False) -> None:
        """Count runs lost to shutdown (their budgets given back unless `released`); span-sink
        runs are counted when their span is released."""
        if not released:
            release_budgets(scorers)
        for online in scorers:
            if "span" not in online.sinks:
                self.metrics.dropped(online.scorer_id, agent, reasons.SHUTDOWN)

    def after_fork(self) -> None:
        """In a forked child: the parent's runs are not ours; its lock may be held."""
        self._inflight = {}
        self._lock = threading.Lock()

    # --- one scorer on one call ---------------------------------------------------------------------
    async def _run_scorer(self, job: Job, online: OnlineScorer) -> None:
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
        if expected is None or expected >= self.max_wait_s:
            return True
        left = self.held.time_left(key)
        return left is not None and left >= expected

    def _fleet_refused(self, job: Job, online: OnlineScorer) -> None:
        """The fleet's limits refused a run: dropped as rate_limited, and 'unscored' on its held
        span (a span already released counted its drop then)."""
        landed = "span" in online.sinks and self.held.settle(job.key, {online.scorer_id: [
            unscored_event(scorer_id=online.scorer_id, scorer_name=online.scorer_name,
                           reason=reasons.RATE_LIMITED, sampling_rate=online.rate)]})
        if landed or "span" not in online.sinks:
            self.metrics.dropped(online.scorer_id, job.call.agent, reasons.RATE_LIMITED)

    async def _run_admitted(self, job: Job, online: OnlineScorer, fleet: Reservation) -> None:
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
        except Exception as exc:  # noqa: BLE001 - failures are data: the run's error event
            error = exc
        with self._guard_deliver:
            self._deliver(job, online, result, error, run_id, fallback, judge_calls, fleet)

    def _trace_of(self, call: Call) -> TraceInput:
        """The call's tool calls and context within the limits (decoded once, cached)."""
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

    def _run_of(self, call: Call, online: OnlineScorer) -> Run | None:
        """The run a run-scope scorer judges (decoded once, cached); None for other scorers."""
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

    def _deliver(self, job: Job, online: OnlineScorer, result: Any, error: BaseException | None,
                 run_id: str, fallback: str | None = None,
                 judge_calls: Sequence[JudgeCall] | None = None,
                 fleet: Reservation | None = None) -> None:
        online.settle_budget(cost_of(result), fleet)
        events, error = result_events(online, result, error, run_id)
        traced = judge_spans(judge_calls or (), job.key, scorer_id=online.scorer_id,
                             scorer_name=online.scorer_name, result=events[0][1])
        if fallback is not None and error is None:  # scored, but not against a ground truth
            events[0][1][sc.TS_REFERENCE_MISSING] = True
            events[0][1][sc.TS_REFERENCE_FALLBACK] = fallback
        if job.call.partial is not None and getattr(online.scorer, "scope", "call") == "run":
            events[0][1][sc.TS_RUN_PARTIAL] = job.call.partial
        others, route = self.routes[online.scorer_id]
        run = ScoreRun(job.key, job.item, online, job.call.agent, events, error,
                       None if error is not None else float(result.score), job.start_ns,
                       self.closing())
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


def result_events(online: OnlineScorer, result: Any, error: BaseException | None,
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


def cost_of(result: Any) -> float | None:
    """Judge cost of a run's result, None when unknown or unreadable."""
    try:
        cost = result.usage.cost_usd
    except Exception:  # noqa: BLE001 - no result, or one that breaks the contract
        return None
    return float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None


def release_budgets(scorers: Sequence[OnlineScorer]) -> None:
    """Give back the budget reservations of scorers that will not run."""
    for online in scorers:
        online.release_budget()
