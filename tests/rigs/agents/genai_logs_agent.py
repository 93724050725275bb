"""An agent on OpenTelemetry's own GenAI helper (opentelemetry-util-genai) with content capture
`EVENT_ONLY`, as a user who wants prompts in logs sets it: its `invoke_agent geo` and `chat`
spans carry no content; each model call's messages go out as a
`gen_ai.client.inference.operation.details` log record of the `chat` span. The library's own
OTLP/HTTP exporters send both signals to ENDPOINT.

Runs inside the conventions side venv (`rigs.conventions.conventions_venv()`):

    python genai_logs_agent.py CASES.json ENDPOINT

CASES.json is a list of {"question", "answer"}: one agent call with one model call each.
"""

from __future__ import annotations

import json
import os
import sys


def main(cases_file: str, endpoint: str) -> int:
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "EVENT_ONLY"
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.util.genai.handler import TelemetryHandler
    from opentelemetry.util.genai.types import InputMessage, OutputMessage, TextPart

    with open(cases_file, encoding="utf-8") as handle:
        cases = json.load(handle)
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")))
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(
        SimpleLogRecordProcessor(OTLPLogExporter(endpoint=f"{endpoint}/v1/logs")))
    handler = TelemetryHandler(tracer_provider=tracer_provider, logger_provider=logger_provider,
                               instrumentation_scope_name="genai.logs.agent")
    for case in cases:
        with handler.invoke_local_agent(agent_name="geo", request_model="m"), \
                handler.inference("openai", request_model="m") as call:
            call.input_messages = [
                InputMessage(role="system", parts=[TextPart("SYSTEM-PROMPT: answer briefly.")]),
                InputMessage(role="user", parts=[TextPart(case["question"])]),
            ]
            call.output_messages = [OutputMessage(role="assistant",
                                                  parts=[TextPart(case["answer"])],
                                                  finish_reason="stop")]
    logger_provider.shutdown()
    tracer_provider.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
