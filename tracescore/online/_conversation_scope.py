"""Scoring a conversation's version and delivering its result, for the scoring core.

A version (`_conversations.Version`) is scored by each sampled conversation scorer on the turns
its filters took, on the core's worker lanes (never in the scoring process), after its rate
limit and budget. Its result goes to:

- a carrier span `evaluation {scorer}` in the last turn's trace, a child of that turn, with a
  span link to every turn judged (the front door builds and sends it);
- a `gen_ai.evaluation.result` log record tied to the last turn (the "log" sink);
- result sinks such as Phoenix (an annotation on the last turn's span: each version has its
  own last turn, so versions are appended, never overwritten);
- the metrics (sampled, scored, failed, dropped by reason, the score histogram);
- with the judge traced, its calls' `chat` spans (a trace of their own, linked to the last
  turn; `ScoreRun.judge`), which the front door sends with the carrier.

Every result carries `gen_ai.conversation.id` and the version: the number of turns it saw and
its first and last turn (`<trace id>/<span id>`), and what let it go (quiet, turn limit, ...).
A version with a store lands (its turns marked scored) once each of its jobs has handed its
result to every sink, or was dropped and counted; a job cut short by shutdown never lands.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import (
    Link,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    format_span_id,
    format_trace_id,
)

from tracescore import _semconv as sc
from tracescore._guard import Guard, Site
from tracescore._suppress import suppressed
from tracescore.online import _metrics as reasons
from tracescore.online._conversations import (
    ConversationOptions,
    ConversationTracker,
    Turn,
    TurnStore,
    Version,
)
from tracescore.online._delivery import (
    LogSink,
    MetricsSink,
    RecordSink,
    ScoreRun,
    Sink,
)
from tracescore.online._events import EventPayload
from tracescore.online._judge_spans import judge_spans
from tracescore.online._metrics import OnlineMetrics
from tracescore.online._options import OnlineScorer
from tracescore.online._records import ResultSink
from tracescore.online._sinks import SCOPE, carrier_attributes, carrier_time
from tracescore.online._worker import Worker
from tracescore.scoring._base import ScorerInput, evaluate_call
from tracescore.scoring._judge_trace import JudgeCall, recording
from tracescore.scoring._runs import Turn as ScoredTurn

# (run, turns judged, end ns): the front door's carrier span for a conversation's result
ConversationCarrier = Callable[[ScoreRun, Sequence[Turn], int], None]
_ids = RandomIdGenerator()
ResultEvents = Callable[[OnlineScorer, Any, BaseException | None, str],
                        tuple[list[EventPayload], BaseException | None]]


def turn_ref(turn: Turn) -> str:
    """A turn as results name it: `<trace id>/<span id>` in hex."""
    return f"{format_trace_id(turn.trace_id)}/{format_span_id(turn.span_id)}"


def conversation_attributes(conversation: str, turns: Sequence[Turn], trigger: str,
                            missing: int = 0) -> dict[str, Any]:
    """What every result of a conversation's version carries (the turns it lacks, if any)."""
    attributes = {sc.GEN_AI_CONVERSATION_ID: conversation,
                  sc.TS_CONVERSATION_TURNS: len(turns),
                  sc.TS_CONVERSATION_FIRST_TURN: turn_ref(turns[0]),
                  sc.TS_CONVERSATION_LAST_TURN: turn_ref(turns[-1]),
                  sc.TS_CONVERSATION_TRIGGER: trigger}
    if missing:
        attributes[sc.TS_CONVERSATION_TURNS_MISSING] = missing
    return attributes


class _CarrierSink:
    def __init__(self, carrier: ConversationCarrier, failed: Site) -> None:
        self._carrier = carrier
        self._failed = failed  # the guard's site for a carrier that could not be sent

    def deliver(self, run: ScoreRun) -> bool:
        with self._failed:
            self._carrier(run, run.item, time.time_ns())
        return True


