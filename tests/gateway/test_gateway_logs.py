"""OTLP logs through the scoring gateway, sent by the SDK's own OTLP log exporters (HTTP and
gRPC): every record reaches the next hop unchanged and counted, and the GenAI content events
among them are joined to the agent span they belong to, which is then scored (whether the logs
arrive before the span or after it). The same join in process (`ScoringLogRecordProcessor`)."""

from __future__ import annotations

import gzip
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from _gateway_helpers import ANSWER, QUESTION
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
    OTLPLogExporter as GrpcLogExporter,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http._log_exporter import (
    OTLPLogExporter as HttpLogExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore.gateway import Gateway, GatewayConfig
from tracescore.online import OnlineScorer, ScoringLogRecordProcessor, ScoringSpanProcessor
from tracescore.scoring import Scorer, ScoreResult
from tracescore.scoring._inputs import question_text
from tracescore.testing import OTLPReceiver

EVAL = "gen_ai.evaluation.result"
AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "geo"}


class EchoScorer(Scorer):
    """Scores 1 and reports what it was given to judge (question and answer) in its reason."""

    id = "echo"
    name = "Echo"
    uses_judge = False

    def __init__(self) -> None:
        self.seen: list[tuple[Any, Any]] = []

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None, **_: Any) -> ScoreResult:
        self.seen.append((input, output))
        return ScoreResult(run_id=run_id or "r", scorer_id=self.id, scorer_name=self.name,
                           score=1.0, reason=json.dumps({"input": input, "output": output}))


def _config(tmp_path: Path, next_hop: str, scorer: Any = None, **changes: Any) -> GatewayConfig:
    options: dict[str, Any] = {
        "grpc_endpoint": "127.0.0.1:0", "http_endpoint": "127.0.0.1:0",
        "health_endpoint": "127.0.0.1:0", "exporter_endpoint": next_hop,
        "journal_path": str(tmp_path / "journal.db"), "journal_sync": "normal",
        "scorers": [OnlineScorer(scorer or EchoScorer())], "isolation": "thread",
        "shutdown_timeout_s": 10.0,
    }
    options.update(changes)
    return GatewayConfig(**options)



def _log_exporter(gateway: Gateway, protocol: str) -> Any:
    if protocol == "http":
        return HttpLogExporter(endpoint=f"http://127.0.0.1:{gateway.http_port}/v1/logs")
    return GrpcLogExporter(endpoint=f"http://127.0.0.1:{gateway.grpc_port}", insecure=True)


def _span_exporter(gateway: Gateway, protocol: str) -> Any:
    if protocol == "http":
        return HttpSpanExporter(endpoint=f"http://127.0.0.1:{gateway.http_port}/v1/traces")
    return GrpcSpanExporter(endpoint=f"http://127.0.0.1:{gateway.grpc_port}", insecure=True)


def _wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        time.sleep(0.02)


def _judged_question_and_answer(scorer: EchoScorer) -> None:
    """The scorer was given the logged conversation, ending with the user's question (the
    question scorers judge), and the logged answer."""
    ((conversation, answer),) = scorer.seen
    assert conversation == [{"role": "system", "content": "You answer briefly."},
                            {"role": "user", "content": QUESTION}]
    assert answer == ANSWER


def _emit_content(logger: Any) -> None:
    """The GenAI content events of one model call, as instrumentations that log them emit them
    (inside the span they belong to: the trace and span ids come from the context)."""
    logger.emit(event_name="gen_ai.system.message", body={"content": "You answer briefly."},
                attributes={"gen_ai.system": "openai"})
    logger.emit(event_name="gen_ai.user.message", body={"content": QUESTION},
                attributes={"gen_ai.system": "openai"})
    logger.emit(event_name="gen_ai.choice",
                body={"index": 0, "finish_reason": "stop",
                      "message": {"role": "assistant", "content": ANSWER}},
                attributes={"gen_ai.system": "openai"})


