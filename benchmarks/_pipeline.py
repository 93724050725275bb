"""Plumbing the in-process benchmarks share: an exporter that drops everything, and the global
provider's one span processor, which each case points at its own pipeline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult


class Discard(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class Switch(SpanProcessor):
    """The global provider's one processor; each case points it at its own pipeline."""

    def __init__(self) -> None:
        self.delegate: SpanProcessor = SimpleSpanProcessor(Discard())

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.delegate.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        self.delegate.on_end(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.delegate.force_flush(timeout_millis)