@dataclass(slots=True)
class _ConversationJob:
    """A worker job scoring one version with one scorer; `agent` and `scorers` say whom a job
    never run (shutdown) was for."""

    scope: ConversationScope
    online: OnlineScorer
    version: Version
    turns: tuple[Turn, ...]
    start_ns: int

    @property
    def agent(self) -> str | None:
        return self.turns[-1].agent

    @property
    def scorers(self) -> tuple[OnlineScorer, ...]:
        return (self.online,)

    def __call__(self) -> Awaitable[None]:
        return self.scope._run(self.online, self.version, self.turns, self.start_ns)


class ConversationScope:
    """The conversation scorers of one core: their tracker, runs and routes."""

    def __init__(self, scorers: Sequence[OnlineScorer], options: ConversationOptions, *,
                 lanes: tuple[Worker, Worker], metrics: OnlineMetrics,
                 carrier: ConversationCarrier, logger_provider: Any,
                 result_sinks: Mapping[str, ResultSink], result_events: ResultEvents,
                 guard: Guard, store: TurnStore | None = None) -> None:
        log_once = guard.once
        events = metrics.meter.create_counter(
            sc.METRIC_CONVERSATION_EVENTS, unit="{event}",
            description="Conversation scope: turns taken, versions scored, conversations "
                        "let go early and turns dropped, by event")

        def counted(key: str, n: int) -> None:
            try:
                events.add(n, {sc.TS_CONVERSATION_EVENT: key})
            except Exception:  # noqa: BLE001 - a broken meter costs the metric only
                log_once("conversation_metric", "tracescore: recording a conversation "
                         "metric failed", exc_info=True)

        self.tracker = ConversationTracker(scorers, options, score=self._score, store=store,
                                           counted=counted)
        self.keeps_nothing = store is None  # in process: pending turns are scored at shutdown
        # rescore: False for a scorer whose result over these turns the input holds already
        self.keep: Callable[[OnlineScorer, str, tuple[Turn, ...]], bool] | None = None
        self._fast, self._judged = lanes
        self._metrics = metrics
        self._result_events = result_events
        self._guard_deliver = guard.site("conversation_deliver", "tracescore: delivering a "
                                         "conversation's score failed")
        carrier_failed = guard.site("conversation_carrier", "tracescore: a conversation's "
                                    "carrier span could not be sent")
        self._routes: dict[str, tuple[Sink, ...]] = {}
        for online in scorers:
            route: list[Sink] = [MetricsSink(metrics), _CarrierSink(carrier, carrier_failed)]
            if "log" in online.sinks:
                route.append(LogSink(logger_provider, log_once))
            route.extend(RecordSink(result_sinks[n], log_once)
                         for n in sorted(online.sinks) if n in result_sinks)
            self._routes[online.scorer_id] = tuple(route)

    def _score(self, version: Version, sampled: tuple[OnlineScorer, ...]) -> None:
        """A version let go by the tracker (its timer): queue a run per sampled scorer."""
        for online in sampled:
            turns = tuple(t for t in version.turns if online.scorer_id in t.scorers)
            if not turns or (self.keep is not None
                             and not self.keep(online, version.conversation, turns)):
                continue
            agent = turns[-1].agent
            refused = online.admit()
            if refused is not None:
                self._metrics.dropped(online.scorer_id, agent, refused)
                continue
            self._metrics.sampled(online.scorer_id, agent)
            judged = getattr(online.scorer, "uses_judge", True) is not False
            lane = self._judged if judged else self._fast
            if version.flight is not None:
                version.flight.add()
            if not lane.submit(_ConversationJob(self, online, version, turns, time.time_ns())):
                online.release_budget()
                self._metrics.dropped(online.scorer_id, agent, reasons.QUEUE_FULL)
                if version.flight is not None:
                    version.flight.land()  # dropped, counted: not scored again

    async def _run(self, online: OnlineScorer, version: Version, turns: tuple[Turn, ...],
                   start_ns: int) -> None:
        run_id = uuid.uuid4().hex
        last = turns[-1]
        result: Any = None
        error: BaseException | None = None
        fleet = None
        judge_calls: list[JudgeCall] | None = None
        try:
            fleet = await online.admit_fleet()
            if fleet is None:  # the fleet's limits refused it (its local budget is given back)
                self._metrics.dropped(online.scorer_id, last.agent, reasons.RATE_LIMITED)
                return
            with suppressed(), recording(bool(online.trace_judge)) as judge_calls:
                result = await asyncio.wait_for(evaluate_call(online.scorer, ScorerInput(
                    input=last.input, output=last.output, run_id=run_id,
                    turns=tuple(ScoredTurn(input=t.input, output=t.output) for t in turns),
                )), online.timeout_s)
        except asyncio.CancelledError:  # shutdown gave up on this run
            online.release_budget(fleet)
            self._metrics.dropped(online.scorer_id, last.agent, reasons.SHUTDOWN)
            raise
        except Exception as exc:  # noqa: BLE001 - failures are data
            error = exc
        with self._guard_deliver:
            cost = getattr(getattr(result, "usage", None), "cost_usd", None)
            online.settle_budget(float(cost) if isinstance(cost, (int, float)) else None,
                                 fleet)
            events, error = self._result_events(online, result, error, run_id)
            events[0][1].update(conversation_attributes(version.conversation, turns,
                                                        version.reason, version.missing))
            # the judge traced: its spans linked to the last turn, sent with the carrier
            traced = judge_spans(judge_calls or (), (last.trace_id, last.span_id),
                                 scorer_id=online.scorer_id, scorer_name=online.scorer_name,
                                 result=events[0][1])
            run = ScoreRun((last.trace_id, last.span_id), turns, online, last.agent, events,
                           error, None if error is not None else float(result.score),
                           start_ns, closing=False, landed=True, judge=tuple(traced))
            for sink in self._routes[online.scorer_id]:
                sink.deliver(run)
        if version.flight is not None:
            version.flight.land()


