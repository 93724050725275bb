"""`tracescore serve` as a real process, logs through it: log records acknowledged and then
SIGKILLed are forwarded by the next start (the journal); an agent span whose question and
answer come only as GenAI log events is judged (real litellm to the stub judge); and agents of
OpenTelemetry's own GenAI helper with content capture `EVENT_ONLY` (the model calls' messages
only in log records) are judged on their questions and answers."""

from __future__ import annotations

import itertools
import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from _gateway_helpers import ANSWER, QUESTION
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tracescore.testing import GatewayProcess, OTLPReceiver, Reply, StubLLMServer

pytestmark = pytest.mark.slow
_EXPORT_LOGS = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
RUNNER = Path(__file__).resolve().parents[1] / "rigs" / "agents" / "genai_logs_agent.py"
EVAL = "gen_ai.evaluation.result"


def _logs_request(first: int, count: int = 50) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    scope_logs = request.resource_logs.add().scope_logs.add()
    scope_logs.scope.name = "load"
    for index in range(first, first + count):
        record = scope_logs.log_records.add(time_unix_nano=1_700_000_000_000_000_000 + index)
        record.body.string_value = f"record {index}"
    return request


@pytest.mark.parametrize("next_hop", ["up", "down"])
def test_sigkill_loses_no_acknowledged_log_record(next_hop: str, tmp_path: Path) -> None:
    receiver = OTLPReceiver().start()
    if next_hop == "down":
        receiver.fail_next(1_000_000, status=503)
    config = tmp_path / "gateway.yaml"
    config.write_text("scoring:\n  isolation: thread\n  scorers: [{scorer: similarity}]\n",
                      encoding="utf-8")
    gateway = GatewayProcess(["--config", str(config), "--endpoint", receiver.grpc_endpoint,
                              "--journal", str(tmp_path / "journal.db"),
                              "--set", "limits.max_pending_spans=1000000"]).start()
    acknowledged: set[str] = set()
    stop = threading.Event()

    def send() -> None:
        with grpc.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
            export = channel.unary_unary(_EXPORT_LOGS)
            for first in itertools.count(0, 50):
                if stop.is_set():
                    return
                try:
                    export(_logs_request(first).SerializeToString(), timeout=5)
                except grpc.RpcError:
                    return  # the gateway died: this request was not acknowledged
                acknowledged.update(f"record {i}" for i in range(first, first + 50))

    thread = threading.Thread(target=send)
    thread.start()
    while len(acknowledged) < 3000 and thread.is_alive():
        thread.join(0.05)
    gateway.kill()
    stop.set()
    thread.join(10)
    if next_hop == "down":
        assert not receiver.logs
        receiver.clear()  # the next hop comes back
    gateway.restart()
    ours = set(acknowledged)
    deadline = time.monotonic() + 60
    while not ours <= {r.body for r in receiver.logs} and time.monotonic() < deadline:
        time.sleep(0.2)
    received = [r.body for r in receiver.logs]
    assert ours <= set(received), f"{len(ours - set(received))} of {len(ours)} missing"
    if next_hop == "down":
        assert len(received) == len(set(received))  # nothing was forwarded before the kill
    gateway.stop()
    receiver.stop()


def _judge(request: dict[str, Any]) -> Reply:
    step = request.get("response_format", {}).get("json_schema", {}).get("name", "")
    if step.endswith("statements"):
        return Reply(content={"statements": ["the answer"]})
    if step.endswith("verdicts"):
        return Reply(content={"results": [{"result": "yes", "reason": "on topic"}]})
    return Reply(content={"reason": "The score is 1 because it answers."})


def _relevancy_config(tmp_path: Path, stub_llm: StubLLMServer) -> Path:
    stub_llm.responder = _judge
    config = tmp_path / "gateway.yaml"
    config.write_text(
        "scoring:\n  isolation: thread\n  scorers:\n    - scorer: relevancy\n"
        f"      options: {{model: openai/judge-stub, api_base: '{stub_llm.base_url}',"
        " api_key: sk-test, timeout: 20}\n", encoding="utf-8")
    return config


