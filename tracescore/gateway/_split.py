"""Requests to the next hop within a byte limit (`exporter.max_batch_bytes`).

An ExportTraceServiceRequest is split by resource, scope and span, keeping its structure (each
part carries the resource and scope of its spans); a span too large for a request of its own is
capped the way in-process export caps spans (`tracescore._span_cap`: its largest strings cut to
one length and marked, then its last events and links dropped). Sizes are exact protobuf sizes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from tracescore import _semconv as sc
from tracescore._span_cap import cut_text, water_level

_FRAME = 6  # a field tag plus the longest length varint a part can need
_MARKS = 160  # room for the attributes that mark a capped span
MIN_MAX_BATCH_BYTES = 64 << 10


class Undeliverable(ValueError):
    """A span that cannot fit the limit even capped (its resource, scope or keys alone are too big)."""


@dataclass(slots=True)
class Parts:
    """The request as (serialized part, span count) pairs, each at most the limit; `capped`:
    spans cut to fit."""

    bodies: list[tuple[bytes, int]] = field(default_factory=list)
    capped: int = 0


def split_request(request: ExportTraceServiceRequest, max_bytes: int) -> Parts:
    """`request` in parts of at most `max_bytes` encoded bytes (one part when it fits), or
    `Undeliverable`."""
    parts = Parts()
    if request.ByteSize() <= max_bytes:
        parts.bodies.append((request.SerializeToString(), _count(request)))
        return parts
    current = ExportTraceServiceRequest()
    size = count = 0
    for rs in request.resource_spans:
        rs_shell = ResourceSpans(resource=rs.resource, schema_url=rs.schema_url)
        rs_cost = rs_shell.ByteSize() + _FRAME
        open_rs: ResourceSpans | None = None
        for ss in rs.scope_spans:
            ss_shell = ScopeSpans(scope=ss.scope, schema_url=ss.schema_url)
            ss_cost = ss_shell.ByteSize() + _FRAME
            open_ss: ScopeSpans | None = None
            for span in ss.spans:
                span_cost = span.ByteSize() + _FRAME
                shells = (0 if open_rs is not None else rs_cost) + (0 if open_ss is not None else ss_cost)
                if size + shells + span_cost > max_bytes and count:
                    parts.bodies.append((current.SerializeToString(), count))
                    current, size, count = ExportTraceServiceRequest(), 0, 0
                    open_rs = open_ss = None
                    shells = rs_cost + ss_cost
                if open_rs is None:
                    open_rs = current.resource_spans.add()
                    open_rs.CopyFrom(rs_shell)
                    open_ss = None
                if open_ss is None:
                    open_ss = open_rs.scope_spans.add()
                    open_ss.CopyFrom(ss_shell)
                added = open_ss.spans.add()
                added.CopyFrom(span)
                if shells + span_cost > max_bytes:  # alone in its part and still too big
                    room = max_bytes - shells - _FRAME
                    for _ in range(3):  # the cut is an estimate: aim lower by what it missed
                        added.CopyFrom(span)
                        _cap(added, room)
                        over = current.ByteSize() - max_bytes
                        if over <= 0:
                            break
                        room -= over + _MARKS
                    else:
                        raise Undeliverable(
                            f"a span of {span.ByteSize()} bytes cannot be cut under "
                            f"{max_bytes} bytes (exporter.max_batch_bytes)")
                    parts.capped += 1
                    span_cost = added.ByteSize() + _FRAME
                size += shells + span_cost
                count += 1
    if count:
        parts.bodies.append((current.SerializeToString(), count))
    return parts


def _count(request: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


def _cap(span: Span, room: int) -> None:
    """Cut `span` in place to about `room` encoded bytes and mark it (`tracescore.span.*`)."""
    original = span.ByteSize()
    target = room - _MARKS
    values = list(_strings(span))
    sizes = [_size(value) for value in values]
    level = water_level((original - sum(sizes), sizes), target)
    for value, size in zip(values, sizes):
        if size > level:
            if value.WhichOneof("value") == "bytes_value":
                value.bytes_value = value.bytes_value[:level]
            else:
                value.string_value = cut_text(value.string_value, level)
    if len(span.status.message.encode("utf-8", "surrogatepass")) > level:
        span.status.message = cut_text(span.status.message, level)
    dropped = 0
    while span.ByteSize() > target and (span.events or span.links):
        if span.events:
            del span.events[-1]
            dropped += 1
        else:
            del span.links[-1]
            span.dropped_links_count += 1
    span.dropped_events_count += dropped
    span.attributes.add(key=sc.TS_SPAN_TRUNCATED).value.bool_value = True
    span.attributes.add(key=sc.TS_SPAN_ORIGINAL_BYTES).value.int_value = original
    if dropped:
        span.attributes.add(key=sc.TS_SPAN_DROPPED_EVENTS).value.int_value = dropped


def _strings(span: Span) -> Iterator[AnyValue]:
    """Every string or bytes value of the span's and its events' attributes (nested ones too)."""
    for kv in span.attributes:
        yield from _leaves(kv.value)
    for event in span.events:
        for kv in event.attributes:
            yield from _leaves(kv.value)


def _leaves(value: AnyValue) -> Iterator[AnyValue]:
    which = value.WhichOneof("value")
    if which in ("string_value", "bytes_value"):
        yield value
    elif which == "array_value":
        for item in value.array_value.values:
            yield from _leaves(item)
    elif which == "kvlist_value":
        for kv in value.kvlist_value.values:
            yield from _leaves(kv.value)


def _size(value: AnyValue) -> int:
    if value.WhichOneof("value") == "bytes_value":
        return len(value.bytes_value)
    return len(value.string_value.encode("utf-8", "surrogatepass"))