@pytest.mark.parametrize(("sender", "next_hop"), [("http", "grpc"), ("grpc", "http")])
def test_log_records_reach_the_next_hop_unchanged_and_counted(
        tmp_path: Path, otlp_receiver: OTLPReceiver, gateway_factory: Any, sender: str,
        next_hop: str) -> None:
    endpoint = {"grpc": otlp_receiver.grpc_endpoint, "http": otlp_receiver.http_endpoint}[next_hop]
    changes = {} if next_hop == "grpc" else {"exporter_protocol": "http/protobuf"}
    gateway = gateway_factory(_config(tmp_path, endpoint, **changes))
    provider = LoggerProvider(resource=Resource.create({"service.name": "shop"}))
    provider.add_log_record_processor(BatchLogRecordProcessor(_log_exporter(gateway, sender)))
    logger = provider.get_logger("shop.orders", "1.2")
    tracer = TracerProvider().get_tracer("t")
    sent = 0
    with tracer.start_as_current_span("handle") as span:
        for index in range(25):
            logger.emit(body=f"order {index} placed", severity_text="INFO",
                        severity_number=SeverityNumber.INFO,
                        attributes={"order.id": index, "order.ok": index % 2 == 0},
                        timestamp=1_700_000_000_000_000_000 + index)
            sent += 1
        _emit_content(logger)
        sent += 3
        context = span.get_span_context()
        ids = (f"{context.trace_id:032x}", f"{context.span_id:016x}")
    provider.force_flush()
    received = otlp_receiver.wait_for_logs(sent, timeout=10)
    orders = sorted((r for r in received if r.body and str(r.body).startswith("order")),
                    key=lambda r: r.time_unix_nano)
    assert [r.body for r in orders] == [f"order {i} placed" for i in range(25)]
    first = orders[0]
    assert first.attributes == {"order.id": 0, "order.ok": True}
    assert (first.severity_text, first.severity_number) == ("INFO", 9)
    assert first.time_unix_nano == 1_700_000_000_000_000_000
    assert first.observed_time_unix_nano > 0
    assert (first.trace_id, first.span_id) == ids
    assert first.resource["service.name"] == "shop"
    assert first.scope_name == "shop.orders"
    choice = next(r for r in received if r.event_name == "gen_ai.choice")
    assert choice.body["message"] == {"role": "assistant", "content": ANSWER}
    assert (choice.trace_id, choice.span_id) == ids
    _wait_for(lambda: gateway.stats()["logs_pending"] == 0)  # (acknowledged, out of the journal)
    stats = gateway.stats()
    assert stats["logs_received"] == stats["logs_forwarded"] == sent
    assert stats["log_content_records"] == 3
    assert "tracescore_gateway_logs_forwarded_total 28" in gateway.prometheus()
    provider.shutdown()


def _agent_run(tmp_path: Path, receiver: OTLPReceiver, gateway: Gateway, protocol: str,
               logs_first: bool) -> Any:
    """An agent span without content whose question and answer come only as GenAI log events,
    sent through the gateway with the logs exported before the span or after it."""
    logs = LoggerProvider()
    exporter = _log_exporter(gateway, protocol)
    logs.add_log_record_processor(SimpleLogRecordProcessor(exporter) if logs_first
                                  else BatchLogRecordProcessor(exporter,
                                                               schedule_delay_millis=60_000))
    traces = TracerProvider()
    traces.add_span_processor(SimpleSpanProcessor(_span_exporter(gateway, protocol)))
    tracer = traces.get_tracer("agent.framework")
    with tracer.start_as_current_span("invoke_agent geo", attributes=AGENT) as span:
        _emit_content(logs.get_logger("agent.framework"))
    if not logs_first:  # the span is at the gateway (and waiting) before its content
        logs.force_flush()
    span_id = f"{span.get_span_context().span_id:016x}"
    received = receiver.wait_for_spans(
        lambda s: s.span_id == span_id and any(e.name == EVAL for e in s.events), timeout=15)
    logs.shutdown()
    traces.shutdown()
    return received[0]


@pytest.mark.parametrize("logs_first", [True, False], ids=["logs-first", "span-first"])
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_agent_span_read_from_its_content_logs_is_scored(
        tmp_path: Path, otlp_receiver: OTLPReceiver, gateway_factory: Any, protocol: str,
        logs_first: bool) -> None:
    scorer = EchoScorer()
    gateway = gateway_factory(_config(tmp_path, otlp_receiver.grpc_endpoint, scorer))
    span = _agent_run(tmp_path, otlp_receiver, gateway, protocol, logs_first)
    event = next(e for e in span.events if e.name == EVAL)
    assert event.attributes["gen_ai.evaluation.score.value"] == 1.0
    _judged_question_and_answer(scorer)
    # the span goes on as it came, plus its score: no content was added to it
    assert "gen_ai.input.messages" not in span.attributes
    otlp_receiver.wait_for_logs(3)  # the records themselves went on too


