"""Bounding one exported span: its largest strings are cut until it fits `max_span_bytes`, and it is marked.

Sizes are estimates of the span's OTLP protobuf encoding (strings counted in UTF-8 bytes, plus a
generous allowance for ids, keys and framing), made without encoding. A span that fits is passed
on as the same object; one that does not becomes a trimmed copy carrying `tracescore.span.truncated`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util import BoundedList
from opentelemetry.util.types import Attributes

from tracescore import _semconv as sc
from tracescore._env import MAX_SPAN_BYTES

DEFAULT_MAX_SPAN_BYTES = MAX_SPAN_BYTES.default  # 1 MiB
MIN_MAX_SPAN_BYTES = MAX_SPAN_BYTES.minimum or 1

SPAN_OVERHEAD = 128  # ids, times, kind, status, scope and framing of one span
_ITEM_OVERHEAD = 16  # tag and length bytes around one attribute, event or list element (upper bound)
_NUMBER = 11  # a varint/double with its tag
_MARKER = "…[truncated {n} bytes]"
_MARKER_BYTES = 40  # room kept for the marker of one cut value
_MARK_BYTES = 160  # room for the attributes that mark a cut span


def span_size(span: ReadableSpan) -> int:
    """Estimated bytes of `span` in an OTLP request (without its resource)."""
    # the SDK's own containers where present: its `attributes`, `events` and `links` properties
    # copy or wrap them on every read (events and links under a lock, even when empty)
    attributes = getattr(span, "_attributes", None)
    size = SPAN_OVERHEAD + len(span.name) + attributes_size(
        span.attributes if attributes is None else attributes)
    description = span.status.description
    if description:
        size += _bytes(description)
    events = getattr(span, "_events", None)
    if events is None:
        events = span.events
    if events:  # only then iterate: the SDK's list takes a lock to iterate
        for event in events:
            size += _ITEM_OVERHEAD + 16 + len(event.name) + attributes_size(event.attributes)
    links = getattr(span, "_links", None)
    if links is None:
        links = span.links
    if links:
        for link in links:
            size += _ITEM_OVERHEAD + 32 + attributes_size(link.attributes)
    return size


def attributes_size(attributes: Attributes | Mapping[str, Any]) -> int:
    if not attributes:
        return 0
    plain = _plain(attributes)
    size = _ITEM_OVERHEAD * len(plain)
    for key, value in plain.items():
        if value.__class__ is str and value.isascii():  # the common case, inline
            size += len(key) + len(value)
        else:
            size += len(key) + _value_size(value)
    return size


def _plain(attributes: Mapping[str, Any]) -> Mapping[str, Any]:
    """The dict inside the SDK's BoundedAttributes (read-only once the span ended; its Mapping
    methods are Python code that takes a lock per item)."""
    inner = getattr(attributes, "_dict", None)
    return inner if isinstance(inner, dict) else attributes


def cap_span(span: ReadableSpan, max_bytes: int, size: int | None = None) -> tuple[ReadableSpan, int]:
    """(`span`, its size) when it fits `max_bytes`; else (a trimmed, marked copy, the copy's size).

    The largest string values (span and event attributes, status description) are cut to one
    common length, so small values stay whole; if the span is still too big, its last events are
    dropped, then its links.
    """
    original = span_size(span) if size is None else size
    if original <= max_bytes:
        return span, original
    room = max_bytes - _MARK_BYTES
    level = water_level(_fixed_and_cuttable(span), room)
    attributes = _cut_mapping(span.attributes, level)
    events = [Event(e.name, _cut_mapping(e.attributes, level), e.timestamp) for e in span.events]
    links = list(span.links)
    status = span.status
    if status.description and _bytes(status.description) > level:
        from opentelemetry.trace import Status

        status = Status(status.status_code, cut_text(status.description, level))
    trimmed = _copy(span, attributes, events, links, status, 0)
    dropped_events = 0
    size_now = span_size(trimmed)
    while size_now > room and (events or links):  # keys, numbers and counts alone are too big
        if events:
            removed = events.pop()
            dropped_events += 1
            size_now -= _ITEM_OVERHEAD + 16 + len(removed.name) + attributes_size(removed.attributes)
        else:
            removed_link = links.pop()
            size_now -= _ITEM_OVERHEAD + 32 + attributes_size(removed_link.attributes)
    marks: dict[str, Any] = {sc.TS_SPAN_TRUNCATED: True, sc.TS_SPAN_ORIGINAL_BYTES: original}
    if dropped_events:
        marks[sc.TS_SPAN_DROPPED_EVENTS] = dropped_events
    trimmed = _copy(span, {**attributes, **marks}, events, links, status, dropped_events)
    return trimmed, span_size(trimmed)


def _fixed_and_cuttable(span: ReadableSpan) -> tuple[int, list[int]]:
    """The span's size that cutting strings cannot change, and the sizes of the values it can cut."""
    cuttable: list[int] = []
    total = span_size(span)
    for attributes in [span.attributes, *(e.attributes for e in span.events)]:
        for value in (attributes or {}).values():
            _collect(value, cuttable)
    if span.status.description:
        cuttable.append(_bytes(span.status.description))
    return total - sum(cuttable), cuttable


def _collect(value: Any, into: list[int]) -> None:
    if isinstance(value, (str, bytes)):
        into.append(_bytes(value))
    elif isinstance(value, Mapping):
        for item in value.values():
            _collect(item, into)
    elif isinstance(value, Sequence):
        for item in value:
            _collect(item, into)


def water_level(fixed_and_sizes: tuple[int, list[int]], room: int) -> int:
    """The largest length L such that cutting every value longer than L to L (plus a marker) fits."""
    fixed, sizes = fixed_and_sizes
    left = room - fixed
    ordered = sorted(sizes)
    for index, size in enumerate(ordered):
        remaining = len(ordered) - index
        if size * remaining > left:  # this value and every larger one get cut to one level
            return max(0, left // remaining - _MARKER_BYTES)
        left -= size
    return max(ordered, default=0)


def _cut_mapping(attributes: Attributes | Mapping[str, Any], level: int) -> dict[str, Any]:
    return {key: _cut_value(value, level) for key, value in (attributes or {}).items()}


def _cut_value(value: Any, level: int) -> Any:
    if isinstance(value, str):
        return cut_text(value, level) if _bytes(value) > level else value
    if isinstance(value, bytes):
        return value[:level] if len(value) > level else value
    if isinstance(value, Mapping):
        return {key: _cut_value(item, level) for key, item in value.items()}
    if isinstance(value, Sequence):
        return tuple(_cut_value(item, level) for item in value)
    return value


def cut_text(text: str, level: int) -> str:
    """`text` cut to `level` UTF-8 bytes (never inside a character), plus the marker."""
    data = text.encode("utf-8", "surrogatepass")
    kept = data[:level].decode("utf-8", "ignore")  # a character cut in half is left out
    return kept + _MARKER.format(n=len(data) - len(kept.encode("utf-8", "surrogatepass")))


def _bytes(value: str | bytes) -> int:
    if isinstance(value, bytes):
        return len(value)
    return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))


