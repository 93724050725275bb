"""Read spans back from an OTLP JSON-lines file (one ExportTraceServiceRequest per line).

Accepts the protobuf JSON mapping in either spelling (camelCase or proto field names) and trace
and span ids as hex (the OTLP/JSON rule) or base64 (plain protobuf JSON).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracescore._jsonl import json_lines


@dataclass
class FileSpan:
    """One span as read from the file; ids are lowercase hex."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    status_code: str
    status_message: str
    resource: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_ms(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e6


def read_spans(path: str | Path) -> list[FileSpan]:
    """Every span in the file, in file order. Blank lines are skipped; bad lines raise ValueError."""
    spans: list[FileSpan] = []
    for _, request in json_lines(Path(path).read_text(encoding="utf-8"), path):
        for rs in _get(request, "resourceSpans", "resource_spans") or []:
            resource = _attributes(_get(rs.get("resource") or {}, "attributes") or [])
            for ss in _get(rs, "scopeSpans", "scope_spans") or []:
                for raw in ss.get("spans") or []:
                    spans.append(_span(raw, resource))
    return spans


def parse_span(raw: dict[str, Any], resource: dict[str, Any] | None = None) -> FileSpan:
    """One span of OTLP JSON (a `spans` entry) as a FileSpan."""
    return _span(raw, resource or {})


def children_of(spans: list[FileSpan]) -> dict[str | None, list[FileSpan]]:
    """Spans grouped by parent span id (None: roots, including parents not in the file)."""
    ids = {s.span_id for s in spans}
    tree: dict[str | None, list[FileSpan]] = {}
    for s in sorted(spans, key=lambda s: s.start_ns):
        parent = s.parent_span_id if s.parent_span_id in ids else None
        tree.setdefault(parent, []).append(s)
    return tree


def _span(raw: dict[str, Any], resource: dict[str, Any]) -> FileSpan:
    status = raw.get("status") or {}
    code = status.get("code", "STATUS_CODE_UNSET")
    if isinstance(code, int):
        code = ("UNSET", "OK", "ERROR")[code] if 0 <= code <= 2 else str(code)
    return FileSpan(
        name=raw.get("name", ""),
        trace_id=_id(_get(raw, "traceId", "trace_id")) or "",
        span_id=_id(_get(raw, "spanId", "span_id")) or "",
        parent_span_id=_id(_get(raw, "parentSpanId", "parent_span_id")),
        start_ns=int(_get(raw, "startTimeUnixNano", "start_time_unix_nano") or 0),
        end_ns=int(_get(raw, "endTimeUnixNano", "end_time_unix_nano") or 0),
        attributes=_attributes(raw.get("attributes") or []),
        events=[(e.get("name", ""), _attributes(e.get("attributes") or []))
                for e in raw.get("events") or []],
        status_code=str(code).removeprefix("STATUS_CODE_"),
        status_message=status.get("message", ""),
        resource=resource,
    )


def _get(obj: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in obj:
            return obj[key]
    return None


def _id(value: Any) -> str | None:
    if not value:
        return None
    text = str(value)
    if len(text) in (16, 32) and all(c in "0123456789abcdefABCDEF" for c in text):
        return text.lower()
    try:
        return base64.b64decode(text, validate=True).hex()
    except (binascii.Error, ValueError):
        return text


def _attributes(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {kv.get("key", ""): _value(kv.get("value") or {}) for kv in items}


def _value(any_value: dict[str, Any]) -> Any:
    for key, convert in (
        ("stringValue", str), ("string_value", str),
        ("boolValue", bool), ("bool_value", bool),
        ("intValue", int), ("int_value", int),
        ("doubleValue", float), ("double_value", float),
    ):
        if key in any_value:
            value = any_value[key]
            return None if value is None else convert(value)
    array = _get(any_value, "arrayValue", "array_value")
    if array is not None:
        return [_value(v) for v in array.get("values") or []]
    kvlist = _get(any_value, "kvlistValue", "kvlist_value")
    if kvlist is not None:
        return _attributes(kvlist.get("values") or [])
    raw = _get(any_value, "bytesValue", "bytes_value")
    return raw
