"""tracescore.testing: the OTLP receiver decodes what the real exporters send; the stub serves real litellm."""

from __future__ import annotations

import asyncio
import gzip
import json
import urllib.error
import urllib.request
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
    OTLPMetricExporter as GrpcMetricExporter,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
    OTLPMetricExporter as HttpMetricExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from tracescore import _semconv as sc
from tracescore.testing import OTLPReceiver, Reply, StubLLMServer, spans_from_otlp_json

RESOURCE = Resource.create({"service.name": "receiver-test", "deployment.environment": "test"})
# Attributes of every type on the agent span, and its score event: sent, then decoded back as is.
AGENT_ATTRIBUTES: dict[str, AttributeValue] = {
    sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
    sc.GEN_AI_AGENT_NAME: "weather",
    "count": 3,
    "ratio": 0.5,
    "flag": True,
    "tags": ["a", "b"],
    "numbers": [1, 2, 3],
}
SCORE_EVENT: dict[str, AttributeValue] = {
    sc.GEN_AI_EVALUATION_SCORE_VALUE: 0.25,
    sc.GEN_AI_EVALUATION_EXPLANATION: "The score is 0.25 because",
}


def _exporter(receiver: OTLPReceiver, protocol: str, signal: str = "traces", **kwargs):
    """The real OTel exporter of `signal` ("traces", "logs", "metrics") to the receiver."""
    if protocol == "http":
        http_exporter, url = {
            "traces": (HttpSpanExporter, receiver.traces_url),
            "logs": (HttpLogExporter, receiver.logs_url),
            "metrics": (HttpMetricExporter, receiver.metrics_url),
        }[signal]
        return http_exporter(endpoint=url, timeout=5, **kwargs)
    grpc_exporter = {
        "traces": GrpcSpanExporter,
        "logs": GrpcLogExporter,
        "metrics": GrpcMetricExporter,
    }[signal]
    return grpc_exporter(endpoint=receiver.grpc_endpoint, timeout=5, **kwargs)


