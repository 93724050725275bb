"""Shared helpers for the decorator/context tests (no tests here; imported by the test modules)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracescore import _config
from tracescore.instrument import _calls


def spans_by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    spans = exporter.get_finished_spans()
    by_name = {s.name: s for s in spans}
    assert len(by_name) == len(spans), f"duplicate span names: {[s.name for s in spans]}"
    return by_name


def only_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    spans = exporter.get_finished_spans()
    assert len(spans) == 1, [s.name for s in spans]
    return spans[0]


def is_child(child: ReadableSpan, parent: ReadableSpan) -> bool:
    return (
        child.parent is not None
        and child.parent.span_id == parent.context.span_id
        and child.context.trace_id == parent.context.trace_id
    )


def attr_json(span: ReadableSpan, key: str) -> Any:
    assert span.attributes is not None
    return json.loads(str(span.attributes[key]))


def text_messages(role: str, *texts: str) -> list[dict[str, Any]]:
    return [{"role": role, "parts": [{"type": "text", "content": t}]} for t in texts]


def assert_no_detach_errors(records: Sequence[logging.LogRecord]) -> None:
    bad = [r.getMessage() for r in records if "detach" in r.getMessage().lower()]
    assert not bad, bad


@pytest.fixture(autouse=True)
def clean_content_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in (
        _config.ENV_OTEL_CAPTURE,
        _config.ENV_CAPTURE,
        _config.ENV_MAX_LENGTH,
        _config.ENV_REDACT,
    ):
        monkeypatch.delenv(var, raising=False)
    _config.reset_content_settings()
    yield
    monkeypatch.undo()
    _config.reset_content_settings()


@pytest.fixture(autouse=True)
def no_context_errors(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Every test: no 'Failed to detach context' (or any error) from OTel, no leaked listener."""
    listeners = _calls._listeners
    with caplog.at_level(logging.WARNING):
        yield
    assert _calls._listeners == listeners, "a test left an agent-call listener registered"
    records = [*caplog.get_records("setup"), *caplog.get_records("call"), *caplog.records]
    assert_no_detach_errors(records)
    errors = [
        r for r in records if r.name.startswith("opentelemetry") and r.levelno >= logging.ERROR
    ]
    assert not errors, [r.getMessage() for r in errors]
