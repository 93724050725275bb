"""Decode OTLP protobuf requests (traces, logs, metrics) into plain Python records for assertions."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from opentelemetry.trace import SpanKind

from tracescore._otlp_json import parse_otlp_json


class KindName(str):
    """A span kind name ("INTERNAL", "CLIENT", ...) that also compares equal to `SpanKind` members."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SpanKind):
            other = other.name
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = str.__hash__


class ReceivedEvent(NamedTuple):
    name: str
    attributes: dict[str, Any]


class ReceivedLink(NamedTuple):
    trace_id: str
    span_id: str
    attributes: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class ReceivedSpan:
    """One span as a backend received it; ids are lowercase hex, attributes plain Python values."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    kind: KindName
    attributes: dict[str, Any]
    events: list[ReceivedEvent]
    links: list[ReceivedLink]
    status_code: str  # "UNSET" | "OK" | "ERROR"
    status_message: str
    resource: dict[str, Any]
    scope_name: str
    protocol: str  # "http" | "grpc" | "json"
    start_time_unix_nano: int = 0
    end_time_unix_nano: int = 0

    def events_named(self, name: str) -> list[ReceivedEvent]:
        """The events with this name, in order."""
        return [event for event in self.events if event.name == name]


@dataclass(frozen=True, kw_only=True)
class ReceivedLog:
    """One log record; `body` is decoded like an attribute value."""

    body: Any
    attributes: dict[str, Any]
    trace_id: str | None
    span_id: str | None
    event_name: str
    severity_text: str
    severity_number: int
    resource: dict[str, Any]
    scope_name: str
    protocol: str
    time_unix_nano: int = 0
    observed_time_unix_nano: int = 0


@dataclass(frozen=True, kw_only=True)
class MetricPoint:
    """One data point: `value` for sums/gauges; count/sum/buckets for histograms."""

    attributes: dict[str, Any]
    value: float | int | None = None
    count: int | None = None
    sum: float | None = None
    min: float | None = None
    max: float | None = None
    bucket_counts: list[int] = field(default_factory=list)
    explicit_bounds: list[float] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class ReceivedMetric:
    name: str
    kind: str  # "sum" | "gauge" | "histogram" | "exponential_histogram" | "summary" | ""
    unit: str
    description: str
    points: list[MetricPoint]
    resource: dict[str, Any]
    scope_name: str
    protocol: str


_STATUS_NAMES = {
    Status.STATUS_CODE_UNSET: "UNSET",
    Status.STATUS_CODE_OK: "OK",
    Status.STATUS_CODE_ERROR: "ERROR",
}
_KIND_NAMES = {
    Span.SPAN_KIND_UNSPECIFIED: "UNSPECIFIED",
    Span.SPAN_KIND_INTERNAL: "INTERNAL",
    Span.SPAN_KIND_SERVER: "SERVER",
    Span.SPAN_KIND_CLIENT: "CLIENT",
    Span.SPAN_KIND_PRODUCER: "PRODUCER",
    Span.SPAN_KIND_CONSUMER: "CONSUMER",
}


def any_value(value: AnyValue) -> Any:
    """An OTLP AnyValue as a Python value (arrays -> list, kvlists -> dict, unset -> None)."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return attributes(value.kvlist_value.values)
    return getattr(value, which)


def attributes(pairs: Any) -> dict[str, Any]:
    """Repeated KeyValue as a dict."""
    return {pair.key: any_value(pair.value) for pair in pairs}


def _hex(raw: bytes) -> str | None:
    return raw.hex() if raw and any(raw) else None


def _scoped(
    resource_groups: Iterable[Any], scope_field: str, item_field: str
) -> Iterator[tuple[dict[str, Any], str, Any]]:
    """(resource attributes, scope name, item) for each item of an OTLP export request, e.g.
    `_scoped(request.resource_spans, "scope_spans", "spans")`."""
    for group in resource_groups:
        resource = attributes(group.resource.attributes)
        for scoped in getattr(group, scope_field):
            for item in getattr(scoped, item_field):
                yield resource, scoped.scope.name, item


