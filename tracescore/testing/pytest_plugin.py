"""pytest fixtures for tracescore tests (OTLP receiver, stub LLM server, in-memory spans, collector)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracescore.testing import OTelCollector, OTLPReceiver, StubLLMServer


class _SwitchProcessor(SpanProcessor):
    """A processor whose delegate each test swaps; lets one global provider serve many tests."""

    def __init__(self) -> None:
        self.delegate: SpanProcessor | None = None

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.delegate is not None:
            self.delegate.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self.delegate is not None:
            self.delegate.on_end(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True if self.delegate is None else self.delegate.force_flush(timeout_millis)


_switch = _SwitchProcessor()

# litellm's lazily imported types make pydantic warn about TypedDicts with `ReadOnly` items.
# litellm filters those warnings at import, but pytest resets the filters for every test, so a
# test's first litellm call would list a dozen of them; this keeps litellm's own filter.
_LITELLM_FILTERS = (r"ignore:.*`ReadOnly` qualifier:UserWarning",)


def pytest_configure(config: pytest.Config) -> None:
    # tests run offline: litellm's bundled price map, not a download (and its warning) at import
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    for line in _LITELLM_FILTERS:
        config.addinivalue_line("filterwarnings", line)


def _global_sdk_provider() -> TracerProvider:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    if not getattr(provider, "_tracescore_test_switch", False):
        provider.add_span_processor(_switch)
        provider._tracescore_test_switch = True  # type: ignore[attr-defined]
    return provider


@pytest.fixture
def span_exporter() -> Iterator[InMemorySpanExporter]:
    """Finished spans of this test, in memory (synchronous export through the global provider)."""
    _global_sdk_provider()
    exporter = InMemorySpanExporter()
    _switch.delegate = SimpleSpanProcessor(exporter)
    try:
        yield exporter
    finally:
        _switch.delegate = None


@pytest.fixture
def otlp_receiver() -> Iterator[OTLPReceiver]:
    """A running OTLP receiver (HTTP and gRPC on free loopback ports), stopped after the test."""
    with OTLPReceiver() as receiver:
        yield receiver


@pytest.fixture
def stub_llm() -> Iterator[StubLLMServer]:
    """A running OpenAI-compatible stub server (`stub_llm.base_url`), stopped after the test."""
    with StubLLMServer() as server:
        yield server


@pytest.fixture
def otel_collector() -> Iterator[Callable[..., OTelCollector]]:
    """Start the project's OpenTelemetry Collector: `otel_collector(config, env=..., overrides=...)`
    (a YAML path or text; see `OTelCollector`) returns it running; all are stopped after the test."""
    started: list[OTelCollector] = []

    def start(config: str | Path, **options: Any) -> OTelCollector:
        collector = OTelCollector(config, **options).start()
        started.append(collector)
        return collector

    try:
        yield start
    finally:
        for collector in reversed(started):
            collector.stop()
