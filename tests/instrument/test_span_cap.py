"""The span size cap: generated spans of every shape fit max_span_bytes once encoded, small values stay
whole, the cut is marked, and a span that fits passes unchanged."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from tracescore import _semconv as sc
from tracescore._span_cap import cap_span, span_size

_KB = 1024
# sizes from tiny to far over the cap; characters from ASCII to 4-byte UTF-8
_SIZES = st.sampled_from([0, 1, 7, 100, 3 * _KB, 40 * _KB, 300 * _KB, 2 * _KB * _KB])
_CHARS = st.sampled_from(["a", "é", "€", "😀"])
_KEYS = st.text(alphabet="abcdefghij._", min_size=1, max_size=20)


@st.composite
def _strings(draw: Any) -> str:
    return draw(_CHARS) * draw(_SIZES)


_VALUES = st.one_of(_strings(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False),
                    st.booleans(), st.lists(_strings(), max_size=3).map(tuple),
                    st.sampled_from([b"", b"\x00" * 5000]))
_ATTRIBUTES = st.dictionaries(_KEYS, _VALUES, max_size=6)


def _make_span(attributes: dict[str, Any], events: list[tuple[str, dict[str, Any]]],
               description: str | None) -> ReadableSpan:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("cap-test").start_as_current_span("work", attributes=attributes) as span:
        for name, event_attributes in events:
            span.add_event(name, event_attributes)
        if description is not None:
            span.set_status(Status(StatusCode.ERROR, description))
    (finished,) = exporter.get_finished_spans()
    return finished


def _encoded(span: ReadableSpan) -> int:
    return len(encode_spans([span]).SerializeToString())


def _request_overhead(span: ReadableSpan) -> int:
    """Bytes of a request carrying `span` that are not the span (resource, scope, framing)."""
    bare = ReadableSpan(name="", context=span.context, resource=span.resource,
                        instrumentation_scope=span.instrumentation_scope,
                        start_time=span.start_time, end_time=span.end_time)
    return _encoded(bare) - len(encode_spans([bare]).resource_spans[0].scope_spans[0]
                                .spans[0].SerializeToString())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(_ATTRIBUTES, st.lists(st.tuples(_KEYS, _ATTRIBUTES), max_size=4),
       st.one_of(st.none(), _strings()), st.sampled_from([4 * _KB, 64 * _KB, 1024 * _KB]))
def test_a_capped_span_fits_once_encoded_and_keeps_what_is_small(
        attributes: dict[str, Any], events: list[tuple[str, dict[str, Any]]],
        description: str | None, max_bytes: int) -> None:
    span = _make_span(attributes, events, description)
    assert _encoded(span) - _request_overhead(span) <= span_size(span)  # the estimate is an upper bound
    capped, size = cap_span(span, max_bytes)
    assert size == span_size(capped)
    if span_size(span) <= max_bytes:
        assert capped is span
        return
    assert _encoded(capped) - _request_overhead(capped) <= max_bytes
    assert capped.attributes[sc.TS_SPAN_TRUNCATED] is True
    assert capped.attributes[sc.TS_SPAN_ORIGINAL_BYTES] == span_size(span)
    assert (capped.context, capped.parent, capped.name, capped.kind, capped.start_time,
            capped.end_time, capped.resource) == (span.context, span.parent, span.name, span.kind,
                                                  span.start_time, span.end_time, span.resource)
    kept = dict(capped.attributes or {})
    cut = [key for key, value in span.attributes.items() if kept.get(key) != value]
    shortest_cut = min((_len(span.attributes[key]) for key in cut), default=None)
    for key, value in span.attributes.items():
        assert key in kept  # attributes are cut, never dropped
        if shortest_cut is not None and _len(value) < shortest_cut // 2:
            assert kept[key] == value  # values much smaller than any cut one stay whole
    dropped = capped.attributes.get(sc.TS_SPAN_DROPPED_EVENTS, 0)
    assert len(capped.events) + dropped == len(span.events)
    assert [e.name for e in capped.events] == [e.name for e in span.events][:len(capped.events)]


def _len(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, (bytes, tuple)):
        return sum(map(_len, value)) if isinstance(value, tuple) else len(value)
    return 0


def test_the_largest_values_are_cut_with_a_marker_and_the_rest_stay_whole() -> None:
    span = _make_span({"small": "hello", "huge": "x" * (5 * _KB * _KB), "mid": "é" * 300_000}, [
        ("exception", {"exception.message": "m" * (3 * _KB * _KB), "exception.type": "ValueError"})],
        "boom " * 100_000)
    capped, _ = cap_span(span, 1024 * _KB)
    assert capped.attributes["small"] == "hello"
    assert capped.attributes["huge"].startswith("xxx") and "…[truncated " in capped.attributes["huge"]
    (event,) = capped.events
    assert event.attributes["exception.type"] == "ValueError"
    assert "…[truncated " in event.attributes["exception.message"]
    assert capped.status.status_code is StatusCode.ERROR
    assert capped.status.description.startswith("boom boom")
    assert _encoded(capped) <= 1024 * _KB + _request_overhead(capped)


def test_many_events_beyond_the_cap_are_dropped_last_first_and_counted() -> None:
    events = [(f"e{i}", {f"k{j}": j for j in range(100)}) for i in range(120)]
    span = _make_span({}, events, None)
    capped, size = cap_span(span, 64 * _KB)
    assert size <= 64 * _KB
    dropped = capped.attributes[sc.TS_SPAN_DROPPED_EVENTS]
    assert 0 < dropped < 120 and len(capped.events) == 120 - dropped
    assert capped.events[0].name == "e0" and capped.dropped_events == dropped


def test_event_objects_of_the_copy_are_sdk_events() -> None:
    span = _make_span({"a": "x" * 20_000}, [("e", {"b": "y" * 20_000})], None)
    capped, _ = cap_span(span, 8 * _KB)
    assert all(isinstance(e, Event) for e in capped.events)
    assert _encoded(capped) - _request_overhead(capped) <= 8 * _KB