def test_content_logs_of_other_spans_and_other_records_are_ignored(
        tmp_path: Path, otlp_receiver: OTLPReceiver, gateway_factory: Any) -> None:
    """Records of another span, records without a span and ordinary records read nothing: the
    agent span without content goes on unscored after its wait."""
    scorer = EchoScorer()
    gateway = gateway_factory(_config(tmp_path, otlp_receiver.grpc_endpoint, scorer,
                                      trace={"llm_wait_s": 0.3}))
    logs = LoggerProvider()
    logs.add_log_record_processor(SimpleLogRecordProcessor(_log_exporter(gateway, "http")))
    logger = logs.get_logger("x")
    traces = TracerProvider()
    traces.add_span_processor(SimpleSpanProcessor(_span_exporter(gateway, "http")))
    tracer = traces.get_tracer("agent.framework")
    with tracer.start_as_current_span("other"):
        _emit_content(logger)  # another span's content
    logger.emit(event_name="gen_ai.user.message", body={"content": QUESTION})  # no span
    with tracer.start_as_current_span("invoke_agent geo", attributes=AGENT) as span:
        logger.emit(body=QUESTION)  # no GenAI event
    span_id = f"{span.get_span_context().span_id:016x}"
    received = otlp_receiver.wait_for_spans(lambda s: s.span_id == span_id, timeout=10)[0]
    assert scorer.seen == []
    assert all(e.name != EVAL or "gen_ai.evaluation.score.value" not in e.attributes
               for e in received.events)
    assert gateway.stats()["log_content_records"] == 3
    logs.shutdown()
    traces.shutdown()


def test_in_process_log_record_processor_feeds_the_span_processor() -> None:
    """In process: the log record processor beside the exporting one; the agent span without
    content is read from the content events logged inside it."""
    scorer = EchoScorer()
    spans = InMemorySpanExporter()
    processor = ScoringSpanProcessor(SimpleSpanProcessor(spans), [OnlineScorer(scorer)],
                                     score_genai_spans=True, isolation="thread")
    traces = TracerProvider()
    traces.add_span_processor(processor)
    logs = LoggerProvider()
    logs.add_log_record_processor(tracescore.ScoringLogRecordProcessor(processor))
    assert tracescore.ScoringLogRecordProcessor is ScoringLogRecordProcessor
    with traces.get_tracer("agent.framework").start_as_current_span("invoke_agent geo",
                                                                   attributes=AGENT):
        _emit_content(logs.get_logger("agent.framework"))
    traces.force_flush()
    processor.shutdown()
    (span,) = spans.get_finished_spans()
    assert [e.name for e in span.events] == [EVAL]
    _judged_question_and_answer(scorer)


