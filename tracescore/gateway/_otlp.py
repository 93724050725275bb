"""OTLP protobuf spans <-> what the scoring engine reads: attributes, SDK spans, added events.

The gateway keeps every received span as protobuf and forwards it as such; only spans that may
be agent calls are read here, into a light `ReadableSpan` (no events) the processor can hold.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from tracescore.online._sampling import RANDOMNESS_MASK

SpanKey = tuple[int, int]
_KINDS = {1: SpanKind.INTERNAL, 2: SpanKind.SERVER, 3: SpanKind.CLIENT, 4: SpanKind.PRODUCER,
          5: SpanKind.CONSUMER}
_STATUS = {0: StatusCode.UNSET, 1: StatusCode.OK, 2: StatusCode.ERROR}


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


def value_of(value: AnyValue) -> Any:
    """A Python value for an OTLP AnyValue (maps and bytes become JSON / hex text)."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return tuple(value_of(v) for v in value.array_value.values)
    if which == "kvlist_value":
        return json.dumps({kv.key: _jsonable(value_of(kv.value))
                           for kv in value.kvlist_value.values}, ensure_ascii=False)
    if which == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, which)


def attributes_of(pairs: Sequence[KeyValue]) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in pairs}


def readable_span(resource_spans: ResourceSpans, scope_spans: ScopeSpans, span: Span
                  ) -> ReadableSpan:
    """An SDK span with the protobuf span's identity, name, times and attributes, no events:
    what the processor holds; the events it adds are put back on the protobuf span."""
    trace_id, span_id = key_of(span)
    context = SpanContext(trace_id, span_id, is_remote=False,
                          trace_flags=TraceFlags(TraceFlags.SAMPLED))
    parent = None
    if span.parent_span_id:
        parent = SpanContext(trace_id, int.from_bytes(span.parent_span_id, "big"), is_remote=True)
    scope = scope_spans.scope
    return ReadableSpan(
        name=span.name,
        context=context,
        parent=parent,
        resource=Resource(attributes_of(resource_spans.resource.attributes)),
        attributes=attributes_of(span.attributes),
        kind=_KINDS.get(span.kind, SpanKind.INTERNAL),
        status=Status(_STATUS.get(span.status.code, StatusCode.UNSET),
                      span.status.message or None),
        start_time=span.start_time_unix_nano,
        end_time=span.end_time_unix_nano,
        instrumentation_scope=InstrumentationScope(scope.name, scope.version or None),
    )


def add_events(span: Span, events: Sequence[Event]) -> None:
    """Append SDK events (the processor's score events) to a protobuf span."""
    for event in events:
        added = span.events.add(name=event.name, time_unix_nano=event.timestamp)
        for key, value in (event.attributes or {}).items():
            set_value(added.attributes.add(key=key).value, value)


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


def _jsonable(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value
