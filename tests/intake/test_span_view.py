"""The intake's span view reads a span the same whichever door it came through: an SDK span as
the span processor sees it, and the same span as the OTLP protobuf the SDK's exporter sends
(encoded by the SDK's own encoder, and parsed back from the bytes), give equal views."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from tracescore.online.intake import OtlpSpanView, SdkSpanView, SpanView

_text = st.text(max_size=12)
_values = st.one_of(
    _text, st.booleans(), st.integers(-(2**62), 2**62),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(_text, max_size=3).map(tuple), st.lists(st.integers(0, 99), max_size=3).map(tuple),
)
_attributes = st.dictionaries(st.text(min_size=1, max_size=10), _values, max_size=5)


def _fields(view: SpanView) -> dict[str, Any]:
    return {"trace_id": view.trace_id, "span_id": view.span_id, "parent_id": view.parent_id,
            "name": view.name, "kind": view.kind, "start_ns": view.start_ns,
            "end_ns": view.end_ns, "error": view.error, "status_message": view.status_message,
            "keys": sorted(view.attribute_keys()), "attributes": dict(view.attributes),
            "events": [(e.name, e.time_ns, dict(e.attributes)) for e in view.events]}


def _spans(name: str, kind: SpanKind, attributes: dict[str, Any],
           events: list[tuple[str, dict[str, Any]]], status: StatusCode,
           message: str) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("parent"), tracer.start_as_current_span(
            name, kind=kind, attributes=attributes) as span:
        for event_name, event_attributes in events:
            span.add_event(event_name, event_attributes)
        span.set_status(Status(status, message if status is StatusCode.ERROR else None))
    provider.shutdown()
    return list(exporter.get_finished_spans())


@settings(max_examples=60, deadline=None)
@given(name=st.text(max_size=20), kind=st.sampled_from(list(SpanKind)), attributes=_attributes,
       events=st.lists(st.tuples(_text, _attributes), max_size=3),
       status=st.sampled_from(list(StatusCode)), message=_text)
def test_a_span_reads_the_same_through_both_doors(
        name: str, kind: SpanKind, attributes: dict[str, Any],
        events: list[tuple[str, dict[str, Any]]], status: StatusCode, message: str) -> None:
    spans = _spans(name, kind, attributes, events, status, message)
    wire = ExportTraceServiceRequest.FromString(encode_spans(spans).SerializeToString())
    received = [s for rs in wire.resource_spans for ss in rs.scope_spans for s in ss.spans]
    by_id = {int.from_bytes(s.span_id, "big"): s for s in received}
    assert len(by_id) == len(spans) == 2
    for sdk in spans:
        assert _fields(SdkSpanView(sdk)) == _fields(OtlpSpanView(by_id[sdk.context.span_id]))
    child = SdkSpanView(spans[0])
    assert child.parent_id == spans[1].context.span_id and child.kind == kind.name.lower()
    assert child.error is (status is StatusCode.ERROR)


def test_a_view_decodes_the_attributes_once_and_only_when_asked() -> None:
    spans = _spans("agent", SpanKind.INTERNAL, {"gen_ai.agent.name": "a"}, [], StatusCode.OK, "")
    agent = spans[0].context.span_id
    view = next(OtlpSpanView(s) for rs in encode_spans(spans).resource_spans
                for ss in rs.scope_spans for s in ss.spans
                if int.from_bytes(s.span_id, "big") == agent)
    assert view._attributes is None  # the laziness is the point
    assert list(view.attribute_keys()) == ["gen_ai.agent.name"]
    assert view._attributes is None  # keys alone decode nothing
    first = view.attributes
    assert first == {"gen_ai.agent.name": "a"} and view.attributes is first
