"""OTLP spans into the `TraceCollector` (`tracescore.online.intake._collector`): what the spans of a trace
recorded (tool calls, context, LLM calls, parent links), kept until that trace's agent spans
arrive, so their scorers get the call's tool calls and context as in process.

Only traces a scorer may sample are fed. Bounded (`BufferLimits`): traces, bytes (recorded
characters plus a fixed cost per span) and age; the oldest trace goes first. An agent span is
scored with what arrived before it (or with it, in the same request); only an agent span without
content of its own waits, at most `llm_wait_s`, for the LLM calls it is read from (`Engine`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracescore import _semconv as sc
from tracescore.gateway import _otlp
from tracescore.online.intake import (
    LLM_MARKERS,
    BufferLimits,
    TraceCollector,
    TraceSpans,
    attributes_of,
    collector_from,
    read_llm_call,
    read_mark,
    read_span,
)

__all__ = ["ITEM_MARKERS", "BufferLimits", "TraceCollector", "at", "buffer_from", "collect"]

_log = logging.getLogger("tracescore.gateway")
_STATUS_ERROR = 2
# attribute keys of the spans that can carry a tool call, context or an LLM call
ITEM_MARKERS = frozenset({sc.GEN_AI_OPERATION_NAME, sc.OI_SPAN_KIND, sc.TS_CONTEXT}) | LLM_MARKERS


def collect(traces: TraceCollector, span: Span, attributes: Mapping[str, Any] | None = None,
            *, marks: bool = False) -> None:
    """Remember one OTLP span (its parent link, and its tool call, context or LLM call if any;
    with `marks`, what step of a run it is); `attributes`: its decoded attributes when the
    caller has them (None: it carries no item marker, or they are decoded here). Never raises:
    a span that cannot be read is skipped."""
    try:
        item = llm = mark = None
        if attributes is None and any(kv.key in ITEM_MARKERS for kv in span.attributes):
            attributes = attributes_of(span.attributes)
        if attributes is not None:
            item = read_span(span.name, attributes, span.start_time_unix_nano,
                             _error_of(span, attributes))
            llm = read_llm_call(attributes, span.start_time_unix_nano)
        if marks:
            mark = read_mark(span.name, attributes or {}, span.start_time_unix_nano,
                             span.end_time_unix_nano, _error_of(span, attributes or {}))
        trace_id, span_id = _otlp.key_of(span)
        parent = int.from_bytes(span.parent_span_id, "big") if span.parent_span_id else None
        traces.add(trace_id, span_id, parent, item, llm, mark)
    except Exception:  # noqa: BLE001 - the span is forwarded whatever happens here
        traces.skipped += 1
        if traces.skipped == 1:
            _log.warning("tracescore: could not read a span for the trace buffer", exc_info=True)


def at(traces: TraceCollector, key: tuple[int, int]) -> tuple[TraceSpans | None, int]:
    """(the kept trace of `key`, its span id): what `TraceCollector`'s questions take."""
    return traces.trace(key[0]), key[1]


def buffer_from(options: Mapping[str, Any] | None) -> TraceCollector:
    """A collector from the gateway's `trace:` settings (TraceLimits and BufferLimits fields)."""
    return collector_from(options)


def _error_of(span: Span, attributes: Mapping[str, Any]) -> str | None:
    error_type = attributes.get(sc.ERROR_TYPE)
    if span.status.code != _STATUS_ERROR:
        return None if error_type is None else str(error_type)
    return span.status.message or (str(error_type) if error_type is not None else "error")
