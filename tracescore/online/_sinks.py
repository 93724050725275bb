"""Where score events go: onto the evaluated span, onto a carrier child span, into a log record,
or to a result sink outside OpenTelemetry (a `ResultSink`, e.g. Phoenix's span annotations).

Finished spans are immutable, so the span sink builds a copy of the held `ReadableSpan` with
the events appended; the carrier sink builds a new finished span directly (it never passes
through the tracer, so it can never become a scoring candidate itself).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags
from opentelemetry.util.types import AttributeValue

from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError
from tracescore.online._records import ResultSink

_log = logging.getLogger("tracescore")

EventPayload = tuple[str, dict[str, AttributeValue]]

SCOPE = InstrumentationScope("tracescore.online")
_ids = RandomIdGenerator()


def with_events(span: ReadableSpan, events: Sequence[EventPayload]) -> ReadableSpan:
    """A copy of finished `span` with `events` appended (timestamped at the span's end)."""
    if not events:
        return span
    timestamp = span.end_time or time.time_ns()
    added = [Event(name, attributes, timestamp) for name, attributes in events]
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=span._attributes,  # keep the bounded mapping (carries its dropped count)
        events=[*span.events, *added],
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_info=span._instrumentation_info,
        instrumentation_scope=span.instrumentation_scope,
    )


def carrier_time(evaluated_end_ns: int | None, scored_ns: int) -> tuple[int, float]:
    """A carrier span's timestamp and its result's delay in ms. A carrier lasts 0 and sits at
    the end of the span it judges, so a result that comes seconds (or, for a conversation,
    minutes) later never stretches the judged trace nor the latency backends show for it."""
    at = evaluated_end_ns or scored_ns
    return at, max(0, scored_ns - at) / 1e6


def carrier_span(evaluated: ReadableSpan, scorer_name: str, events: Sequence[EventPayload], *,
                 scored_ns: int, agent_name: str | None) -> ReadableSpan:
    """Child span `evaluation {scorer}` of `evaluated`, linked to it, carrying `events`: it
    lasts 0 at the end of `evaluated` (see `carrier_time`)."""
    parent = evaluated.context
    assert parent is not None
    context = SpanContext(
        trace_id=parent.trace_id,
        span_id=_ids.generate_span_id(),
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=parent.trace_state,
    )
    at, delay_ms = carrier_time(evaluated.end_time, scored_ns)
    attributes = carrier_attributes(parent.span_id, events, agent_name, delay_ms)
    error_type = attributes.get(sc.ERROR_TYPE)
    return ReadableSpan(
        name=f"{sc.EVALUATION_SPAN_PREFIX} {scorer_name}",
        context=context,
        parent=parent,
        resource=evaluated.resource,
        attributes=attributes,
        events=[Event(name, attrs, at) for name, attrs in events],
        links=[Link(parent)],
        kind=SpanKind.INTERNAL,
        status=trace.Status(trace.StatusCode.ERROR if error_type else trace.StatusCode.UNSET),
        start_time=at,
        end_time=at,
        instrumentation_scope=SCOPE,
    )


def carrier_attributes(evaluated_span_id: int, events: Sequence[EventPayload],
                       agent_name: str | None, delay_ms: float) -> dict[str, AttributeValue]:
    """The attributes of a carrier span (both front doors build one)."""
    attributes: dict[str, AttributeValue] = {
        sc.TS_EVALUATION_CARRIER: True,
        sc.TS_EVALUATED_SPAN_ID: trace.format_span_id(evaluated_span_id),
        sc.TS_EVALUATION_DELAY_MS: round(delay_ms, 3),
    }
    if agent_name:
        attributes[sc.GEN_AI_AGENT_NAME] = agent_name
    error_type = (events[0][1] if events else {}).get(sc.ERROR_TYPE)
    if error_type is not None:
        attributes[sc.ERROR_TYPE] = error_type
    return attributes


def emit_log_records(evaluated: SpanContext, events: Sequence[EventPayload],
                     logger_provider: Any = None) -> bool:
    """Emit each event as a log record tied to `evaluated` (via `logger_provider`, else the
    global LoggerProvider). Returns False (and emits nothing) when none is configured.
    """
    from opentelemetry import _logs

    provider = logger_provider if logger_provider is not None else _logs.get_logger_provider()
    if _is_noop(provider):
        return False
    logger = provider.get_logger(SCOPE.name)
    context = trace.set_span_in_context(trace.NonRecordingSpan(evaluated))
    now = time.time_ns()
    for name, attributes in events:
        try:
            logger.emit(
                timestamp=now, observed_timestamp=now, context=context,
                severity_number=_logs.SeverityNumber.INFO, attributes=attributes, event_name=name,
            )
        except TypeError:  # SDKs before keyword emit / event_name
            record = _logs.LogRecord(
                timestamp=now, observed_timestamp=now, trace_id=evaluated.trace_id,
                span_id=evaluated.span_id, trace_flags=evaluated.trace_flags,
                severity_number=_logs.SeverityNumber.INFO,
                attributes={**attributes, "event.name": name},
            )
            logger.emit(record)
    return True


def _is_noop(provider: object) -> bool:
    from opentelemetry import _logs

    if isinstance(provider, _logs.NoOpLoggerProvider):
        return True
    try:
        from opentelemetry._logs._internal import ProxyLoggerProvider
    except ImportError:  # pragma: no cover - layout of other SDK versions
        return type(provider).__name__ == "ProxyLoggerProvider"
    return isinstance(provider, ProxyLoggerProvider)


# --- result sinks: scorer results delivered outside the OTLP pipeline ------------------------------
def _phoenix() -> ResultSink:
    from tracescore.online._phoenix_sink import PhoenixSink

    return PhoenixSink()


# sink name -> factory of its default instance (configured from the environment)
RESULT_SINKS: dict[str, Callable[[], ResultSink]] = {"phoenix": _phoenix}


def result_sinks(wanted: Sequence[str], given: Mapping[str, ResultSink] | None
                 ) -> dict[str, ResultSink]:
    """The result sinks by name: those `given`, plus a default instance of each `wanted` one."""
    given = dict(given or {})
    unknown = sorted(str(name) for name in set(given) - set(RESULT_SINKS))
    if unknown:
        raise ConfigurationError(
            f"ScoringSpanProcessor sinks: unknown result sink {', '.join(unknown)}; "
            f"known: {', '.join(RESULT_SINKS)}"
        )
    for name, sink in given.items():
        if not all(callable(getattr(sink, m, None)) for m in ("emit", "force_flush", "shutdown")):
            raise ConfigurationError(
                f"ScoringSpanProcessor sinks[{name!r}] must have emit, force_flush and shutdown "
                f"methods, got {sink!r}"
            )
    for name in wanted:
        if name in RESULT_SINKS and name not in given:
            given[name] = RESULT_SINKS[name]()
    return given