def _value_size(value: Any) -> int:
    if isinstance(value, (str, bytes)):
        return _bytes(value)
    if isinstance(value, (bool, int, float)):
        return _NUMBER
    if isinstance(value, Mapping):
        return attributes_size(value)
    if isinstance(value, Sequence):
        return sum(_ITEM_OVERHEAD + _value_size(item) for item in value)
    return 0


def _copy(span: ReadableSpan, attributes: dict[str, Any], events: list[Event], links: list[Any],
          status: Any, dropped_events: int) -> ReadableSpan:
    """A ReadableSpan like `span` with other attributes/events/links/status; dropped counts kept."""
    from opentelemetry.attributes import BoundedAttributes

    bounded = BoundedAttributes(maxlen=None, attributes=attributes, immutable=True)
    bounded.dropped = span.dropped_attributes
    event_list: BoundedList = BoundedList.from_seq(None, events)
    event_list.dropped = span.dropped_events + dropped_events
    link_list: BoundedList = BoundedList.from_seq(None, links)
    link_list.dropped = span.dropped_links + len(span.links) - len(links)
    return ReadableSpan(
        name=span.name, context=span.context, parent=span.parent, resource=span.resource,
        attributes=bounded, events=event_list, links=link_list, kind=span.kind, status=status,
        start_time=span.start_time, end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )
