"""Where one scorer run's events go: objects of one `Sink` interface, called in one loop.

A `ScoreRun` is the outcome of one scorer on one agent call. The core routes it, in order, to the
sinks its scorer names (`OnlineScorer.sinks`) and to the metrics:

- `SpanSink`: onto the held span (`HoldTable.settle`), which leaves once nothing else is waited for;
- `MetricsSink`: scored / failed, counted only where the run landed;
- `CarrierSink`: a child span `evaluation {scorer}` beside the evaluated one (built by the front
  door: an SDK span in process, a protobuf span at the gateway);
- `LogSink`: one log record per event, tied to the evaluated span;
- `RecordSink`: a `ResultSink` outside OpenTelemetry (e.g. Phoenix), as a `ScoreRecord`.

A sink's `deliver` returns True when the run landed there; one that raises is logged once and
costs neither the others nor the span.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from opentelemetry.trace import SpanContext, TraceFlags

from tracescore._guard import Site
from tracescore.online._events import EventPayload, error_type
from tracescore.online._hold import HoldTable, Key
from tracescore.online._metrics import OnlineMetrics
from tracescore.online._options import OnlineScorer
from tracescore.online._quality import with_agent
from tracescore.online._records import ResultSink, ScoreRecord
from tracescore.online._sinks import emit_log_records
from tracescore.scoring._provenance import scorer_version

LogOnce = Callable[..., None]  # (key, message, *args, exc_info=...)


@dataclass(slots=True)
class ScoreRun:
    """One scorer run on one agent call, on its way to the sinks."""

    key: Key  # (trace id, span id) of the evaluated span
    item: Any  # what the front door gave for it (an SDK span, a one-span OTLP request)
    online: OnlineScorer
    agent: str | None
    events: list[EventPayload]
    error: BaseException | None
    score: float | None
    start_ns: int
    closing: bool  # the core is shutting down (its downstream still takes results until closed)
    landed: bool = False
    # a conversation's judge calls, traced (`JudgeSpan`s): its front door's carrier sends them
    judge: tuple[Any, ...] = ()


class Sink(Protocol):
    """One destination of score runs."""

    def deliver(self, run: ScoreRun) -> bool: ...


class SpanSink:
    """The events onto the held span."""

    def __init__(self, held: HoldTable) -> None:
        self._held = held

    def deliver(self, run: ScoreRun) -> bool:
        return self._held.settle(run.key, {run.online.scorer_id: run.events})


class MetricsSink:
    """`scored` (with the score) or `failed` (with the error type), where the run landed."""

    def __init__(self, metrics: OnlineMetrics) -> None:
        self._metrics = metrics

    def deliver(self, run: ScoreRun) -> bool:
        if run.landed and run.error is None and run.score is not None:
            self._metrics.scored(run.online.scorer_id, run.agent, run.score)
        elif run.landed and run.error is not None:
            self._metrics.failed(run.online.scorer_id, run.agent, error_type(run.error))
        if run.landed and run.events:
            self._metrics.result(run.events[0][1], run.agent,
                                 None if run.error is None else error_type(run.error))
        return False


class CarrierSink:
    """A carrier span per run, built and exported by `export(run, end_ns)`."""

    def __init__(self, export: Callable[[ScoreRun, int], None], failed: Site) -> None:
        self._export = export
        self._failed = failed  # the guard's site for a failing export

    def deliver(self, run: ScoreRun) -> bool:
        with self._failed:
            self._export(run, time.time_ns())
        return True


class LogSink:
    """One log record per event, via `logger_provider` (else the global one)."""

    def __init__(self, logger_provider: Any, log_once: LogOnce) -> None:
        self._provider = logger_provider
        self._log_once = log_once

    def deliver(self, run: ScoreRun) -> bool:
        trace_id, span_id = run.key
        evaluated = SpanContext(trace_id, span_id, is_remote=False,
                                trace_flags=TraceFlags(TraceFlags.SAMPLED))
        if not emit_log_records(evaluated, with_agent(run.events, run.agent), self._provider):
            self._log_once("log", "tracescore: the 'log' sink needs a LoggerProvider "
                           "(opentelemetry._logs.set_logger_provider); no records emitted")
            return False
        return True


class RecordSink:
    """A `ScoreRecord` per run to a result sink outside OpenTelemetry."""

    def __init__(self, sink: ResultSink, log_once: LogOnce) -> None:
        self.sink = sink
        self._log_once = log_once

    def deliver(self, run: ScoreRun) -> bool:
        online = run.online
        trace_id, span_id = run.key
        record = ScoreRecord(
            trace_id=trace_id, span_id=span_id, scorer_id=online.scorer_id,
            scorer_name=online.scorer_name, judged=bool(getattr(online.scorer, "uses_judge", True)),
            scorer_version=scorer_version(online.scorer), attributes=run.events[0][1],
            scope=str(getattr(online.scorer, "scope", "call")),
        )
        return call_sink(self.sink, "emit", self._log_once, record)


def call_sink(sink: ResultSink, method: str, log_once: LogOnce, *args: Any) -> bool:
    """`sink.method(*args)`; a raising sink is logged once and counts as a failed call."""
    try:
        return getattr(sink, method)(*args) is not False
    except Exception:  # noqa: BLE001 - a broken sink must not cost the others or the spans
        log_once(f"sink:{method}", "tracescore: result sink %r failed in %s", sink, method,
                 exc_info=True)
        return False

