"""`tracescore inspect` reads content logged as GenAI log records, joined to its span by trace and
span id, as the gateway does (issue 34, family 3 through inspect): an agent span without content
whose messages were logged, and an agent span whose model call logged its messages, are shown
with the user's question and the logged answer, whether the records come before or after the
spans; records of other spans or other events change nothing. And `inspect --listen` takes the
records from the SDK's own OTLP log exporter."""

from __future__ import annotations

import base64
import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from _span_trees import Node, sent_requests
from hypothesis import given, settings
from hypothesis import strategies as st
from test_log_content import _otlp, conversations

import tracescore
from tracescore import _semconv as sc
from tracescore.gateway._inspect import Inspector

AGENT = {sc.GEN_AI_OPERATION_NAME: "invoke_agent", sc.GEN_AI_AGENT_NAME: "geo"}
CHAT = {sc.GEN_AI_OPERATION_NAME: "chat", sc.GEN_AI_REQUEST_MODEL: "m"}


def _span_ids(requests: list[Any]) -> dict[str, tuple[int, int]]:
    """span name -> (trace id, span id) of the spans sent."""
    return {span.name: (int.from_bytes(span.trace_id, "big"), int.from_bytes(span.span_id, "big"))
            for request in requests for rs in request.resource_spans for ss in rs.scope_spans
            for span in ss.spans}


@settings(max_examples=40, deadline=None)
@given(case=conversations(), on=st.sampled_from(["agent", "model call"]),
       logs_first=st.booleans(), noise=st.booleans())
def test_logged_content_is_read_by_inspect_as_the_gateway_reads_it(
        case: tuple[str, str, list[dict[str, Any]]], on: str, logs_first: bool,
        noise: bool) -> None:
    question, answer, records = case
    requests = sent_requests([Node("invoke_agent geo", dict(AGENT),
                                   [Node("chat m", dict(CHAT))])])
    trace_id, span_id = _span_ids(requests)["invoke_agent geo" if on == "agent" else "chat m"]
    records = [dict(r, trace=trace_id, span=span_id) for r in records]
    if noise:  # another span's content, and an event that is no content
        records += [{"name": "gen_ai.user.message", "named": "event_name", "trace": trace_id,
                     "span": span_id + 1, "body": {"content": "NOT THIS"}},
                    {"name": "app.log", "named": "event_name", "trace": trace_id,
                     "span": span_id, "body": "NOT THIS EITHER"}]
    inspector = Inspector(tracescore.build_recognisers())
    if logs_first:
        inspector.add_logs(_otlp(records))
    for request in requests:
        inspector.add(request)
    if not logs_first:
        inspector.add_logs(_otlp(records))
    [report] = inspector.reports()
    assert (report.name, report.scored, report.question, report.answer) == (
        "invoke_agent geo", True, question.strip(), answer.strip())


def test_without_the_records_the_same_spans_are_explained() -> None:
    inspector = Inspector(tracescore.build_recognisers())
    for request in sent_requests([Node("invoke_agent geo", dict(AGENT),
                                       [Node("chat m", dict(CHAT))])]):
        inspector.add(request)
    [report] = inspector.reports()
    assert (report.scored, report.reason) == (False, "no_input_or_output")


def test_inspect_listen_joins_the_records_the_sdk_log_exporter_sends() -> None:
    from opentelemetry._logs import SeverityNumber
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    process = subprocess.Popen(
        [sys.executable, "-m", "tracescore", "inspect", "--listen", "--http-endpoint",
         "127.0.0.1:0", "--for", "120", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        port = None
        while port is None:
            line = process.stderr.readline()
            assert line, "inspect --listen exited before listening"
            found = re.match(r"listening for OTLP/HTTP on [\d.]+:(\d+)", line)
            port = int(found.group(1)) if found else None
        base = f"http://127.0.0.1:{port}"
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(
            OTLPSpanExporter(endpoint=f"{base}/v1/traces")))
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(
            OTLPLogExporter(endpoint=f"{base}/v1/logs")))
        logger = logger_provider.get_logger("genai")
        pairs = [(f"Question {i}: which river flows through Vienna?", f"Answer {i}: the Danube.")
                 for i in range(3)]
        tracer = tracer_provider.get_tracer("app")
        for question, answer in pairs:
            details = {
                sc.GEN_AI_INPUT_MESSAGES: json.dumps([{"role": "user", "parts": [
                    {"type": "text", "content": question}]}]),
                sc.GEN_AI_OUTPUT_MESSAGES: json.dumps([{"role": "assistant", "parts": [
                    {"type": "text", "content": answer}]}])}
            with (tracer.start_as_current_span("invoke_agent geo", attributes=AGENT),
                  tracer.start_as_current_span("chat m", attributes=CHAT)):
                logger.emit(event_name="gen_ai.client.inference.operation.details",
                            attributes=details, severity_number=SeverityNumber.INFO)
        tracer_provider.shutdown()
        logger_provider.shutdown()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert "3 GenAI content log records" in err
    reports = json.loads(out)["agent_spans"]
    assert [(r["scored"], r["question"], r["answer"]) for r in reports] == [
        (True, q, a) for q, a in pairs]


def test_inspect_reads_log_lines_of_a_file_beside_its_span_lines(tmp_path: Path) -> None:
    """A collector's file exporter writes logs as `resourceLogs` lines among the span lines:
    `tracescore inspect FILE` joins their content records to the spans too."""
    from click.testing import CliRunner
    from google.protobuf import json_format

    from tracescore._otlp_json import to_otlp_json
    from tracescore.cli import main

    question, answer = "Which bridge is the oldest in Prague?", "The Charles Bridge."
    requests = sent_requests([Node("invoke_agent geo", dict(AGENT), [Node("chat m", dict(CHAT))])])
    trace_id, span_id = _span_ids(requests)["chat m"]
    logs = json_format.MessageToDict(_otlp([
        {"name": "gen_ai.user.message", "named": "event_name", "trace": trace_id,
         "span": span_id, "body": {"content": question}},
        {"name": "gen_ai.choice", "named": "event_name", "trace": trace_id, "span": span_id,
         "body": {"message": {"role": "assistant", "content": answer}}}]))
    for record in logs["resourceLogs"][0]["scopeLogs"][0]["logRecords"]:  # ids in hex, as written
        record["traceId"] = base64.b64decode(record["traceId"]).hex()
        record["spanId"] = base64.b64decode(record["spanId"]).hex()
    lines = [json.dumps(logs), *(to_otlp_json(request) for request in requests)]
    path = tmp_path / "export.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["inspect", "--json", str(path)])
    assert result.exit_code == 0, result.output
    [report] = json.loads(result.stdout)["agent_spans"]
    assert (report["scored"], report["question"], report["answer"]) == (True, question, answer)
