"""The export side of configure(): each exporter behind a guard that bounds spans and requests and
keeps count, fed by a background processor so the agent's thread never waits on the network.

- every span is cut to `max_span_bytes` (see `_span_cap`), so one huge span cannot take others down;
- a batch is sent as several requests of at most `max_request_bytes` each (estimated), under the
  4 MiB an OpenTelemetry Collector accepts over gRPC by default; a rejected request loses only
  its own spans;
- spans that failed to export are counted, so `flush()` can say so.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from tracescore._exceptions import ConfigurationError
from tracescore._span_cap import (
    DEFAULT_MAX_SPAN_BYTES,
    ENV_MAX_SPAN_BYTES,
    MIN_MAX_SPAN_BYTES,
    attributes_size,
    cap_span,
)

_log = logging.getLogger(__name__)

DEFAULT_MAX_REQUEST_BYTES = 3 << 20  # 3 MiB: room under the Collector's 4 MiB gRPC limit
MIN_MAX_REQUEST_BYTES = 64 << 10
ENV_MAX_REQUEST_BYTES = "TRACESCORE_MAX_REQUEST_BYTES"
_RESOURCE_OVERHEAD = 64  # resource and scope framing in one request
_IMMEDIATE_DELAY_MS = 500


@dataclass(frozen=True, slots=True)
class ExportLimits:
    """Size bounds of what is exported: one span, one export request (bytes, estimated)."""

    max_span_bytes: int = DEFAULT_MAX_SPAN_BYTES
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES

    @classmethod
    def resolve(cls, max_span_bytes: int | None, max_request_bytes: int | None) -> ExportLimits:
        """Arguments (validated, ConfigurationError) over the environment (bad values warn) over defaults.
        A span is never allowed to be larger than a request."""
        from tracescore._config import env_int

        span = _check("max_span_bytes", max_span_bytes, MIN_MAX_SPAN_BYTES)
        request = _check("max_request_bytes", max_request_bytes, MIN_MAX_REQUEST_BYTES)
        if span is None:
            span = env_int(ENV_MAX_SPAN_BYTES, DEFAULT_MAX_SPAN_BYTES, MIN_MAX_SPAN_BYTES)
        if request is None:
            request = env_int(ENV_MAX_REQUEST_BYTES, DEFAULT_MAX_REQUEST_BYTES, MIN_MAX_REQUEST_BYTES)
        return cls(max_span_bytes=min(span, request), max_request_bytes=request)


def _check(name: str, value: object, minimum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} must be an integer >= {minimum} (bytes), got {value!r}")
    return value


class GuardedExporter(SpanExporter):
    """Wraps one exporter: caps spans, splits requests, never raises, counts exported/failed spans."""

    def __init__(self, exporter: SpanExporter, limits: ExportLimits) -> None:
        self.exporter = exporter
        self._limits = limits
        self._lock = threading.Lock()
        self._counts = {"exported": 0, "failed": 0, "truncated": 0, "requests": 0}
        self._unreported_failures = 0
        self._resource_sizes: dict[int, int] = {}

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            requests, truncated = self._requests(spans)
        except Exception:  # noqa: BLE001 - an exporter reports failure, never raises
            _log.exception("tracescore: could not prepare %d spans for export", len(spans))
            self._count(failed=len(spans))
            return SpanExportResult.FAILURE
        self._count(truncated=truncated)
        outcome = SpanExportResult.SUCCESS
        for request in requests:
            try:
                result = self.exporter.export(request)
            except Exception:  # noqa: BLE001
                _log.exception("tracescore: exporter %s raised", type(self.exporter).__name__)
                result = SpanExportResult.FAILURE
            if result is SpanExportResult.SUCCESS or result is None:  # None: an exporter without a result
                self._count(exported=len(request), requests=1)
            else:
                self._count(failed=len(request), requests=1)
                outcome = SpanExportResult.FAILURE
        return outcome

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def stats(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def take_failures(self) -> int:
        """Spans that failed to export since the previous call."""
        with self._lock:
            failed, self._unreported_failures = self._unreported_failures, 0
            return failed

    def _count(self, **counts: int) -> None:
        with self._lock:
            for key, value in counts.items():
                self._counts[key] += value
            self._unreported_failures += counts.get("failed", 0)

    def _requests(self, spans: Sequence[ReadableSpan]) -> tuple[list[list[ReadableSpan]], int]:
        """`spans` capped and grouped into requests of at most max_request_bytes (estimated)."""
        limits = self._limits
        requests: list[list[ReadableSpan]] = []
        current: list[ReadableSpan] = []
        size = 0
        resources: set[int] = set()
        truncated = 0
        for span in spans:
            capped, span_bytes = cap_span(span, limits.max_span_bytes)
            truncated += capped is not span
            resource = id(span.resource)
            extra = 0 if resource in resources else self._resource_size(span)
            if current and size + span_bytes + extra > limits.max_request_bytes:
                requests.append(current)
                current, size, resources = [], 0, set()
                extra = self._resource_size(span)
            resources.add(resource)
            current.append(capped)
            size += span_bytes + extra
        if current:
            requests.append(current)
        return requests, truncated

    def _resource_size(self, span: ReadableSpan) -> int:
        key = id(span.resource)
        size = self._resource_sizes.get(key)
        if size is None:
            if len(self._resource_sizes) > 64:  # resources are few and long-lived; bound the cache
                self._resource_sizes.clear()
            size = self._resource_sizes[key] = _RESOURCE_OVERHEAD + attributes_size(
                span.resource.attributes)
        return size


def export_processor(exporter: GuardedExporter, batch: bool) -> SpanProcessor:
    """The processor in front of one guarded exporter. Both kinds export from a background thread:
    batch=True in batches (the SDK defaults, OTEL_BSP_* honoured), batch=False each span as soon as
    it ends, one per request (what SimpleSpanProcessor sends, without blocking the caller)."""
    if batch:
        return BatchSpanProcessor(exporter)
    # a span arriving while the worker clears its wake-up flag waits at most the schedule delay
    return BatchSpanProcessor(exporter, max_export_batch_size=1, schedule_delay_millis=_IMMEDIATE_DELAY_MS)


def guards_of(exporters: Sequence[Any]) -> list[GuardedExporter]:
    return [e for e in exporters if isinstance(e, GuardedExporter)]