def spans_from_request(request: ExportTraceServiceRequest, protocol: str) -> list[ReceivedSpan]:
    """Flatten an ExportTraceServiceRequest into ReceivedSpan records."""
    out: list[ReceivedSpan] = []
    for resource, scope_name, span in _scoped(request.resource_spans, "scope_spans", "spans"):
        out.append(
            ReceivedSpan(
                name=span.name,
                trace_id=span.trace_id.hex(),
                span_id=span.span_id.hex(),
                parent_span_id=_hex(span.parent_span_id),
                kind=KindName(_KIND_NAMES.get(span.kind, str(span.kind))),
                attributes=attributes(span.attributes),
                events=[ReceivedEvent(e.name, attributes(e.attributes)) for e in span.events],
                links=[
                    ReceivedLink(
                        link.trace_id.hex(), link.span_id.hex(), attributes(link.attributes)
                    )
                    for link in span.links
                ],
                status_code=_STATUS_NAMES.get(span.status.code, str(span.status.code)),
                status_message=span.status.message,
                resource=resource,
                scope_name=scope_name,
                protocol=protocol,
                start_time_unix_nano=span.start_time_unix_nano,
                end_time_unix_nano=span.end_time_unix_nano,
            )
        )
    return out


def logs_from_request(request: ExportLogsServiceRequest, protocol: str) -> list[ReceivedLog]:
    """Flatten an ExportLogsServiceRequest into ReceivedLog records."""
    out: list[ReceivedLog] = []
    for resource, scope_name, record in _scoped(request.resource_logs, "scope_logs", "log_records"):
        out.append(
            ReceivedLog(
                body=any_value(record.body),
                attributes=attributes(record.attributes),
                trace_id=_hex(record.trace_id),
                span_id=_hex(record.span_id),
                event_name=record.event_name,
                severity_text=record.severity_text,
                severity_number=int(record.severity_number),
                resource=resource,
                scope_name=scope_name,
                protocol=protocol,
                time_unix_nano=int(record.time_unix_nano),
                observed_time_unix_nano=int(record.observed_time_unix_nano),
            )
        )
    return out


def _number(point: Any) -> float | int | None:
    which = point.WhichOneof("value")
    return None if which is None else getattr(point, which)


def _points(metric: Any, kind: str) -> list[MetricPoint]:
    if kind in ("sum", "gauge"):
        return [
            MetricPoint(attributes=attributes(p.attributes), value=_number(p))
            for p in getattr(metric, kind).data_points
        ]
    if kind == "histogram":
        return [
            MetricPoint(
                attributes=attributes(p.attributes),
                count=p.count,
                sum=p.sum if p.HasField("sum") else None,
                min=p.min if p.HasField("min") else None,
                max=p.max if p.HasField("max") else None,
                bucket_counts=list(p.bucket_counts),
                explicit_bounds=list(p.explicit_bounds),
            )
            for p in metric.histogram.data_points
        ]
    if kind in ("exponential_histogram", "summary"):
        return [
            MetricPoint(attributes=attributes(p.attributes), count=p.count, sum=p.sum)
            for p in getattr(metric, kind).data_points
        ]
    return []


def metrics_from_request(
    request: ExportMetricsServiceRequest, protocol: str
) -> list[ReceivedMetric]:
    """Flatten an ExportMetricsServiceRequest into ReceivedMetric records."""
    out: list[ReceivedMetric] = []
    for resource, scope_name, metric in _scoped(
        request.resource_metrics, "scope_metrics", "metrics"
    ):
        kind = metric.WhichOneof("data") or ""
        out.append(
            ReceivedMetric(
                name=metric.name,
                kind=kind,
                unit=metric.unit,
                description=metric.description,
                points=_points(metric, kind),
                resource=resource,
                scope_name=scope_name,
                protocol=protocol,
            )
        )
    return out


def spans_from_otlp_json(data: str | bytes | dict[str, Any]) -> list[ReceivedSpan]:
    """Spans of one OTLP/JSON ExportTraceServiceRequest (e.g. one line of a JSON-lines trace file)."""
    return spans_from_request(parse_otlp_json(data, ExportTraceServiceRequest()), "json")