def test_otlp_json_logs_over_http_are_forwarded_and_read(
        tmp_path: Path, otlp_receiver: OTLPReceiver, gateway_factory: Any) -> None:
    """OTLP/JSON (hex ids, as the JSON encoding writes them) on /v1/logs, gzip-compressed."""
    gateway = gateway_factory(_config(tmp_path, otlp_receiver.grpc_endpoint))
    trace_id, span_id = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
    body = {"resourceLogs": [{"scopeLogs": [{"logRecords": [
        {"eventName": "gen_ai.user.message", "traceId": trace_id, "spanId": span_id,
         "body": {"kvlistValue": {"values": [{"key": "content",
                                              "value": {"stringValue": QUESTION}}]}}},
        {"timeUnixNano": "1700000000000000000", "body": {"stringValue": "plain line"}},
    ]}]}]}
    request = urllib.request.Request(
        f"http://127.0.0.1:{gateway.http_port}/v1/logs", method="POST",
        data=gzip.compress(json.dumps(body).encode()),
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        assert (reply.status, reply.read()) == (200, b"{}")
    received = otlp_receiver.wait_for_logs(2)
    user = next(r for r in received if r.event_name == "gen_ai.user.message")
    assert (user.trace_id, user.span_id, user.body) == (trace_id, span_id, {"content": QUESTION})
    plain = next(r for r in received if r.body == "plain line")
    assert plain.time_unix_nano == 1_700_000_000_000_000_000
    assert gateway.stats()["log_content_records"] == 1
    bad = urllib.request.Request(f"http://127.0.0.1:{gateway.http_port}/v1/logs", method="POST",
                                 data=b"\xff\x00", headers={"Content-Type": "application/x-protobuf"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(bad, timeout=10)
    assert refused.value.code == 400


def test_in_process_model_call_messages_logged_read_the_agent_span_above() -> None:
    """In process, content only on a model call's log record (`operation.details`, structured
    values as OpenTelemetry's GenAI helper writes them): the agent span without content above
    it is read from that call."""
    scorer = EchoScorer()
    spans = InMemorySpanExporter()
    processor = ScoringSpanProcessor(SimpleSpanProcessor(spans), [OnlineScorer(scorer)],
                                     score_genai_spans=True, isolation="thread")
    traces = TracerProvider()
    traces.add_span_processor(processor)
    logs = LoggerProvider()
    logs.add_log_record_processor(ScoringLogRecordProcessor(processor))
    tracer, logger = traces.get_tracer("genai"), logs.get_logger("genai")
    with tracer.start_as_current_span("invoke_agent geo", attributes=AGENT), \
            tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}):
        logger.emit(event_name="gen_ai.client.inference.operation.details", attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([
                {"role": "system", "parts": [{"type": "text", "content": "You answer briefly."}]},
                {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]),
            "gen_ai.output.messages": json.dumps([
                {"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}])})
    traces.force_flush()
    processor.shutdown()
    agent = next(s for s in spans.get_finished_spans() if s.name == "invoke_agent geo")
    assert [e.name for e in agent.events] == [EVAL]
    ((question, answer),) = scorer.seen
    assert answer == ANSWER
    assert question_text(question) == QUESTION  # what the judge is shown as the question


def _logs_body(count: int, first: int = 0) -> bytes:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    request = ExportLogsServiceRequest()
    records = request.resource_logs.add().scope_logs.add().log_records
    for index in range(first, first + count):
        records.add().body.string_value = f"record {index}"
    return request.SerializeToString()


def _post_logs(gateway: Gateway, body: bytes) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(f"http://127.0.0.1:{gateway.http_port}/v1/logs", data=body,
                                     method="POST",
                                     headers={"Content-Type": "application/x-protobuf"})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, dict(reply.headers)
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers)


def test_log_records_wait_out_a_next_hop_outage_and_backpressure_refuses_retryably(
        tmp_path: Path, otlp_receiver: OTLPReceiver, gateway_factory: Any) -> None:
    otlp_receiver.fail_next(1_000_000, status=503)  # the next hop is down
    gateway = gateway_factory(_config(tmp_path, otlp_receiver.grpc_endpoint,
                                      max_pending_spans=30))
    assert _post_logs(gateway, _logs_body(20))[0] == 200  # acknowledged: journaled
    status, headers = _post_logs(gateway, _logs_body(20, first=20))  # 20 + 20 > 30
    assert status == 429 and "Retry-After" in headers
    assert gateway.stats()["logs_refused"] == 20
    _wait_for(lambda: gateway.stats()["logs_forward_retries"] >= 1)
    otlp_receiver.fail_next(0)  # the next hop is back
    received = otlp_receiver.wait_for_logs(20, timeout=30)
    assert {r.body for r in received} >= {f"record {i}" for i in range(20)}
    _wait_for(lambda: gateway.stats()["logs_pending"] == 0, timeout=30)
    stats = gateway.stats()
    assert stats["logs_forward_retries"] >= 1
    assert stats["logs_forwarded"] + stats["logs_refused"] == 40
    ready, detail = gateway.health()
    assert ready and detail["pending_log_records"] == 0


def _details(question: str, answer: str) -> dict[str, Any]:
    """A model call's `operation.details` record attributes (as OpenTelemetry's GenAI helper
    writes them: structured messages, a system instruction first)."""
    return {"gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([
                {"role": "system", "parts": [{"type": "text", "content": "You answer briefly."}]},
                {"role": "user", "parts": [{"type": "text", "content": question}]}]),
            "gen_ai.output.messages": json.dumps([
                {"role": "assistant", "parts": [{"type": "text", "content": answer}]}])}


@pytest.mark.parametrize("logs_first", [True, False], ids=["logs-first", "spans-first"])
def test_agent_span_read_from_a_model_call_whose_messages_are_logged(
        tmp_path: Path, otlp_receiver: OTLPReceiver, gateway_factory: Any,
        logs_first: bool) -> None:
    """Through the gateway: an agent span without content, a `chat` span below it without
    content, the call's messages in its log record, arriving before the spans or after them."""
    scorer = EchoScorer()
    gateway = gateway_factory(_config(tmp_path, otlp_receiver.grpc_endpoint, scorer))
    logs = LoggerProvider()
    exporter = _log_exporter(gateway, "http")
    logs.add_log_record_processor(SimpleLogRecordProcessor(exporter) if logs_first
                                  else BatchLogRecordProcessor(exporter,
                                                               schedule_delay_millis=60_000))
    traces = TracerProvider()
    traces.add_span_processor(SimpleSpanProcessor(_span_exporter(gateway, "http")))
    tracer, logger = traces.get_tracer("genai"), logs.get_logger("genai")
    if not logs_first:  # a content record already seen, as in a gateway that has run a while
        with tracer.start_as_current_span("earlier"):
            logger.emit(event_name="gen_ai.user.message", body={"content": "earlier"})
        logs.force_flush()
        _wait_for(lambda: gateway.stats()["log_content_records"] == 1)
    with tracer.start_as_current_span("invoke_agent geo", attributes=AGENT) as agent, \
            tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}):
        logger.emit(event_name="gen_ai.client.inference.operation.details",
                    attributes=_details(QUESTION, ANSWER))
    if not logs_first:
        logs.force_flush()  # after both spans
    span_id = f"{agent.get_span_context().span_id:016x}"
    otlp_receiver.wait_for_spans(
        lambda s: s.span_id == span_id and any(e.name == EVAL for e in s.events), timeout=15)
    ((question, answer),) = scorer.seen
    assert (question_text(question), answer) == (QUESTION, ANSWER)
    logs.shutdown()
    traces.shutdown()
