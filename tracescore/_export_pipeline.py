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
import os
import threading
import weakref
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from tracescore._env import MAX_REQUEST_BYTES, MAX_SPAN_BYTES
from tracescore._exceptions import ConfigurationError
from tracescore._span_cap import (
    DEFAULT_MAX_SPAN_BYTES,
    MIN_MAX_SPAN_BYTES,
    attributes_size,
    cap_span,
)

_log = logging.getLogger(__name__)

DEFAULT_MAX_REQUEST_BYTES = MAX_REQUEST_BYTES.default  # 3 MiB: under the Collector's 4 MiB (gRPC)
MIN_MAX_REQUEST_BYTES = MAX_REQUEST_BYTES.minimum or 1
_RESOURCE_OVERHEAD = 64  # resource and scope framing in one request
_MAX_QUEUE = 2048  # the SDK's BatchSpanProcessor defaults
_MAX_BATCH = 512
_LINGER_S = 0.002  # batch=False: how long the export thread waits for more spans once woken
_SHUTDOWN_JOIN_S = 30.0


@dataclass(frozen=True, slots=True)
class ExportLimits:
    """Size bounds of what is exported: one span, one export request (bytes, estimated)."""

    max_span_bytes: int = DEFAULT_MAX_SPAN_BYTES
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES

    @classmethod
    def resolve(cls, max_span_bytes: int | None, max_request_bytes: int | None) -> ExportLimits:
        """Arguments (validated, ConfigurationError) over the environment (bad values warn) over defaults.
        A span is never allowed to be larger than a request."""
        span = _check("max_span_bytes", max_span_bytes, MIN_MAX_SPAN_BYTES)
        request = _check("max_request_bytes", max_request_bytes, MIN_MAX_REQUEST_BYTES)
        if span is None:
            span = MAX_SPAN_BYTES.get()
        if request is None:
            request = MAX_REQUEST_BYTES.get()
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
        self.gave_up: str | None = None  # why export stopped trying (give_up)
        self.skipping: str | None = None  # why exports fail at once for now (`skip`)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.gave_up is not None or self.skipping is not None:
            self._count(failed=len(spans))
            return SpanExportResult.FAILURE
        try:
            requests, truncated = self._requests(spans)
        except Exception:  # noqa: BLE001 - an exporter reports failure, never raises
            _log.exception("tracescore: could not prepare %d spans for export", len(spans))
            self._count(failed=len(spans))
            return SpanExportResult.FAILURE
        exported = failed = 0
        for request in requests:
            try:
                result = self.exporter.export(request)
            except Exception:  # noqa: BLE001 - an exporter reports failure, never raises
                _log.exception("tracescore: exporter %s raised", type(self.exporter).__name__)
                result = SpanExportResult.FAILURE
            if result is SpanExportResult.SUCCESS or result is None:  # None: an exporter without a result
                exported += len(request)
            else:
                failed += len(request)
        self._count(exported=exported, failed=failed, truncated=truncated, requests=len(requests))
        return SpanExportResult.FAILURE if failed else SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)

    def shutdown(self) -> None:
        if self.gave_up is None:
            self.exporter.shutdown()

    def give_up(self, reason: str) -> None:
        """Stop sending, for good: an export retrying now ends (the exporter is shut down, which
        cuts its backoff short and silences it), and later spans count as failed at once."""
        if self.gave_up is not None:
            return
        self.gave_up = reason
        logging.getLogger("opentelemetry.exporter.otlp").setLevel(logging.CRITICAL)  # its retry notes
        try:
            self.exporter.shutdown()
        except Exception:  # noqa: BLE001 - an exporter that fails to close is closed enough here
            _log.debug("tracescore: exporter shutdown failed", exc_info=True)

    def skip(self, reason: str | None) -> None:
        """While `reason` is set, exports fail at once, counted (a flush to an endpoint that
        refuses connections does not retry it for seconds); None sends again."""
        self.skipping = reason

    def stats(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def take_failures(self) -> int:
        """Spans that failed to export since the previous call."""
        with self._lock:
            failed, self._unreported_failures = self._unreported_failures, 0
            return failed

    def _count(self, *, exported: int = 0, failed: int = 0, truncated: int = 0,
               requests: int = 0) -> None:
        with self._lock:
            counts = self._counts
            counts["exported"] += exported
            counts["failed"] += failed
            counts["truncated"] += truncated
            counts["requests"] += requests
            self._unreported_failures += failed

    def _requests(self, spans: Sequence[ReadableSpan]) -> tuple[list[list[ReadableSpan]], int]:
        """`spans` capped and grouped into requests of at most max_request_bytes (estimated)."""
        limits = self._limits
        if len(spans) == 1:  # one span always fits one request (a span is capped below a request)
            capped = cap_span(spans[0], limits.max_span_bytes)[0]
            return [[capped]], int(capped is not spans[0])
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
    """The processor in front of one guarded exporter; both export from a background thread.
    batch=True: the SDK's BatchSpanProcessor (OTEL_BSP_* honoured); batch=False: PromptExportProcessor."""
    return BatchSpanProcessor(exporter) if batch else PromptExportProcessor(exporter)


class PromptExportProcessor(SpanProcessor):
    """Exports each span within `linger_s` (2 ms) of its end, together with whatever else ended
    meanwhile, from one background thread: what SimpleSpanProcessor sends, without the caller
    waiting on the exporter. The worker is woken only by the span that finds it asleep, and then
    lingers briefly, so a burst of spans costs one wake-up and one export, not one per span.

    At most `max_queue_size` spans wait; beyond, the oldest is dropped and counted (`dropped`).
    """

    def __init__(self, exporter: SpanExporter, max_queue_size: int = _MAX_QUEUE,
                 max_export_batch_size: int = _MAX_BATCH, linger_s: float = _LINGER_S) -> None:
        self._exporter = exporter
        self._max_batch = max_export_batch_size
        self._linger_s = linger_s
        self._queue: deque[ReadableSpan] = deque(maxlen=max_queue_size)
        self.dropped = 0
        self._stopping = False
        self._start()
        if hasattr(os, "register_at_fork"):
            reinit = weakref.WeakMethod(self._start)
            os.register_at_fork(after_in_child=lambda: (r := reinit()) and r())

    def _start(self) -> None:
        """(Re)start the worker: at construction, and in a forked child (the thread is not copied)."""
        lock = threading.Lock()
        self._ready = threading.Condition(lock)  # the worker waits for spans
        self._idle = threading.Condition(lock)  # flush waits for an empty queue and no export
        self._queue.clear()
        self._busy = False
        self._asleep = False  # the worker waits for a span: the next one wakes it
        self._hurry = threading.Event()  # flush or shutdown: no lingering
        self._worker = threading.Thread(target=self._work, name="tracescore-export", daemon=True)
        self._worker.start()

    def on_end(self, span: ReadableSpan) -> None:
        if self._stopping or span.context is None or not span.context.trace_flags.sampled:
            return
        with self._ready:
            if len(self._queue) == self._queue.maxlen:
                self.dropped += 1
                if self.dropped == 1:
                    _log.warning("tracescore: export queue full (%d spans); dropping the oldest",
                                 self._queue.maxlen)
            self._queue.append(span)
            if self._asleep:
                self._asleep = False
                self._ready.notify()

    def _work(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._stopping:
                    self._asleep = True
                    self._ready.wait()
                self._asleep = False
                if not self._queue:
                    return
                linger = not self._stopping and len(self._queue) < self._max_batch
            if linger:  # let the spans ending meanwhile join this export
                self._hurry.wait(self._linger_s)
            with self._ready:
                batch = [self._queue.popleft() for _ in range(min(len(self._queue), self._max_batch))]
                self._busy = True
            token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
            try:
                self._exporter.export(batch)
            except Exception:  # noqa: BLE001 - the worker must keep running
                _log.exception("tracescore: exporting %d spans failed", len(batch))
            finally:
                detach(token)
                with self._idle:
                    self._busy = False
                    self._idle.notify_all()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self._hurry.set()
        try:
            with self._idle:
                return self._idle.wait_for(lambda: not self._queue and not self._busy,
                                           max(0, timeout_millis) / 1000)
        finally:
            self._hurry.clear()

    def shutdown(self) -> None:
        """Export what is queued (bounded by the exporter's own timeouts), stop the worker, close
        the exporter. Idempotent."""
        with self._ready:
            if self._stopping:
                return
            self._stopping = True
            self._hurry.set()
            self._ready.notify()
        if self._worker is not threading.current_thread():
            self._worker.join(_SHUTDOWN_JOIN_S)
        self._exporter.shutdown()


def guards_of(exporters: Sequence[Any]) -> list[GuardedExporter]:
    return [e for e in exporters if isinstance(e, GuardedExporter)]
