"""A span view: what span reading needs of a span, whichever front door it came through.

`SdkSpanView` reads an SDK `ReadableSpan` (the span processor); `OtlpSpanView` reads an OTLP
protobuf `Span` (the gateway, after its raw-byte marker check, so spans passed through never
build one). Both give the same values for the same span: ids as integers, the kind by name,
times in nanoseconds, attribute keys without decoding and the attributes decoded once, on first
use (OTLP maps and bytes become JSON and hex text, as the gateway forwards them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span
    from opentelemetry.sdk.trace import ReadableSpan

# SpanKind by name; OTLP numbers them from 1 (0 is "unspecified"), the SDK from 0
_KINDS = ("internal", "server", "client", "producer", "consumer")
_OTLP_STATUS_ERROR = 2


class SpanEvent(NamedTuple):
    name: str
    time_ns: int
    attributes: Mapping[str, Any]


class SpanView(Protocol):
    """What span reading may ask of a span; every member is cheap but `attributes` and `events`
    (decoded on first use, then kept)."""

    @property
    def trace_id(self) -> int: ...
    @property
    def span_id(self) -> int: ...
    @property
    def parent_id(self) -> int | None: ...
    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def start_ns(self) -> int: ...
    @property
    def end_ns(self) -> int: ...
    @property
    def error(self) -> bool: ...
    @property
    def status_message(self) -> str: ...
    def attribute_keys(self) -> Sequence[str]: ...
    @property
    def attributes(self) -> Mapping[str, Any]: ...
    @property
    def events(self) -> Sequence[SpanEvent]: ...


class SdkSpanView:
    """A `SpanView` over an SDK `ReadableSpan` (its attributes are already Python values)."""

    __slots__ = ("_span",)

    def __init__(self, span: ReadableSpan) -> None:
        self._span = span

    @property
    def trace_id(self) -> int:
        return self._span.context.trace_id

    @property
    def span_id(self) -> int:
        return self._span.context.span_id

    @property
    def parent_id(self) -> int | None:
        parent = self._span.parent
        return parent.span_id if parent is not None else None

    @property
    def name(self) -> str:
        return self._span.name

    @property
    def kind(self) -> str:
        return _KINDS[self._span.kind.value]

    @property
    def start_ns(self) -> int:
        return self._span.start_time or 0

    @property
    def end_ns(self) -> int:
        return self._span.end_time or 0

    @property
    def error(self) -> bool:
        return not self._span.status.is_ok and not self._span.status.is_unset

    @property
    def status_message(self) -> str:
        return self._span.status.description or ""

    def attribute_keys(self) -> Sequence[str]:
        return tuple(self._span.attributes or ())

    @property
    def attributes(self) -> Mapping[str, Any]:
        return self._span.attributes or {}

    @property
    def events(self) -> Sequence[SpanEvent]:
        return tuple(SpanEvent(e.name, e.timestamp, e.attributes or {}) for e in self._span.events)


class OtlpSpanView:
    """A `SpanView` over an OTLP protobuf `Span`; attributes and events decode once, when asked."""

    __slots__ = ("_attributes", "_events", "_span")

    def __init__(self, span: Span) -> None:
        self._span = span
        self._attributes: dict[str, Any] | None = None
        self._events: tuple[SpanEvent, ...] | None = None

    @property
    def trace_id(self) -> int:
        return int.from_bytes(self._span.trace_id, "big")

    @property
    def span_id(self) -> int:
        return int.from_bytes(self._span.span_id, "big")

    @property
    def parent_id(self) -> int | None:
        parent = self._span.parent_span_id
        return int.from_bytes(parent, "big") if parent else None

    @property
    def name(self) -> str:
        return self._span.name

    @property
    def kind(self) -> str:
        kind = self._span.kind
        return _KINDS[kind - 1] if 0 < kind <= len(_KINDS) else "internal"

    @property
    def start_ns(self) -> int:
        return self._span.start_time_unix_nano

    @property
    def end_ns(self) -> int:
        return self._span.end_time_unix_nano

    @property
    def error(self) -> bool:
        return self._span.status.code == _OTLP_STATUS_ERROR

    @property
    def status_message(self) -> str:
        return self._span.status.message

    def attribute_keys(self) -> Sequence[str]:
        return tuple(kv.key for kv in self._span.attributes)

    @property
    def attributes(self) -> Mapping[str, Any]:
        if self._attributes is None:
            self._attributes = attributes_of(self._span.attributes)
        return self._attributes

    @property
    def events(self) -> Sequence[SpanEvent]:
        if self._events is None:
            self._events = tuple(SpanEvent(e.name, e.time_unix_nano, attributes_of(e.attributes))
                                 for e in self._span.events)
        return self._events


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
    """OTLP key-value pairs as a dict of Python values."""
    return {kv.key: value_of(kv.value) for kv in pairs}


def _jsonable(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value