def _emit_agent_trace(exporter) -> None:
    """An agent span with a tool child, attributes of every type, a score event, an error and a link."""
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tracescore.test", "1.0")
    with tracer.start_as_current_span("linked") as linked:
        link_context = linked.get_span_context()
    with tracer.start_as_current_span(
        "invoke_agent weather", links=[Link(link_context, {"why": "follows"})]
    ) as agent:
        agent.set_attributes(AGENT_ATTRIBUTES)
        with tracer.start_as_current_span("execute_tool lookup", kind=SpanKind.CLIENT) as tool:
            tool.set_status(Status(StatusCode.ERROR, "tool broke"))
        agent.add_event(sc.GEN_AI_EVALUATION_RESULT, SCORE_EVENT)
        agent.set_status(Status(StatusCode.OK))
    provider.shutdown()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_receiver_decodes_spans_from_real_exporters(
    otlp_receiver: OTLPReceiver, protocol: str
) -> None:
    _emit_agent_trace(_exporter(otlp_receiver, protocol))

    spans = otlp_receiver.wait_for_spans(3)
    by_name = {span.name: span for span in spans}
    agent, tool, linked = (
        by_name["invoke_agent weather"],
        by_name["execute_tool lookup"],
        by_name["linked"],
    )

    assert {span.protocol for span in spans} == {protocol}
    assert agent.parent_span_id is None and tool.parent_span_id == agent.span_id
    assert (
        tool.trace_id == agent.trace_id and len(agent.trace_id) == 32 and len(agent.span_id) == 16
    )
    assert otlp_receiver.children_of(agent) == [tool]
    assert agent.attributes == AGENT_ATTRIBUTES
    assert agent.events == [(sc.GEN_AI_EVALUATION_RESULT, SCORE_EVENT)]
    assert (
        agent.events_named(sc.GEN_AI_EVALUATION_RESULT)[0].attributes[
            sc.GEN_AI_EVALUATION_SCORE_VALUE
        ]
        == 0.25
    )
    assert (
        agent.status_code == "OK" and agent.kind == "INTERNAL" and agent.kind == SpanKind.INTERNAL
    )
    assert (
        tool.status_code == "ERROR"
        and tool.status_message == "tool broke"
        and tool.kind == SpanKind.CLIENT
    )
    assert agent.links == [(linked.trace_id, linked.span_id, {"why": "follows"})]
    assert agent.resource["service.name"] == "receiver-test"
    assert agent.scope_name == "tracescore.test"
    assert agent.end_time_unix_nano >= agent.start_time_unix_nano > 0


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_receiver_accepts_gzip_and_records_headers(
    otlp_receiver: OTLPReceiver, protocol: str
) -> None:
    if protocol == "http":
        exporter = _exporter(
            otlp_receiver, protocol, compression=HttpCompression.Gzip, headers={"x-api-key": "k1"}
        )
    else:
        exporter = _exporter(
            otlp_receiver,
            protocol,
            compression=grpc.Compression.Gzip,
            headers=(("x-api-key", "k1"),),
        )
    _emit_agent_trace(exporter)

    otlp_receiver.wait_for_spans(lambda s: s.name == "execute_tool lookup")
    request = otlp_receiver.requests[0]
    assert request.signal == "traces" and request.protocol == protocol
    assert request.headers["x-api-key"] == "k1"
    if (
        protocol == "http"
    ):  # gRPC decompresses below the servicer; arriving intact is the check there
        assert request.content_encoding == "gzip"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_receiver_decodes_logs(otlp_receiver: OTLPReceiver, protocol: str) -> None:
    exporter = _exporter(otlp_receiver, protocol, "logs")
    logger_provider = LoggerProvider(resource=RESOURCE)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    tracer_provider = TracerProvider()
    with tracer_provider.get_tracer("t").start_as_current_span("evaluated") as span:
        logger_provider.get_logger("tracescore.online").emit(
            body={"score": 0.5, "steps": ["analyze", {"n": 2}], "raw": b"\x01"},
            attributes={sc.GEN_AI_EVALUATION_NAME: "Answer Relevancy"},
            event_name=sc.GEN_AI_EVALUATION_RESULT,
        )
        context = span.get_span_context()
    logger_provider.shutdown()

    (record,) = otlp_receiver.wait_for_logs(1)
    assert record.body == {"score": 0.5, "steps": ["analyze", {"n": 2}], "raw": b"\x01"}
    assert record.attributes == {sc.GEN_AI_EVALUATION_NAME: "Answer Relevancy"}
    assert record.event_name == sc.GEN_AI_EVALUATION_RESULT
    assert record.trace_id == format(context.trace_id, "032x")
    assert record.span_id == format(context.span_id, "016x")
    assert record.scope_name == "tracescore.online" and record.protocol == protocol
    assert record.resource["service.name"] == "receiver-test"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_receiver_decodes_metrics(otlp_receiver: OTLPReceiver, protocol: str) -> None:
    exporter = _exporter(otlp_receiver, protocol, "metrics")
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=3_600_000)
    meter_provider = MeterProvider(metric_readers=[reader], resource=RESOURCE)
    meter = meter_provider.get_meter("tracescore.online")
    meter.create_counter("tracescore.scored").add(2, {"scorer": "relevancy"})
    histogram = meter.create_histogram("tracescore.score")
    histogram.record(0.2, {"scorer": "relevancy"})
    histogram.record(0.8, {"scorer": "relevancy"})
    meter_provider.shutdown()

    counter = otlp_receiver.wait_for_metric("tracescore.scored")
    assert counter.kind == "sum" and [(p.attributes, p.value) for p in counter.points] == [
        ({"scorer": "relevancy"}, 2)
    ]
    hist = otlp_receiver.wait_for_metric("tracescore.score")
    (point,) = hist.points
    assert hist.kind == "histogram" and point.count == 2 and point.sum == pytest.approx(1.0)
    assert point.min == pytest.approx(0.2) and point.max == pytest.approx(0.8)
    assert hist.protocol == protocol


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_fail_next_makes_exporter_retry(otlp_receiver: OTLPReceiver, protocol: str) -> None:
    otlp_receiver.fail_next(1, status=503)
    _emit_agent_trace(_exporter(otlp_receiver, protocol))

    otlp_receiver.wait_for_spans(3)
    statuses = [r.rejected_with for r in otlp_receiver.requests if r.signal == "traces"]
    assert (
        statuses[0] == 503 and statuses.count(None) == 3
    )  # first try rejected, retried, then the rest


