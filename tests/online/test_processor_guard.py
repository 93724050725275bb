"""The span processor's "never break the app" sites: a downstream processor that fails to flush
or shut down never reaches the caller; each failure is counted at its site and logged once."""

from __future__ import annotations

import logging

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracescore.online import ScoringSpanProcessor
from tracescore.online._processor import core_of
from tracescore.scoring.checks import IncludesCheck


class _BrokenDownstream(SimpleSpanProcessor):
    """Exports; its flush and shutdown fail the way a downstream at fault does."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        raise ConnectionError("collector unreachable")

    def shutdown(self) -> None:
        super().shutdown()
        raise ConnectionError("collector unreachable")


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@settings(max_examples=8, deadline=None)
@given(flushes=st.integers(min_value=1, max_value=4))
def test_a_failing_downstream_flush_or_shutdown_is_counted_and_logged_once(
        flushes: int) -> None:
    exporter = InMemorySpanExporter()
    processor = ScoringSpanProcessor(_BrokenDownstream(exporter), [IncludesCheck(expected="o")],
                                     isolation="thread")
    provider = TracerProvider()
    provider.add_span_processor(processor)
    logger = logging.getLogger("tracescore")
    handler = _Records()
    logger.addHandler(handler)
    try:
        with provider.get_tracer("t").start_as_current_span("invoke_agent a"):
            pass
        results = [processor.force_flush(2000) for _ in range(flushes)]
        processor.shutdown()
        processor.shutdown()  # idempotent: no second attempt
    finally:
        logger.removeHandler(handler)
    assert results == [False] * flushes  # flushed nothing downstream: says so
    assert [s.name for s in exporter.get_finished_spans()] == ["invoke_agent a"]
    counts = core_of(processor).guard.counts
    assert (counts["flush"], counts["shutdown"]) == (flushes, 1)
    messages = [r.getMessage() for r in handler.records if r.levelno >= logging.WARNING]
    assert messages == ["tracescore: downstream force_flush failed",
                        "tracescore: downstream processor shutdown failed"]

