"""The export pipeline against real receivers: one huge span never takes healthy spans down with it,
requests stay under the gRPC 4 MiB limit, flush() reports failed exports, batch=False never waits on
the network, and stats() counts what happened."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from _helpers import shut_down_pipelines
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import ConfigurationError
from tracescore import _semconv as sc
from tracescore.testing import OTLPReceiver, spans_from_otlp_json

PROTOCOLS = ["http", "grpc"]
_MB = 1 << 20


@pytest.fixture(autouse=True)
def _clean_pipelines() -> Iterator[None]:
    shut_down_pipelines()
    yield
    shut_down_pipelines()


def _endpoint(receiver: OTLPReceiver, protocol: str) -> str:
    return receiver.http_endpoint if protocol == "http" else receiver.grpc_endpoint


def _spans(names: Sequence[str], *, blob: int = 0) -> None:
    tracer = trace.get_tracer("pipeline-test")
    for name in names:
        with tracer.start_as_current_span(name) as span:
            if blob:
                span.set_attribute("payload", name[0] * blob)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_one_huge_span_never_takes_healthy_spans_down(otlp_receiver: OTLPReceiver, protocol: str) -> None:
    handle = tracescore.configure(exporter=f"otlp-{protocol}", endpoint=_endpoint(otlp_receiver, protocol))
    tracer = trace.get_tracer("pipeline-test")
    _spans([f"healthy-{i}" for i in range(5)])
    with pytest.raises(ConnectionError), tracer.start_as_current_span("huge") as span:
        span.set_attribute("dump", "d" * (20 * _MB))
        raise ConnectionError("x" * (20 * _MB))
    _spans([f"healthy-{i}" for i in range(5, 10)])
    assert handle.flush(30)
    received = otlp_receiver.wait_for_spans(11, timeout=30)
    assert sorted(s.name for s in received) == sorted(["huge"] + [f"healthy-{i}" for i in range(10)])
    (huge,) = [s for s in received if s.name == "huge"]
    assert huge.attributes[sc.TS_SPAN_TRUNCATED] is True
    assert huge.attributes[sc.TS_SPAN_ORIGINAL_BYTES] > 40 * _MB
    assert len(huge.attributes["dump"]) < _MB
    (exception,) = huge.events
    assert exception.attributes["exception.type"] == "ConnectionError"
    assert handle.stats()["export.truncated"] == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_big_batch_is_split_into_requests_under_the_limit(otlp_receiver: OTLPReceiver,
                                                            protocol: str) -> None:
    """40 spans of 0.9 MiB (36 MiB in one batch) all arrive; the gRPC receiver refuses over 4 MiB."""
    handle = tracescore.configure(exporter=f"otlp-{protocol}", endpoint=_endpoint(otlp_receiver, protocol))
    names = [f"{chr(97 + i % 26)}-{i}" for i in range(40)]
    _spans(names, blob=900 * 1024)
    assert handle.flush(60)
    received = otlp_receiver.wait_for_spans(40, timeout=30)
    assert sorted(s.name for s in received) == sorted(names)
    assert not any(sc.TS_SPAN_TRUNCATED in s.attributes for s in received)
    requests = [r for r in otlp_receiver.requests if r.signal == "traces"]
    assert len(requests) >= 12 and all(r.rejected_with is None for r in requests)
    stats = handle.stats()
    assert (stats["export.exported"], stats["export.failed"], stats["export.requests"]) == (
        40, 0, len(requests))


def test_a_smaller_request_limit_is_honoured(otlp_receiver: OTLPReceiver) -> None:
    handle = tracescore.configure(exporter="otlp-grpc", endpoint=otlp_receiver.grpc_endpoint,
                                  max_request_bytes=256 * 1024, max_span_bytes=_MB)
    _spans([f"s{i}" for i in range(6)], blob=200 * 1024)
    assert handle.flush(30)
    otlp_receiver.wait_for_spans(6)
    assert len(otlp_receiver.requests) == 6  # two such spans exceed one request
    assert not any(sc.TS_SPAN_TRUNCATED in s.attributes for s in otlp_receiver.spans)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_flush_reports_a_rejected_request_and_keeps_the_others(otlp_receiver: OTLPReceiver,
                                                               protocol: str) -> None:
    handle = tracescore.configure(exporter=f"otlp-{protocol}", endpoint=_endpoint(otlp_receiver, protocol))
    otlp_receiver.fail_next(1, status=400)  # not retryable: the first request's spans are lost
    _spans([f"{chr(97 + i)}-{i}" for i in range(8)], blob=900 * 1024)
    assert handle.flush(30) is False
    assert handle.flush(5) is True  # a failure is reported once
    received = otlp_receiver.wait_for_spans(1)
    stats = handle.stats()
    assert 0 < stats["export.failed"] < 8
    assert stats["export.exported"] == len(received) == 8 - stats["export.failed"]
    assert tracescore.flush(5) is True


class _Raising(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise RuntimeError("exporter bug")


class _Failing(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.FAILURE


@pytest.mark.parametrize("batch", [True, False])
@pytest.mark.parametrize("bad", [_Raising, _Failing])
def test_flush_reports_an_exporter_that_fails_or_raises(batch: bool, bad: type[SpanExporter]) -> None:
    good = InMemorySpanExporter()
    handle = tracescore.configure(exporter=[bad(), good], batch=batch)
    _spans(["one", "two"])
    assert tracescore.flush(5) is False
    assert [s.name for s in good.get_finished_spans()] == ["one", "two"]
    stats = handle.stats()
    assert (stats["export.exported"], stats["export.failed"]) == (2, 2)


class _HangingCollector:
    """A TCP listener that accepts requests and never answers (until closed)."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self.received = threading.Event()
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        try:
            while True:
                conn, _ = self._server.accept()
                self._conns.append(conn)
                conn.recv(65536)
                self.received.set()
        except OSError:
            pass

    def close(self) -> None:
        self._server.close()
        for conn in self._conns:
            conn.close()


