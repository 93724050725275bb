"""The gateway's per-trace buffer: what the spans of a trace recorded (tool calls, context,
parent links), kept until that trace's agent spans arrive, so their scorers get the call's tool
calls and context as in process (`tracescore.online._trace_input` reads the spans for both).

Only traces a scorer may sample are kept. Bounded: traces, bytes (recorded characters plus a
fixed cost per span) and age; the oldest trace goes first. An agent span is scored with what
arrived before it (or with it, in the same request); only an agent span without content of its
own waits, at most `llm_wait_s`, for the LLM calls it is read from (`Engine`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError
from tracescore.gateway import _otlp
from tracescore.online._llm_calls import LLM_MARKERS, LlmCall, read_llm_call
from tracescore.online._trace_input import (
    EMPTY,
    TraceInput,
    TraceLimits,
    TraceSpans,
    gather,
    read_span,
)

_log = logging.getLogger("tracescore.gateway")
_SPAN_BYTES = 64  # what remembering one span costs besides its recorded text (links, ids)
_STATUS_ERROR = 2
# attribute keys of the spans that can carry a tool call, context or an LLM call
ITEM_MARKERS = frozenset({sc.GEN_AI_OPERATION_NAME, sc.OI_SPAN_KIND, sc.TS_CONTEXT}) | LLM_MARKERS


@dataclass(frozen=True)
class BufferLimits:
    """Bounds of the whole buffer (per-call and per-trace bounds are `TraceLimits`)."""

    max_traces: int = 10_000
    max_bytes: int = 64 * 1024 * 1024
    max_age_s: float = 60.0
    llm_wait_s: float = 2.0  # longest an agent span without content waits for its LLM calls

    def __post_init__(self) -> None:
        for name in ("max_traces", "max_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"trace.{name} must be an integer >= 0, got {value!r}")
        age = self.max_age_s
        if isinstance(age, bool) or not isinstance(age, (int, float)) or age <= 0:
            raise ConfigurationError(f"trace.max_age_s must be a number > 0, got {age!r}")
        wait = self.llm_wait_s
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or wait < 0:
            raise ConfigurationError(f"trace.llm_wait_s must be a number >= 0, got {wait!r}")


class TraceBuffer:
    """Recorded items of recent traces, by trace id; thread-safe."""

    def __init__(self, limits: TraceLimits | None = None, bounds: BufferLimits | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits or TraceLimits()
        self.bounds = bounds or BufferLimits()
        self._clock = clock
        self._traces: dict[int, TraceSpans] = {}
        self._costs: dict[int, int] = {}  # bytes charged per trace
        self._bytes = 0
        self._lock = threading.Lock()
        self.evicted = 0  # traces forgotten to stay within the bounds
        self.skipped = 0  # spans that could not be read

    @property
    def traces(self) -> int:
        return len(self._traces)

    @property
    def bytes(self) -> int:
        return self._bytes

    def add(self, span: Span, attributes: Mapping[str, Any] | None = None) -> None:
        """Remember one OTLP span (its parent link, and its tool call or context if any);
        `attributes`: its decoded attributes when the caller has them (None: it carries no
        item marker, or they are decoded here). Never raises: a span that cannot be read is
        skipped."""
        try:
            self._add(span, attributes)
        except Exception:  # noqa: BLE001 - the span is forwarded whatever happens here
            self.skipped += 1
            if self.skipped == 1:
                _log.warning("tracescore: could not read a span for the trace buffer",
                             exc_info=True)

    def _add(self, span: Span, attributes: Mapping[str, Any] | None) -> None:
        item = llm = None
        if attributes is None and any(kv.key in ITEM_MARKERS for kv in span.attributes):
            attributes = _otlp.attributes_of(span.attributes)
        if attributes is not None:
            item = read_span(span.name, attributes, span.start_time_unix_nano,
                             _error_of(span, attributes))
            llm = read_llm_call(attributes, span.start_time_unix_nano)
        trace_id, span_id = _otlp.key_of(span)
        parent = int.from_bytes(span.parent_span_id, "big") if span.parent_span_id else None
        cost = (_SPAN_BYTES + (item.chars if item is not None else 0)
                + (llm.chars if llm is not None else 0))
        with self._lock:
            trace = self._traces.get(trace_id)
            if trace is None:
                trace = self._traces[trace_id] = TraceSpans(self._clock())
                self._costs[trace_id] = 0
            dropped = trace.dropped
            trace.add(span_id, parent, item, self.limits.max_spans, llm)
            if trace.dropped == dropped:
                self._costs[trace_id] += cost
                self._bytes += cost
            self._evict()

    def input_of(self, span: Span) -> TraceInput:
        """The tool calls and context recorded below the agent span `span` so far."""
        trace_id, span_id = _otlp.key_of(span)
        with self._lock:
            trace = self._traces.get(trace_id)
            if trace is None:
                return EMPTY
            items = trace.under(span_id)
            dropped = trace.dropped > 0
        found = gather(items, self.limits)
        if dropped and not found.truncated:
            return TraceInput(found.tool_calls, found.context, True)
        return found

    def llm_calls_of(self, span: Span) -> list[LlmCall]:
        """The LLM calls recorded below the agent span `span` so far."""
        trace_id, span_id = _otlp.key_of(span)
        with self._lock:
            trace = self._traces.get(trace_id)
            return [] if trace is None else trace.llm_under(span_id)

    def mark_agent(self, span: Span) -> None:
        """`span` is an agent call: the LLM calls below it are its own, not an outer agent's."""
        trace_id, span_id = _otlp.key_of(span)
        with self._lock:
            trace = self._traces.get(trace_id)
            if trace is not None:
                trace.agent_spans.add(span_id)

    def agents_below(self, span: Span) -> bool:
        """Whether an agent span was seen below `span` (marked with `mark_agent`)."""
        trace_id, span_id = _otlp.key_of(span)
        with self._lock:
            trace = self._traces.get(trace_id)
            return trace is not None and trace.agents_below(span_id)

    def _evict(self) -> None:
        """Forget the oldest traces past the bounds (caller holds the lock)."""
        traces, bounds = self._traces, self.bounds
        too_old = self._clock() - bounds.max_age_s
        while traces:
            oldest_id = next(iter(traces))
            oldest = traces[oldest_id]
            if (len(traces) <= bounds.max_traces and self._bytes <= bounds.max_bytes
                    and oldest.created >= too_old):
                break
            del traces[oldest_id]
            self._bytes -= self._costs.pop(oldest_id, 0)
            self.evicted += 1


def buffer_from(options: Mapping[str, Any] | None) -> TraceBuffer:
    """A buffer from the gateway's `trace:` settings (TraceLimits and BufferLimits fields)."""
    options = dict(options or {})
    limits = {k: options.pop(k) for k in ("max_tool_calls", "max_chars", "max_spans")
              if k in options}
    return TraceBuffer(TraceLimits(**limits), BufferLimits(**options))


def _error_of(span: Span, attributes: Mapping[str, Any]) -> str | None:
    error_type = attributes.get(sc.ERROR_TYPE)
    if span.status.code != _STATUS_ERROR:
        return None if error_type is None else str(error_type)
    return span.status.message or (str(error_type) if error_type is not None else "error")
