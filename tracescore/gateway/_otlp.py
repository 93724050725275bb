"""OTLP protobuf spans <-> what the scoring core reads: ids, attributes, added events, carriers.

The gateway keeps every received span as protobuf and forwards it as such; only the attributes
of spans that may be agent calls are decoded, and the core's events are written back onto them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

from tracescore.online.core import JUDGE_SCOPE, RANDOMNESS_MASK, JudgeSpan

SpanKey = tuple[int, int]
_KIND_INTERNAL = 1
_KIND_CLIENT = 3
_STATUS_ERROR = 2
_ids = RandomIdGenerator()


def key_of(span: Span) -> SpanKey:
    """(trace id, span id) of a protobuf span, as the SDK's integers."""
    return int.from_bytes(span.trace_id, "big"), int.from_bytes(span.span_id, "big")


def randomness(trace_id: bytes) -> int:
    """The 56 random bits of a trace id (as `tracescore.online._sampling` reads them)."""
    return int.from_bytes(trace_id[-7:], "big") & RANDOMNESS_MASK


def spans_of(request: ExportTraceServiceRequest) -> Iterator[tuple[ResourceSpans, ScopeSpans, Span]]:
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield resource_spans, scope_spans, span


def count_spans(request: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


def add_events(span: Span, events: Sequence[tuple[str, Mapping[str, Any]]],
               time_ns: int) -> None:
    """Append events (name, attributes), timestamped `time_ns`, to a protobuf span."""
    for name, attributes in events:
        added = span.events.add(name=name, time_unix_nano=time_ns)
        for key, value in attributes.items():
            set_value(added.attributes.add(key=key).value, value)


def carrier_request(evaluated: ExportTraceServiceRequest, name: str,
                    attributes: Mapping[str, Any], events: Sequence[tuple[str, Mapping[str, Any]]],
                    *, start_ns: int, end_ns: int, scope: str) -> ExportTraceServiceRequest:
    """A request carrying a carrier span: a child of the only span of `evaluated` (same
    resource), linked to it, with `attributes` and `events`; status error with `error.type`."""
    source = evaluated.resource_spans[0]
    parent = only_span(evaluated)
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.extend(source.resource.attributes)
    ss = rs.scope_spans.add()
    ss.scope.name = scope
    span = ss.spans.add(trace_id=parent.trace_id, span_id=_random_span_id(),
                        parent_span_id=parent.span_id, name=name, kind=_KIND_INTERNAL,
                        start_time_unix_nano=start_ns,
                        end_time_unix_nano=max(end_ns, start_ns))
    for key, value in attributes.items():
        set_value(span.attributes.add(key=key).value, value)
    add_events(span, events, end_ns)
    span.links.add(trace_id=parent.trace_id, span_id=parent.span_id)
    if "error.type" in attributes:
        span.status.code = _STATUS_ERROR
    return request


def _random_span_id() -> bytes:
    return _ids.generate_span_id().to_bytes(8, "big")


def single_request(resource_spans: ResourceSpans, scope_spans: ScopeSpans, span: Span
                   ) -> ExportTraceServiceRequest:
    """A request carrying one span with its resource and scope."""
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add(schema_url=resource_spans.schema_url)
    rs.resource.CopyFrom(resource_spans.resource)
    ss = rs.scope_spans.add(schema_url=scope_spans.schema_url)
    ss.scope.CopyFrom(scope_spans.scope)
    ss.spans.add().CopyFrom(span)
    return request


def only_span(request: ExportTraceServiceRequest) -> Span:
    """The span of a `single_request`."""
    return request.resource_spans[0].scope_spans[0].spans[0]


def set_value(target: AnyValue, value: object) -> None:
    """Write a Python value (bool, int, float, str, list; anything else as its text) into `target`."""
    if isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = value
    elif isinstance(value, float):
        target.double_value = value
    elif isinstance(value, str):
        target.string_value = value
    elif isinstance(value, (list, tuple)):
        array = target.array_value
        for item in value:
            set_value(array.values.add(), item)
    else:
        target.string_value = str(value)



def judge_request(evaluated: ExportTraceServiceRequest, spans: Sequence[JudgeSpan]
                  ) -> ExportTraceServiceRequest:
    """A request carrying the judge's `spans` (`online._judge_spans`), client spans of their
    own trace with the evaluated span's resource, each linked to it."""
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.extend(evaluated.resource_spans[0].resource.attributes)
    ss = rs.scope_spans.add()
    ss.scope.name = JUDGE_SCOPE.name
    for judge in spans:
        span = ss.spans.add(trace_id=judge.trace_id.to_bytes(16, "big"),
                            span_id=judge.span_id.to_bytes(8, "big"), name=judge.name,
                            kind=_KIND_CLIENT, start_time_unix_nano=judge.start_ns,
                            end_time_unix_nano=judge.end_ns)
        for key, value in judge.attributes.items():
            set_value(span.attributes.add(key=key).value, value)
        span.links.add(trace_id=judge.evaluated[0].to_bytes(16, "big"),
                       span_id=judge.evaluated[1].to_bytes(8, "big"))
        if judge.error:
            span.status.code = _STATUS_ERROR
    return request