def test_batch_false_never_waits_on_a_hanging_collector() -> None:
    hanging = _HangingCollector()
    try:
        handle = tracescore.configure(exporter="otlp-http", endpoint=f"http://127.0.0.1:{hanging.port}",
                                      batch=False)

        @tracescore.agent(name="patient")
        def ask(question: str) -> str:
            return question.upper()

        assert hanging.received.wait(0) is False
        answers = [ask(f"q{i}") for i in range(5)]
        assert answers == [f"Q{i}" for i in range(5)]
        # every call returned; the first export request is still unanswered
        assert hanging.received.wait(10)
        assert handle.flush(0.5) is False  # bounded, and says the export did not finish
        assert handle.stats()["export.exported"] == 0
        handle.shutdown(0.5)
    finally:
        hanging.close()


def test_batch_false_exports_each_span_without_a_flush() -> None:
    done = threading.Event()
    exported: list[str] = []

    class _Notify(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            exported.extend(s.name for s in spans)
            done.set()
            return SpanExportResult.SUCCESS

    tracescore.configure(exporter=_Notify(), batch=False)
    _spans(["prompt"])
    assert done.wait(10)  # exported by the background thread, no flush needed
    assert exported == ["prompt"]


@pytest.mark.parametrize("option", ["max_span_bytes", "max_request_bytes"])
@pytest.mark.parametrize("value", [0, -1, 100, 1.5, "1MB", True])
def test_size_limits_are_checked_at_configure_time(option: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=option):
        tracescore.configure(exporter="none", **{option: value})  # type: ignore[arg-type]


def test_size_limits_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracescore._export_pipeline import ExportLimits

    monkeypatch.setenv("TRACESCORE_MAX_SPAN_BYTES", "65536")
    monkeypatch.setenv("TRACESCORE_MAX_REQUEST_BYTES", "131072")
    assert ExportLimits.resolve(None, None) == ExportLimits(65536, 131072)
    assert ExportLimits.resolve(8192, None) == ExportLimits(8192, 131072)  # the argument wins
    monkeypatch.setenv("TRACESCORE_MAX_SPAN_BYTES", "lots")
    with pytest.warns(RuntimeWarning, match="TRACESCORE_MAX_SPAN_BYTES"):
        assert ExportLimits.resolve(None, None).max_span_bytes == 131072  # default, within the request
    monkeypatch.delenv("TRACESCORE_MAX_SPAN_BYTES")
    monkeypatch.delenv("TRACESCORE_MAX_REQUEST_BYTES")
    assert ExportLimits.resolve(None, 65536) == ExportLimits(65536, 65536)  # a span never exceeds a request


def test_stats_include_online_scoring() -> None:
    exporter = InMemorySpanExporter()
    handle = tracescore.configure(exporter=exporter, scorers=[tracescore.ContentSimilarityScorer()],
                                  online={"isolation": "thread"})

    @tracescore.agent(name="echo")
    def echo(text: str) -> str:
        return text

    echo("same words")
    assert handle.flush(10)
    stats = handle.stats()
    assert stats["scored"] == 1 and stats["sampled"] == 1
    assert stats["export.exported"] == len(exporter.get_finished_spans()) == 1


class _Gated(SpanExporter):
    """Records each request's span names; the first export waits until `gate` opens."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.requests: list[list[str]] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.gate.wait(30)
        self.requests.append([s.name for s in spans])
        return SpanExportResult.SUCCESS


def test_batch_false_sends_what_ended_meanwhile_in_one_request() -> None:
    exporter = _Gated()
    handle = tracescore.configure(exporter=exporter, batch=False)
    _spans(["first"])
    assert exporter.entered.wait(10)  # the export of "first" is in progress, and waits
    _spans([f"next-{i}" for i in range(10)])  # these calls return meanwhile
    exporter.gate.set()
    assert handle.flush(10)
    assert exporter.requests == [["first"], [f"next-{i}" for i in range(10)]]


def test_batch_false_queue_is_bounded_and_drops_the_oldest() -> None:
    from tracescore._export_pipeline import PromptExportProcessor

    exporter = _Gated()
    processor = PromptExportProcessor(exporter, max_queue_size=4)
    provider = trace.get_tracer_provider()
    provider.add_span_processor(processor)  # type: ignore[attr-defined]
    _spans(["first"])
    assert exporter.entered.wait(10)
    _spans([f"s{i}" for i in range(7)])
    assert processor.dropped == 3
    exporter.gate.set()
    assert processor.force_flush(10000)
    assert exporter.requests == [["first"], ["s3", "s4", "s5", "s6"]]
    processor.shutdown()
    processor.shutdown()  # idempotent


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_batch_false_exports_in_a_forked_child(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    tracescore.configure(exporter="file", file_path=path, batch=False)
    _spans(["parent"])
    assert tracescore.flush(5)
    pid = os.fork()
    if pid == 0:  # the child: the export thread was not copied; it must be restarted
        try:
            _spans(["child"])
            os._exit(0 if tracescore.flush(5) else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    names = [s.name for line in path.read_text().splitlines() for s in spans_from_otlp_json(line)]
    assert names == ["parent", "child"]


_COLLECTOR = """
receivers:
  otlp:
    protocols:
      grpc: {}
      http: {}
processors:
  batch: {timeout: 200ms, send_batch_size: 4, send_batch_max_size: 4}
exporters:
  otlphttp:
    endpoint: %s
service:
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [otlphttp]}
"""


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first test to need the collector may build it
def test_the_real_collector_takes_a_huge_span_and_a_big_batch_over_grpc(otlp_receiver: OTLPReceiver) -> None:
    """The collector's gRPC receiver keeps its default 4 MiB message limit."""
    from tracescore.testing import OTelCollector

    with OTelCollector(_COLLECTOR % otlp_receiver.http_endpoint) as collector:
        handle = tracescore.configure(exporter="otlp-grpc", endpoint=collector.grpc_endpoint)
        tracer = trace.get_tracer("pipeline-test")
        _spans([f"healthy-{i}" for i in range(5)])
        with tracer.start_as_current_span("huge") as span:
            span.set_attribute("dump", "d" * (20 * _MB))
        _spans([f"{chr(97 + i % 26)}-{i}" for i in range(20)], blob=900 * 1024)
        assert handle.flush(60)
        received = otlp_receiver.wait_for_spans(26, timeout=60)
    assert len({s.span_id for s in received}) == 26
    (huge,) = [s for s in received if s.name == "huge"]
    assert huge.attributes[sc.TS_SPAN_TRUNCATED] is True
    assert handle.stats()["export.failed"] == 0