def test_fail_next_non_retryable_status_loses_the_batch(otlp_receiver: OTLPReceiver) -> None:
    otlp_receiver.fail_next(1, status=400)
    exporter = _exporter(otlp_receiver, "http")
    provider = TracerProvider()
    span = provider.get_tracer("t").start_span("rejected")
    span.end()
    assert exporter.export([span]) == SpanExportResult.FAILURE
    assert otlp_receiver.spans == [] and [r.rejected_with for r in otlp_receiver.requests] == [400]


def _post(url: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


OTLP_JSON = {
    "resourceSpans": [
        {
            "resource": {
                "attributes": [{"key": "service.name", "value": {"stringValue": "json-svc"}}]
            },
            "scopeSpans": [
                {
                    "scope": {"name": "s"},
                    "spans": [
                        {
                            "traceId": "5b8efff798038103d269b633813fc60c",
                            "spanId": "eee19b7ec3c1b174",
                            "parentSpanId": "eee19b7ec3c1b173",
                            "name": "from-json",
                            "kind": 3,
                            "attributes": [{"key": "n", "value": {"intValue": "7"}}],
                            "status": {"code": 2, "message": "bad"},
                        }
                    ],
                }
            ],
        }
    ]
}


def test_receiver_accepts_otlp_json_and_gzip_bodies(otlp_receiver: OTLPReceiver) -> None:
    body = json.dumps(OTLP_JSON).encode()
    assert _post(otlp_receiver.traces_url, body, {"Content-Type": "application/json"}) == 200
    compressed = gzip.compress(body)
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    assert _post(otlp_receiver.traces_url, compressed, headers) == 200

    first, second = otlp_receiver.wait_for_spans(2)
    assert first.protocol == "http" and first.name == "from-json"
    assert (
        first.trace_id == "5b8efff798038103d269b633813fc60c"
        and first.parent_span_id == "eee19b7ec3c1b173"
    )
    assert first.attributes == {"n": 7} and first.kind == "CLIENT" and first.status_code == "ERROR"
    assert first.resource == {"service.name": "json-svc"}
    assert second.name == first.name == "from-json"


def test_receiver_rejects_garbage_and_unknown_paths(otlp_receiver: OTLPReceiver) -> None:
    assert (
        _post(
            otlp_receiver.traces_url,
            b"\xff\xfe not protobuf",
            {"Content-Type": "application/x-protobuf"},
        )
        == 400
    )
    assert _post(otlp_receiver.http_endpoint + "/v1/nothing", b"", {}) == 404
    assert otlp_receiver.spans == []


def test_spans_from_otlp_json_reads_hex_and_base64_ids() -> None:
    from google.protobuf import json_format

    (from_hex,) = spans_from_otlp_json(json.dumps(OTLP_JSON))
    # protobuf's own JSON mapping writes ids as base64; both forms must decode to the same ids
    provider_request = ExportTraceServiceRequest()
    span = provider_request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = (
        bytes.fromhex(from_hex.trace_id),
        bytes.fromhex(from_hex.span_id),
        "b64",
    )
    (from_b64,) = spans_from_otlp_json(json_format.MessageToJson(provider_request))
    assert from_hex.trace_id == from_b64.trace_id == "5b8efff798038103d269b633813fc60c"
    assert from_b64.span_id == "eee19b7ec3c1b174" and from_b64.protocol == "json"


def test_wait_for_spans_times_out_with_what_arrived(otlp_receiver: OTLPReceiver) -> None:
    _emit_agent_trace(_exporter(otlp_receiver, "http"))
    otlp_receiver.wait_for_spans(3)
    with pytest.raises(TimeoutError, match="invoke_agent weather"):
        otlp_receiver.wait_for_spans(lambda s: s.name == "never", timeout=0.2)
    otlp_receiver.clear()
    assert otlp_receiver.spans == [] and otlp_receiver.requests == []


def _spans_request(ids: list[tuple[bytes, bytes]]) -> bytes:
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for trace_id, span_id in ids:
        spans.add(name="s", trace_id=trace_id, span_id=span_id)
    return request.SerializeToString()


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), ids=st.lists(st.tuples(st.binary(min_size=16, max_size=16),
                                              st.binary(min_size=8, max_size=8)),
                                    min_size=2, max_size=30, unique=True))
