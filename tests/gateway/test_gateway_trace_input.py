"""What a scorer sees in the gateway: the tool calls and context recorded by the spans of the agent
span's trace that arrived before it (or with it), read the same way as in process; nested tools
included, a concurrent sibling's left out; the per-trace buffer bounded in traces, bytes and age,
and fed only by traces a scorer may sample.

Spans are sent by a real SDK exporter over OTLP to a running gateway and read back from the real
receiver behind it; the scorer reports what it was given in its reason.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _gateway_helpers import agent_attributes, seen_gateway, sender
from _helpers import SeenScorer
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace as trace_api
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from tracescore import ConfigurationError
from tracescore import _semconv as sc
from tracescore.gateway import Gateway, load_gateway_config
from tracescore.gateway._engine import Engine
from tracescore.gateway._metrics import GatewayMetrics
from tracescore.online import OnlineScorer
from tracescore.online._sampling import is_sampled
from tracescore.online.intake import BufferLimits, OtlpSpanView, TraceCollector
from tracescore.testing import OTLPReceiver

EVAL = sc.GEN_AI_EVALUATION_RESULT


def tool(tracer: Any, name: str, arguments: dict[str, Any], result: str | None = None,
         error: str | None = None) -> None:
    attributes = {sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_NAME: name,
                  sc.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps(arguments),
                  sc.GEN_AI_TOOL_CALL_ID: f"call-{name}"}
    if result is not None:
        attributes[sc.GEN_AI_TOOL_CALL_RESULT] = result
    with tracer.start_as_current_span(f"execute_tool {name}", attributes=attributes) as span:
        if error is not None:
            span.set_attribute(sc.ERROR_TYPE, "PermissionError")
            span.set_status(Status(StatusCode.ERROR, error))


def support_trace(tracer: Any) -> None:
    """An agent with two tools (one failing), a retriever, and a nested agent with a tool."""
    with tracer.start_as_current_span("invoke_agent support",
                                      attributes=agent_attributes(name="support")):
        tool(tracer, "search", {"q": "refunds"}, "Refunds take 5 days.")
        tool(tracer, "refund", {"order": 7}, error="refund denied")
        with tracer.start_as_current_span("retrieve", attributes={
                sc.OI_SPAN_KIND: "RETRIEVER",
                "retrieval.documents.0.document.content": "Policy: 30 days.",
                "retrieval.documents.1.document.content": "Managers approve > 100 EUR."}):
            pass
        with tracer.start_as_current_span("invoke_agent helper",
                                          attributes=agent_attributes(name="helper")):
            tool(tracer, "lookup", {"key": "order-7"}, '{"value": 42}')


def seen(receiver: OTLPReceiver, count: int) -> dict[str, dict[str, Any]]:
    spans = receiver.wait_for_spans(lambda s: s.name.startswith("invoke_agent"), count=count,
                                    timeout=30)
    out = {}
    for span in spans:
        (event,) = span.events_named(EVAL)
        out[span.attributes[sc.GEN_AI_AGENT_NAME]] = json.loads(
            event.attributes[sc.GEN_AI_EVALUATION_EXPLANATION])
    return out


@pytest.fixture
def gateway(tmp_path: Path, otlp_receiver: OTLPReceiver) -> Iterator[Gateway]:
    with seen_gateway(tmp_path, otlp_receiver.grpc_endpoint) as gateway:
        yield gateway


@pytest.mark.parametrize("batched", [False, True], ids=["span-by-span", "one-request"])
def test_agent_spans_get_the_tool_calls_and_context_of_spans_sent_before_them(
        gateway: Gateway, otlp_receiver: OTLPReceiver, batched: bool) -> None:
    exporter = HttpExporter(endpoint=f"http://127.0.0.1:{gateway.http_port}/v1/traces")
    if batched:  # the whole trace in one request, the agent spans last (they end last)
        memory = InMemorySpanExporter()
        with sender(memory) as tracer:
            support_trace(tracer)
        exporter.export(memory.get_finished_spans())
        exporter.shutdown()
    else:  # one request per span, in the order they end
        with sender(exporter) as tracer:
            support_trace(tracer)
    by_agent = seen(otlp_receiver, 2)
    stats = gateway.stats()
    assert stats["trace_buffer_traces"] == 1 and stats["trace_buffer_bytes"] > 0
    assert stats["trace_buffer_evicted"] == 0
    lookup = ["lookup", {"key": "order-7"}, {"value": 42}, None]
    assert by_agent["support"]["tools"] == [
        ["search", {"q": "refunds"}, "Refunds take 5 days.", None],
        ["refund", {"order": 7}, None, "refund denied"],
        lookup,
    ]
    assert by_agent["support"]["ids"] == ["call-search", "call-refund", "call-lookup"]
    assert by_agent["support"]["context"] == [
        "Refunds take 5 days.", "Policy: 30 days.", "Managers approve > 100 EUR.",
        '{"value": 42}']
    assert by_agent["helper"] == {"tools": [lookup], "context": ['{"value": 42}'],
                                  "ids": ["call-lookup"]}


def test_a_concurrent_sibling_calls_tools_are_not_mixed_in(gateway: Gateway,
                                                            otlp_receiver: OTLPReceiver) -> None:
    exporter = HttpExporter(endpoint=f"http://127.0.0.1:{gateway.http_port}/v1/traces")
    with sender(exporter) as tracer, tracer.start_as_current_span("request"):
        first = tracer.start_span("invoke_agent a", attributes=agent_attributes(name="a"))
        second = tracer.start_span("invoke_agent b", attributes=agent_attributes(name="b"))
        for step in range(3):  # their tool calls interleave
            for agent, name in ((first, "a"), (second, "b")):
                with trace_api.use_span(agent, end_on_exit=False):
                    tool(tracer, f"{name}-tool", {"step": step}, f"{name}{step}")
        first.end()
        second.end()
    by_agent = seen(otlp_receiver, 2)
    for name in ("a", "b"):
        assert [t[0] for t in by_agent[name]["tools"]] == [f"{name}-tool"] * 3
        assert by_agent[name]["context"] == [f"{name}{step}" for step in range(3)]


def test_spans_arriving_after_their_agent_span_are_not_used(gateway: Gateway,
                                                            otlp_receiver: OTLPReceiver) -> None:
    memory = InMemorySpanExporter()
    with sender(memory) as tracer:
        support_trace(tracer)
    spans = list(memory.get_finished_spans())
    agents = [s for s in spans if s.name.startswith("invoke_agent")]
    exporter = HttpExporter(endpoint=f"http://127.0.0.1:{gateway.http_port}/v1/traces")
    exporter.export(agents)  # the agent spans first, their children later
    exporter.export([s for s in spans if s not in agents])
    exporter.shutdown()
    assert seen(otlp_receiver, 2)["support"] == {"tools": [], "context": [], "ids": []}


def _request(tracer_spans: Any) -> ExportTraceServiceRequest:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return encode_spans(tracer_spans)


class _Discard:
    def put(self, ids: tuple[int, ...], body: bytes, count: int) -> None:
        pass


@settings(max_examples=15, deadline=None)
@given(rate=st.sampled_from([0.0, 0.3, 0.7]), seed=st.integers(0, 2**32 - 1))
def test_only_traces_a_scorer_may_sample_are_buffered(rate: float, seed: int) -> None:
    engine = Engine(scorers=[OnlineScorer(SeenScorer(), rate=rate)], recognisers=[],
                    output=_Discard(), metrics=GatewayMetrics(),
                    processor_options={"isolation": "thread"})
    try:
        memory = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        tracer = provider.get_tracer("t")
        rng = random.Random(seed)
        for _ in range(20):
            with tracer.start_as_current_span("request"):
                tool(tracer, "search", {"n": rng.random()}, "text")
        spans = memory.get_finished_spans()
        engine.accept(_request(spans))
        kept = {span.context.trace_id for span in spans if is_sampled(span.context.trace_id, rate)}
        assert set(engine.traces.trace_ids()) == kept
    finally:
        engine.shutdown(5)


def _span_request(trace_id: int, span_id: int, text: str) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add(name="retrieve")
    span.trace_id = trace_id.to_bytes(16, "big")
    span.span_id = span_id.to_bytes(8, "big")
    span.parent_span_id = (span_id + 1).to_bytes(8, "big")
    span.attributes.add(key=sc.TS_CONTEXT).value.string_value = text
    return request


@settings(max_examples=40, deadline=None)
@given(texts=st.lists(st.text(max_size=200), min_size=1, max_size=40),
       max_traces=st.integers(1, 10), max_bytes=st.integers(0, 3000),
       steps=st.lists(st.floats(0, 5), min_size=40, max_size=40))
def test_the_buffer_stays_within_its_bounds_dropping_the_oldest_first(
        texts: list[str], max_traces: int, max_bytes: int, steps: list[float]) -> None:
    now = [0.0]
    buffer = TraceCollector(bounds=BufferLimits(max_traces=max_traces, max_bytes=max_bytes,
                                                max_age_s=10.0), clock=lambda: now[0])
    added: list[int] = []
    for index, (text, step) in enumerate(zip(texts, steps)):
        now[0] += step
        trace_id = index + 1
        span = _span_request(trace_id, 2 * trace_id, text).resource_spans[0].scope_spans[0].spans[0]
        buffer.add_span(OtlpSpanView(span))
        added.append(trace_id)
        assert buffer.traces <= max_traces and buffer.bytes <= max_bytes
        kept = buffer.trace_ids()
        assert kept == added[len(added) - len(kept):]  # a suffix: the oldest went first
        assert all((buffer.age_of(t) or 0.0) <= 10.0 for t in kept)
    assert buffer.evicted == len(texts) - buffer.traces


def test_trace_section_of_the_config_is_checked(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("trace: {max_tool_calls: 8, max_traces: 100, max_age_s: 5}\n")
    assert load_gateway_config(good, environ={}).trace == {
        "max_tool_calls": 8, "max_traces": 100, "max_age_s": 5}
    for text, key in (("trace: {max_age_s: 0}\n", "trace.max_age_s"),
                      ("trace: {max_bytes: -1}\n", "trace.max_bytes"),
                      ("trace: {max_chars: x}\n", "max_chars"),
                      ("trace: {max_calls: 3}\n", "trace.max_calls")):
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        with pytest.raises(ConfigurationError, match=key):
            load_gateway_config(bad, environ={})


def test_rescore_gives_scorers_the_tool_calls_of_the_stored_trace(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tracescore._exporters import OTLPJsonFileExporter
    from tracescore.cli import main
    from tracescore.testing import spans_from_otlp_json

    stored = tmp_path / "traces.jsonl"
    with sender(OTLPJsonFileExporter(stored)) as tracer:
        support_trace(tracer)
    config = tmp_path / "gateway.yaml"
    config.write_text("scoring:\n  scorers:\n    - scorer: tool-call-accuracy\n"
                      "      options: {expected_tool_order: [search, refund]}\n")
    out = tmp_path / "rescored.jsonl"
    result = CliRunner().invoke(main, ["rescore", str(stored), "--config", str(config),
                                       "-o", str(out)])
    assert result.exit_code == 0, result.output
    scores = {span.attributes[sc.GEN_AI_AGENT_NAME]:
              span.events_named(EVAL)[0].attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE]
              for line in out.read_text().splitlines() for span in spans_from_otlp_json(line)}
    assert scores == {"support": 1.0, "helper": 0.0}  # helper called lookup only
