"""configure(): pipeline swapping, provider extension, validation, content options, file export."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
from collections.abc import Iterator

import pytest
from _helpers import shut_down_pipelines
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import _setup
from tracescore._config import content_settings
from tracescore._exceptions import ConfigurationError
from tracescore._exporters import OTLPJsonFileExporter


@pytest.fixture(autouse=True)
def _clean_pipelines(span_exporter: InMemorySpanExporter) -> Iterator[None]:
    """Every test starts and ends with no tracescore pipeline on the shared global provider."""
    shut_down_pipelines()
    yield
    shut_down_pipelines()


def _emit(name: str, provider: TracerProvider | None = None) -> None:
    tracer = (provider or trace.get_tracer_provider()).get_tracer("test")
    with tracer.start_as_current_span(name):
        pass


def _routers_on(provider: TracerProvider) -> int:
    processors = provider._active_span_processor._span_processors
    return sum(isinstance(p, _setup._Router) for p in processors)


def test_exports_through_the_global_provider() -> None:
    exporter = InMemorySpanExporter()
    handle = tracescore.configure(exporter=exporter, batch=False)
    _emit("one")
    assert handle.flush(5)  # batch=False exports at once, from a background thread
    assert [s.name for s in exporter.get_finished_spans()] == ["one"]
    assert handle.tracer_provider is trace.get_tracer_provider()
    assert handle.active


def test_configure_twice_swaps_the_pipeline_without_double_export(
        span_exporter: InMemorySpanExporter) -> None:
    first, second = InMemorySpanExporter(), InMemorySpanExporter()
    old = tracescore.configure(exporter=first, batch=False)
    _emit("before")
    new = tracescore.configure(exporter=second, batch=False)
    _emit("after")
    assert new.flush(5)
    assert [s.name for s in first.get_finished_spans()] == ["before"]
    assert [s.name for s in second.get_finished_spans()] == ["after"]
    assert not old.active and new.active
    assert _routers_on(new.tracer_provider) == 1
    # the application's own processor (the test fixture's) still sees every span
    assert [s.name for s in span_exporter.get_finished_spans()] == ["before", "after"]


def test_old_pipeline_is_flushed_when_replaced() -> None:
    first = InMemorySpanExporter()
    tracescore.configure(exporter=first)  # batched: spans wait in the queue
    _emit("queued")
    tracescore.configure(exporter=InMemorySpanExporter())
    assert [s.name for s in first.get_finished_spans()] == ["queued"]


def test_shutdown_detaches_and_configure_works_again() -> None:
    first = InMemorySpanExporter()
    handle = tracescore.configure(exporter=first)
    _emit("kept")
    handle.shutdown()
    _emit("after-shutdown")
    assert [s.name for s in first.get_finished_spans()] == ["kept"]
    handle.shutdown()  # idempotent
    assert handle.flush() is True

    second = InMemorySpanExporter()
    again = tracescore.configure(exporter=second, batch=False)
    _emit("again")
    assert again.flush(5)
    assert [s.name for s in second.get_finished_spans()] == ["again"]


def test_module_level_flush_and_shutdown_act_on_the_latest_handle() -> None:
    assert tracescore.flush() is True  # nothing configured
    tracescore.shutdown()
    exporter = InMemorySpanExporter()
    handle = tracescore.configure(exporter=exporter)
    _emit("batched")
    assert tracescore.flush(timeout=5) is True
    assert [s.name for s in exporter.get_finished_spans()] == ["batched"]
    tracescore.shutdown()
    assert not handle.active


def test_extends_a_given_provider_and_keeps_its_processors() -> None:
    provider = TracerProvider()
    own = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(own))
    ours = InMemorySpanExporter()
    handle = tracescore.configure(exporter=ours, batch=False, tracer_provider=provider)
    tracescore.configure(exporter=ours, batch=False, tracer_provider=provider)
    _emit("mine", provider)
    assert tracescore.flush(5)
    assert handle.tracer_provider is provider
    assert [s.name for s in own.get_finished_spans()] == ["mine"]
    assert [s.name for s in ours.get_finished_spans()] == ["mine"]
    assert _routers_on(provider) == 1


def test_several_exporters_fan_out() -> None:
    a, b = InMemorySpanExporter(), InMemorySpanExporter()
    handle = tracescore.configure(exporter=[a, b, "none"])
    _emit("both")
    assert handle.flush(5)
    assert [s.name for s in a.get_finished_spans()] == ["both"]
    assert [s.name for s in b.get_finished_spans()] == ["both"]


def test_none_exporter_exports_nothing_but_spans_still_record(
        span_exporter: InMemorySpanExporter) -> None:
    handle = tracescore.configure(exporter="none")
    _emit("silent")
    assert handle.exporters == ()
    assert [s.name for s in span_exporter.get_finished_spans()] == ["silent"]


def test_exporter_names_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    handle = tracescore.configure()
    assert [type(e) for e in handle.exporters] == [ConsoleSpanExporter]


@pytest.mark.parametrize(("protocol", "module"), [
    (None, "opentelemetry.exporter.otlp.proto.http.trace_exporter"),
    ("http/protobuf", "opentelemetry.exporter.otlp.proto.http.trace_exporter"),
    ("grpc", "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"),
])
def test_otlp_protocol_from_environment(monkeypatch: pytest.MonkeyPatch, protocol: str | None,
                                        module: str) -> None:
    if protocol is not None:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    handle = tracescore.configure(exporter="otlp", endpoint="http://127.0.0.1:9")
    assert [type(e).__module__ for e in handle.exporters] == [module]


def test_http_endpoint_gets_the_traces_path() -> None:
    for endpoint, url in [("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
                          ("https://x.example/api/otel/v1/traces",) * 2]:
        (exporter,) = tracescore.configure(exporter="otlp-http", endpoint=endpoint).exporters
        assert isinstance(exporter, OTLPSpanExporter)
        assert exporter._endpoint == url


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"exporter": "jaeger"}, "unknown exporter"),
    ({"exporter": ["console", 3]}, "unknown exporter"),
    ({"exporter": "otlp-http", "endpoint": "localhost:4318"}, "http(s) URL"),
    ({"exporter": "otlp-http", "endpoint": "http://host:notaport"}, "invalid port"),
    ({"exporter": "otlp-grpc", "endpoint": "ftp://host:4317"}, "OTLP/gRPC endpoint"),
    ({"exporter": "console", "endpoint": "http://localhost:4318"}, "only to OTLP"),
    ({"exporter": "otlp", "compression": "brotli"}, "compression"),
    ({"exporter": "otlp", "headers": {"a": 1}}, "headers"),
    ({"exporter": "file"}, "file_path"),
    ({"exporter": "console", "file_path": "x.jsonl"}, "file_path"),
    ({"exporter": "none", "online": {"rate": 1.0}}, "scorers"),
    ({"exporter": "none", "tracer_provider": object()}, "sdk.trace.TracerProvider"),
    ({"exporter": "none", "service_name": ""}, "service_name"),
    ({"exporter": "none", "max_content_length": -1}, "max_length"),
])
def test_bad_arguments_raise_configuration_error(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        tracescore.configure(**kwargs)
    assert not _setup._handles


def test_unwritable_file_path_is_a_configuration_error(tmp_path) -> None:
    with pytest.raises(ConfigurationError, match="cannot open trace file"):
        tracescore.configure(exporter="file", file_path=tmp_path / "missing-dir" / "spans.jsonl")


def test_headers_string_is_parsed_like_the_env_var() -> None:
    handle = tracescore.configure(exporter="otlp-http", endpoint="http://127.0.0.1:9",
                                  headers="x-team=a,authorization=Bearer%20t")
    sent = handle.exporters[0]._client._headers if hasattr(handle.exporters[0], "_client") else {}
    assert sent.get("x-team") == "a"
    assert sent.get("authorization") == "Bearer t"


def test_content_options_are_forwarded() -> None:
    def hook(text: str) -> str:
        return text.upper()

    tracescore.configure(exporter="none", capture_content=False, max_content_length=100,
                         redact=False, redaction_hook=hook)
    settings = content_settings()
    assert (settings.capture, settings.max_length, settings.redact, settings.redaction_hook) == (
        False, 100, False, hook)


def test_file_exporter_writes_otlp_json_lines(tmp_path) -> None:
    path = tmp_path / "spans.jsonl"
    handle = tracescore.configure(exporter="file", file_path=path, batch=False)
    tracer = trace.get_tracer("file-test")
    with tracer.start_as_current_span("parent") as parent:
        parent.set_attribute("gen_ai.agent.name", "helper")
        with tracer.start_as_current_span("child") as child:
            child.add_event("step", {"n": 2})
    handle.shutdown()

    lines = path.read_text().splitlines()
    assert 1 <= len(lines) <= 2  # one request per batch (batch=False: what ended meanwhile)
    spans = [s for line in lines for rs in json.loads(line)["resourceSpans"]
             for ss in rs["scopeSpans"] for s in ss["spans"]]
    by_name = {s["name"]: s for s in spans}
    ctx = parent.get_span_context()
    assert by_name["parent"]["traceId"] == f"{ctx.trace_id:032x}"
    assert by_name["parent"]["spanId"] == f"{ctx.span_id:016x}"
    assert by_name["child"]["parentSpanId"] == by_name["parent"]["spanId"]
    assert by_name["parent"]["attributes"] == [
        {"key": "gen_ai.agent.name", "value": {"stringValue": "helper"}}]
    assert by_name["child"]["events"][0]["name"] == "step"
    assert by_name["child"]["kind"] == 1  # integer enum as OTLP JSON requires


def test_file_exporter_appends_whole_lines_from_many_threads(tmp_path) -> None:
    path = tmp_path / "spans.jsonl"
    exporter = OTLPJsonFileExporter(path)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("threads")

    def work(i: int) -> None:
        for j in range(25):
            with tracer.start_as_current_span(f"s{i}-{j}") as span:
                span.set_attribute("payload", "x" * 2000)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    exporter.shutdown()
    lines = path.read_text().splitlines()
    assert len(lines) == 100
    assert all(json.loads(line)["resourceSpans"] for line in lines)


def test_bad_online_option_names_are_configuration_errors() -> None:
    scorer = tracescore.create_content_similarity_scorer()
    with pytest.raises(ConfigurationError, match="online"):
        tracescore.configure(exporter="none", scorers=[scorer], online={"bogus_option": 1})
    assert not _setup._handles


def test_a_single_scorer_is_accepted(span_exporter: InMemorySpanExporter) -> None:
    scorer = tracescore.create_content_similarity_scorer()
    handle = tracescore.configure(exporter="none", scorers=scorer)
    assert type(handle._pipeline).__name__ == "ScoringSpanProcessor"


def test_failed_configure_changes_nothing(tmp_path) -> None:
    exporter = InMemorySpanExporter()
    tracescore.configure(exporter=exporter, batch=False)
    with pytest.raises(ConfigurationError):
        tracescore.configure(exporter=["console", "otlp-http"], endpoint="nope",
                             capture_content=False)
    assert content_settings().capture is True
    _emit("still-here")
    assert tracescore.flush(5)
    assert [s.name for s in exporter.get_finished_spans()] == ["still-here"]


class _GatedScorer:
    """Scorer contract double: scores 1.0 once `gate` opens (never, if it stays closed)."""

    id = "gated"
    name = "Gated"
    uses_judge = False

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate

    async def arun(self, *, input, output, ground_truth=None, run_id=None):
        import asyncio

        from tracescore.scoring import JudgeUsage, ScoreResult

        while not self.gate.is_set():
            await asyncio.sleep(0.005)
        return ScoreResult(run_id=run_id or "r", scorer_id=self.id, scorer_name=self.name,
                           score=1.0, label="ok", reason=None, preprocess_prompt=None,
                           preprocess_step_result=None, analyze_prompt=None,
                           analyze_step_result=None, generate_reason_prompt=None,
                           usage=JudgeUsage(model=None))


def _events(span, name: str) -> list[dict]:
    return [dict(e.attributes or {}) for e in span.events if e.name == name]


@pytest.mark.parametrize("batch", [False, True])
def test_shutdown_exports_held_spans_once_with_reason_shutdown(batch: bool) -> None:
    from tracescore import _semconv as sc

    gate = threading.Event()  # the judge never answers
    exporter = InMemorySpanExporter()
    handle = tracescore.configure(exporter=exporter, batch=batch, scorers=[_GatedScorer(gate)],
                                  online={"shutdown_timeout_s": 60, "max_wait_s": 60})
    bot = tracescore.agent(name="bot")(lambda q: q.upper())
    for i in range(4):
        bot(f"q{i}")
    processor = handle._pipeline
    assert isinstance(processor, tracescore.ScoringSpanProcessor)
    handle.shutdown(0.5)  # bounded by this timeout, not by the 60 s of the options
    spans = exporter.get_finished_spans()
    assert len(spans) == len({s.context.span_id for s in spans}) == 4  # each exactly once
    assert [e[sc.TS_UNSCORED_REASON] for s in spans for e in _events(s, sc.TS_UNSCORED)] == [
        "shutdown"
    ] * 4
    assert processor.stats()["dropped.shutdown"] == 4 and processor.stats()["held"] == 0
    gate.set()
    handle.shutdown(0.5)  # idempotent: nothing exported twice
    tracescore.shutdown(0.5)
    assert len(exporter.get_finished_spans()) == 4


def test_shutdown_waits_for_scoring_that_finishes_in_time() -> None:
    from tracescore import _semconv as sc

    gate = threading.Event()
    exporter = InMemorySpanExporter()
    handle = tracescore.configure(exporter=exporter, batch=False, scorers=[_GatedScorer(gate)])
    bot = tracescore.agent(name="bot")(lambda q: q)
    bot("q")
    threading.Timer(0.05, gate.set).start()
    handle.shutdown(20)
    (span,) = exporter.get_finished_spans()
    assert [e[sc.GEN_AI_EVALUATION_SCORE_VALUE] for e in _events(span, sc.GEN_AI_EVALUATION_RESULT)
            ] == [1.0]
    assert _events(span, sc.TS_UNSCORED) == []


def test_configure_in_a_forked_child_while_a_parent_thread_held_the_setup_lock() -> None:
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with _setup._lock:
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(10)
    pid = os.fork()
    if pid == 0:  # child: a deadlocked child is killed by the alarm instead of hanging the run
        code = 1
        try:
            signal.alarm(20)
            exporter = InMemorySpanExporter()
            handle = tracescore.configure(exporter=exporter, batch=False,
                                          tracer_provider=TracerProvider())
            _emit("child", handle.tracer_provider)
            handle.shutdown(5)
            code = 0 if [s.name for s in exporter.get_finished_spans()] == ["child"] else 2
        finally:
            os._exit(code)
    release.set()
    holder.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_configure_refused_for_a_non_sdk_global_provider_leaves_nothing_running(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tracescore.online._listener import LISTENERS

    exporter = InMemorySpanExporter()
    monkeypatch.setattr(_setup.trace, "get_tracer_provider", trace.NoOpTracerProvider)
    live_before = LISTENERS.live()
    with pytest.raises(ConfigurationError, match="not an SDK TracerProvider"):
        tracescore.configure(exporter=exporter, scorers=_GatedScorer(threading.Event()),
                             capture_content=False)
    assert LISTENERS.live() == live_before  # no scoring processor left listening
    assert content_settings().capture is True