def test_wait_for_span_ids_is_not_fooled_by_duplicates(
    otlp_receiver: OTLPReceiver, data: st.DataObject, ids: list[tuple[bytes, bytes]]
) -> None:
    """An at-least-once path delivers some spans twice and others late: a count of matching spans
    is reached while spans are still missing; waiting by id is not."""
    otlp_receiver.clear()
    late = data.draw(st.sets(st.sampled_from(ids), min_size=1, max_size=len(ids) - 1))
    early = [i for i in ids if i not in late]
    twice = data.draw(st.lists(st.sampled_from(early), min_size=len(late), max_size=len(late) + 5))
    headers = {"Content-Type": "application/x-protobuf"}
    assert _post(otlp_receiver.traces_url, _spans_request(early + twice), headers) == 200
    hexed = {(t.hex(), s.hex()) for t, s in ids}

    counted = otlp_receiver.wait_for_spans(lambda s: (s.trace_id, s.span_id) in hexed,
                                           count=len(ids), timeout=5)
    assert len(counted) >= len(ids)  # the count is reached with spans still missing
    with pytest.raises(TimeoutError, match=f"{len(late)} missing"):
        otlp_receiver.wait_for_span_ids(hexed, timeout=0.05)

    assert _post(otlp_receiver.traces_url, _spans_request(sorted(late)), headers) == 200
    arrived = otlp_receiver.wait_for_span_ids(hexed, timeout=5)
    assert {(s.trace_id, s.span_id) for s in arrived} == hexed
    assert len(arrived) == len(ids) + len(twice)


def test_receivers_are_independent(otlp_receiver: OTLPReceiver) -> None:
    with OTLPReceiver(grpc=False) as other:
        _emit_agent_trace(_exporter(otlp_receiver, "http"))
        otlp_receiver.wait_for_spans(3)
        assert other.spans == []
        with pytest.raises(RuntimeError, match="gRPC server is not running"):
            _ = other.grpc_endpoint


# --- StubLLMServer through real litellm -------------------------------------------------------


def _litellm():
    import litellm

    return litellm


def _kwargs(stub: StubLLMServer, **extra):
    return {
        "model": "openai/judge-model",
        "api_base": stub.base_url,
        "api_key": "sk-test",
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "num_retries": 0,
        "max_retries": 0,
        **extra,
    }