MAX_LINKS = 128  # the SDK's default span link limit: the latest turns are linked


def carrier_fields(run: ScoreRun, turns: Sequence[Turn], delay_ms: float) -> dict[str, Any]:
    """The carrier span's attributes (both front doors): the carrier's own, and the version."""
    attributes: dict[str, Any] = carrier_attributes(turns[-1].span_id, run.events, run.agent,
                                                    delay_ms)
    first = run.events[0][1]
    for key in (sc.GEN_AI_CONVERSATION_ID, sc.TS_CONVERSATION_TURNS,
                sc.TS_CONVERSATION_FIRST_TURN, sc.TS_CONVERSATION_LAST_TURN,
                sc.TS_CONVERSATION_TURNS_MISSING):
        if key in first:
            attributes[key] = first[key]
    return attributes


def conversation_carrier_span(run: ScoreRun, turns: Sequence[Turn], end_ns: int, resource: Any
                 ) -> ReadableSpan:
    """The SDK carrier span of a conversation's result: a child of its last turn, linked to
    every turn (the latest `MAX_LINKS`), lasting 0 at the last turn's end (`carrier_time`)."""
    last = turns[-1]
    parent = SpanContext(last.trace_id, last.span_id, is_remote=False,
                         trace_flags=TraceFlags(TraceFlags.SAMPLED))
    context = SpanContext(last.trace_id, _ids.generate_span_id(), is_remote=False,
                          trace_flags=TraceFlags(TraceFlags.SAMPLED))
    at, delay_ms = carrier_time(last.end_ns, end_ns)
    attributes = carrier_fields(run, turns, delay_ms)
    links = [Link(SpanContext(t.trace_id, t.span_id, is_remote=True,
                              trace_flags=TraceFlags(TraceFlags.SAMPLED)))
             for t in turns[-MAX_LINKS:]]
    return ReadableSpan(
        name=f"{sc.EVALUATION_SPAN_PREFIX} {run.online.scorer_name}", context=context,
        parent=parent, resource=resource, attributes=attributes,
        events=[Event(name, attrs, at) for name, attrs in run.events], links=links,
        kind=SpanKind.INTERNAL,
        status=Status(StatusCode.ERROR if sc.ERROR_TYPE in attributes else StatusCode.UNSET),
        start_time=at, end_time=at, instrumentation_scope=SCOPE)