def _judged(stub_llm: StubLLMServer) -> list[str]:
    """The texts the judge was shown (its analyze steps' prompts)."""
    return [json.dumps(r.messages, ensure_ascii=False) for r in stub_llm.requests]


def test_serve_judges_an_agent_span_from_its_content_logs(
        tmp_path: Path, otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer) -> None:
    config = _relevancy_config(tmp_path, stub_llm)
    with GatewayProcess(["--config", str(config), "--endpoint", otlp_receiver.grpc_endpoint,
                         "--journal", str(tmp_path / "journal.db")]) as gateway:
        base = f"http://127.0.0.1:{gateway.http_port}"
        logs = LoggerProvider()
        logs.add_log_record_processor(SimpleLogRecordProcessor(
            OTLPLogExporter(endpoint=f"{base}/v1/logs")))
        traces = TracerProvider()
        traces.add_span_processor(SimpleSpanProcessor(
            OTLPSpanExporter(endpoint=f"{base}/v1/traces")))
        logger = logs.get_logger("agent.framework")
        with traces.get_tracer("agent.framework").start_as_current_span(
                "invoke_agent geo", attributes={"gen_ai.operation.name": "invoke_agent",
                                                "gen_ai.agent.name": "geo"}) as span:
            logger.emit(event_name="gen_ai.user.message", body={"content": QUESTION})
            logger.emit(event_name="gen_ai.choice", body={
                "index": 0, "message": {"role": "assistant", "content": ANSWER}})
        span_id = f"{span.get_span_context().span_id:016x}"
        (scored,) = otlp_receiver.wait_for_spans(
            lambda s: s.span_id == span_id and any(e.name == EVAL for e in s.events), timeout=30)
        event = next(e for e in scored.events if e.name == EVAL)
        assert event.attributes["gen_ai.evaluation.score.value"] == 1.0
        assert any(QUESTION in text and ANSWER in text for text in _judged(stub_llm))
        otlp_receiver.wait_for_logs(2)
        logs.shutdown()
        traces.shutdown()


def test_genai_helper_agents_with_content_only_in_logs_are_judged(
        tmp_path: Path, otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer) -> None:
    """opentelemetry-util-genai as installed, `EVENT_ONLY`: the agent span and its model call's
    span carry no content; the call's messages are a `gen_ai.client.inference.operation.details`
    log record. The agent call is read from its model call, whose messages come from the log."""
    from rigs.conventions import conventions_venv

    python = conventions_venv() / "bin" / "python"
    cases = [{"question": f"{index}. What is the capital of {place}?",
              "answer": f"The capital of {place} is {capital}."}
             for index, (place, capital) in enumerate(
                 [("France", "Paris"), ("Peru", "Lima"), ("Japan", "Tokyo")])]
    cases_file = tmp_path / "cases.json"
    cases_file.write_text(json.dumps(cases), encoding="utf-8")
    config = _relevancy_config(tmp_path, stub_llm)
    with GatewayProcess(["--config", str(config), "--endpoint", otlp_receiver.grpc_endpoint,
                         "--journal", str(tmp_path / "journal.db")]) as gateway:
        done = subprocess.run([str(python), str(RUNNER), str(cases_file),
                               f"http://127.0.0.1:{gateway.http_port}"],
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        scored = otlp_receiver.wait_for_spans(
            lambda s: s.name == "invoke_agent geo" and any(e.name == EVAL for e in s.events),
            count=len(cases), timeout=60)
        details = otlp_receiver.wait_for_logs(
            lambda r: r.event_name == "gen_ai.client.inference.operation.details",
            count=len(cases), timeout=30)
    assert all("gen_ai.input.messages" not in s.attributes for s in otlp_receiver.spans)
    assert len(details) == len(cases)  # forwarded as they came
    for span in scored:
        (event,) = [e for e in span.events if e.name == EVAL]
        assert event.attributes["gen_ai.evaluation.score.value"] == 1.0
    judged = _judged(stub_llm)
    for case in cases:  # each question judged with its answer, the system prompt never as either
        assert any(case["question"] in text and case["answer"] in text for text in judged)
    assert not any("SYSTEM-PROMPT" in text for text in judged)