def test_stub_answers_litellm_completion(stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue("Paris is the capital.", usage={"prompt_tokens": 11, "completion_tokens": 5})
    response = _litellm().completion(**_kwargs(stub_llm, temperature=0))

    assert response.choices[0].message.content == "Paris is the capital."
    assert response.choices[0].finish_reason == "stop"
    assert (
        response.usage.prompt_tokens,
        response.usage.completion_tokens,
        response.usage.total_tokens,
    ) == (11, 5, 16)
    (request,) = stub_llm.requests
    assert request.path == "/v1/chat/completions" and request["model"] == "judge-model"
    assert request.messages == [{"role": "user", "content": "What is the capital of France?"}]
    assert request.get("temperature") == 0
    assert request.headers["authorization"] == "Bearer sk-test"


async def test_stub_answers_litellm_acompletion_concurrently(stub_llm: StubLLMServer) -> None:
    stub_llm.responder = lambda body: "echo: " + body["messages"][-1]["content"]
    litellm = _litellm()
    questions = [f"question {i}" for i in range(16)]
    responses = await asyncio.gather(
        *(
            litellm.acompletion(**_kwargs(stub_llm, messages=[{"role": "user", "content": q}]))
            for q in questions
        )
    )
    assert [r.choices[0].message.content for r in responses] == [f"echo: {q}" for q in questions]
    assert response_usage_default(responses[0]) == (2, 3)
    assert len(stub_llm.requests) == 16


def response_usage_default(response) -> tuple[int, int]:
    """Default usage counts words of the prompt and of the reply."""
    return response.usage.prompt_tokens, response.usage.completion_tokens


def test_stub_streams_to_litellm_with_usage(stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue(
        stream=["Par", "is ", "is it."], usage={"prompt_tokens": 9, "completion_tokens": 4}
    )
    litellm = _litellm()
    chunks = list(
        litellm.completion(**_kwargs(stub_llm, stream=True, stream_options={"include_usage": True}))
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Paris is it."
    usage = [getattr(c, "usage", None) for c in chunks if getattr(c, "usage", None)]
    assert usage and (usage[-1].prompt_tokens, usage[-1].completion_tokens) == (9, 4)
    assert stub_llm.requests[0]["stream"] is True

    rebuilt = litellm.stream_chunk_builder(chunks)
    assert rebuilt.choices[0].message.content == "Paris is it."


async def test_stub_streams_to_litellm_async(stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue("streamed answer text")
    stream = await _litellm().acompletion(**_kwargs(stub_llm, stream=True))
    parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
    assert "".join(parts) == "streamed answer text" and len([p for p in parts if p]) == 3


def test_stub_serves_json_replies_with_response_format(stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue({"statements": ["Paris is the capital of France."]})
    schema = {
        "type": "json_schema",
        "json_schema": {
            "name": "statements",
            "schema": {
                "type": "object",
                "properties": {"statements": {"type": "array", "items": {"type": "string"}}},
            },
        },
    }
    response = _litellm().completion(**_kwargs(stub_llm, response_format=schema))
    assert json.loads(response.choices[0].message.content) == {
        "statements": ["Paris is the capital of France."]
    }
    assert stub_llm.requests[0]["response_format"]["json_schema"]["name"] == "statements"


def test_stub_errors_map_to_litellm_exceptions(stub_llm: StubLLMServer) -> None:
    litellm = _litellm()
    stub_llm.enqueue_error(429, "slow down", headers={"Retry-After": "7"})
    with pytest.raises(litellm.RateLimitError, match="slow down") as rate_limited:
        litellm.completion(**_kwargs(stub_llm))
    response = getattr(rate_limited.value, "response", None)
    assert response is not None and response.headers.get("retry-after") == "7"

    stub_llm.enqueue_error(401)
    with pytest.raises(litellm.AuthenticationError):
        litellm.completion(**_kwargs(stub_llm))

    stub_llm.enqueue_error(500, "boom")
    with pytest.raises(litellm.InternalServerError):
        litellm.completion(**_kwargs(stub_llm))

    stub_llm.enqueue(
        json={"error": {"message": "custom", "type": "invalid_request_error"}}, status=400
    )
    with pytest.raises(litellm.BadRequestError, match="custom"):
        litellm.completion(**_kwargs(stub_llm))
    assert stub_llm.pending == 0 and len(stub_llm.requests) == 4


def test_stub_malformed_body_and_dropped_connection_fail_cleanly(stub_llm: StubLLMServer) -> None:
    litellm = _litellm()
    stub_llm.enqueue(body="{not json")
    with pytest.raises(
        litellm.InternalServerError
    ):  # litellm's wrapping of the client's JSON decode error
        litellm.completion(**_kwargs(stub_llm))

    stub_llm.enqueue(drop=True)
    with pytest.raises(litellm.InternalServerError, match="Connection error"):
        litellm.completion(**_kwargs(stub_llm))

    stub_llm.enqueue("fine again")
    assert litellm.completion(**_kwargs(stub_llm)).choices[0].message.content == "fine again"


def test_stub_delay_triggers_client_timeout(stub_llm: StubLLMServer) -> None:
    litellm = _litellm()
    stub_llm.enqueue("too late", delay=5)
    with pytest.raises(litellm.Timeout):
        litellm.completion(**_kwargs(stub_llm, timeout=0.3))


def test_stub_queue_then_responder_then_default(stub_llm: StubLLMServer) -> None:
    litellm = _litellm()
    assert litellm.completion(**_kwargs(stub_llm)).choices[0].message.content == "ok"
    stub_llm.default_reply = Reply(content="default")
    stub_llm.responder = lambda body: (
        None if "skip" in body["messages"][-1]["content"] else Reply(content="dyn")
    )
    stub_llm.enqueue("queued")
    contents = [
        litellm.completion(**_kwargs(stub_llm, messages=[{"role": "user", "content": text}]))
        .choices[0]
        .message.content
        for text in ("a", "b", "skip me")
    ]
    assert contents == ["queued", "dyn", "default"]
    assert len(stub_llm.wait_for_requests(4)) == 4


def test_stub_tool_calls_reach_litellm(stub_llm: StubLLMServer) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup", "arguments": '{"city": "Paris"}'},
    }
    stub_llm.enqueue(tool_calls=[call], finish_reason="tool_calls")
    message = _litellm().completion(**_kwargs(stub_llm)).choices[0].message
    assert message.tool_calls[0].function.name == "lookup"
    assert json.loads(message.tool_calls[0].function.arguments) == {"city": "Paris"}


def test_stub_stop_closes_keepalive_connections() -> None:
    with StubLLMServer() as stub:
        _litellm().completion(**_kwargs(stub))
        base_url = stub.base_url
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(base_url + "/models", timeout=2)


def test_stub_reports_a_broken_responder_as_500(stub_llm: StubLLMServer) -> None:
    def broken(body):
        raise KeyError("no such step")

    stub_llm.responder = broken
    with pytest.raises(_litellm().InternalServerError, match="stub responder raised KeyError"):
        _litellm().completion(**_kwargs(stub_llm))


# --- StubLLMServer: reply values and its own faults -----------------------------------------------
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=6)
_REPLY_VALUES = st.text(max_size=40) | st.lists(_JSON_VALUES, max_size=3) | st.dictionaries(
    st.text(max_size=5), _JSON_VALUES, max_size=3)
_NOT_REPLIES = (st.none() | st.integers() | st.floats() | st.binary() | st.booleans()
                | st.tuples(st.text()) | st.frozensets(st.integers()))


def _post_chat(stub: StubLLMServer, **extra: Any) -> tuple[int, Any]:
    """(status, JSON body) of one chat request sent with the standard library (no retries)."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], **extra})
    request = urllib.request.Request(stub.base_url + "/chat/completions", data=body.encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@given(value=_REPLY_VALUES)
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_stub_default_reply_takes_text_or_json_as_the_reply_content(
        stub_llm: StubLLMServer, value: Any) -> None:
    stub_llm.default_reply = value
    status, body = _post_chat(stub_llm)
    assert status == 200, body
    content = body["choices"][0]["message"]["content"]
    assert content == value if isinstance(value, str) else json.loads(content) == value


def test_stub_default_reply_given_as_text_reaches_litellm() -> None:
    with StubLLMServer(default_reply="plain text") as stub:
        assert _litellm().completion(**_kwargs(stub)).choices[0].message.content == "plain text"


@given(value=_NOT_REPLIES)
@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_stub_default_reply_of_another_type_is_refused_when_set(
        stub_llm: StubLLMServer, value: Any) -> None:
    before = stub_llm.default_reply
    with pytest.raises(TypeError, match=rf"default_reply must be a Reply.*not {type(value).__name__}"):
        stub_llm.default_reply = value
    assert stub_llm.default_reply is before


@given(value=st.binary() | st.sets(st.integers(), min_size=1) | st.builds(object))
@settings(max_examples=20, deadline=None)
def test_reply_content_that_json_cannot_encode_is_refused_at_construction(value: Any) -> None:
    with pytest.raises(TypeError, match=f"Reply content must be a str or a JSON value, not "
                                        f"{type(value).__name__}"):
        Reply(content=value)


# Faults inside the stub's handler, and answers a responder should not give: each is an HTTP 500
# naming the fault, never a connection closed with no answer.
_FAULTS: dict[str, tuple[Any, dict[str, Any], str]] = {
    "usage not a number": (Reply(content="x", usage={"prompt_tokens": "many"}),  # type: ignore[dict-item]
                           {},
                           "TypeError"),
    "tool call not an object": (Reply(tool_calls=["lookup"]),  # type: ignore[list-item]
                                {"stream": True}, "TypeError"),
    "responder returns bytes": (b"raw", {}, "not bytes"),
    "responder returns a set": ({1, 2}, {}, "not set"),
    "responder returns an object": (object(), {}, "not object"),
}


@pytest.mark.parametrize("fault", list(_FAULTS))
def test_a_fault_in_the_stub_is_answered_500_with_the_error(
        stub_llm: StubLLMServer, fault: str) -> None:
    answer, extra, text = _FAULTS[fault]
    stub_llm.responder = lambda request: answer
    status, body = _post_chat(stub_llm, **extra)
    assert status == 500
    assert text in body["error"]["message"]
    stub_llm.responder = None
    assert _post_chat(stub_llm)[0] == 200  # and it keeps serving
