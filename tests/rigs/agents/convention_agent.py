"""Run one agent call through a real instrumentation library and write its spans as OTLP JSON lines.

Runs inside the side venv of `rigs/conventions.py` (where tracescore is not installed), so it imports
only the instrumentation library and the OpenTelemetry SDK:

    python convention_agent.py CONVENTION CASES.json OUT.jsonl

CASES.json is a list of {"question", "answer", "ground_truth" (optional)}: one agent call each.

Every convention exports, besides the agent span, spans that are not agent calls (a tool, a task,
a model request) so the recognisers' rejections are checked on real spans too. The ground truth,
when given, is set as the `tracescore.ground_truth` attribute on the agent span, the way a user
of that library would (`trace.get_current_span().set_attribute(...)` inside the agent).
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

GROUND_TRUTH_KEY = "tracescore.ground_truth"  # = tracescore._semconv.TS_GROUND_TRUTH
AGENT_NAME = "geo"


def _exporter(out: str) -> Any:
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class JsonLinesExporter(SpanExporter):
        """The Collector file exporter's format: one ExportTraceServiceRequest as JSON per line."""

        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            request = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
            for resource_spans in request.get("resourceSpans", ()):
                for scope_spans in resource_spans.get("scopeSpans", ()):
                    for span in scope_spans.get("spans", ()):
                        for key in ("traceId", "spanId", "parentSpanId"):  # OTLP/JSON: hex ids
                            if span.get(key):
                                span[key] = base64.b64decode(span[key]).hex()
            with open(out, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(request, separators=(",", ":")) + "\n")
            return SpanExportResult.SUCCESS

    return JsonLinesExporter()


def _provider(out: str) -> Any:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_exporter(out)))
    return provider


Case = dict[str, Any]  # {"question", "answer", "ground_truth"?, "session"?: a conversation}


def _mark_ground_truth(case: Case) -> None:
    truth = case.get("ground_truth")
    if truth is not None:
        from opentelemetry import trace

        trace.get_current_span().set_attribute(GROUND_TRUTH_KEY, truth)


def _switch(current: Case, case: Case) -> None:
    current.clear()
    current.update(case)


def run_openinference(out: str, cases: list[Case]) -> None:
    from openinference.instrumentation import OITracer, TraceConfig

    provider = _provider(out)
    tracer = OITracer(provider.get_tracer("convention.openinference"), config=TraceConfig())
    current: Case = {}

    @tracer.tool
    def lookup(city: str) -> str:
        return str(current["answer"])

    @tracer.agent(name=AGENT_NAME)
    def geo(question: str) -> str:
        _mark_ground_truth(current)
        return lookup(question)

    for case in cases:
        _switch(current, case)
        if "session" in case:  # a turn of a conversation: OpenInference's session context
            from openinference.instrumentation import using_session

            with using_session(case["session"]):
                geo(case["question"])
        else:
            geo(case["question"])
    provider.shutdown()


def run_traceloop(out: str, cases: list[Case]) -> None:
    from opentelemetry import trace
    from traceloop.sdk import Traceloop
    from traceloop.sdk.decorators import agent, task, workflow

    Traceloop.init(app_name="conventions", exporter=_exporter(out), disable_batch=True,
                   telemetry_enabled=False, should_enrich_metrics=False)
    current: Case = {}

    @task(name="lookup")
    def lookup(city: str) -> str:
        return str(current["answer"])

    @agent(name=AGENT_NAME)
    def geo(question: str) -> str:
        _mark_ground_truth(current)
        return lookup(question)

    @workflow(name="trip")
    def trip(question: str) -> str:
        return geo(question)

    for case in cases:
        _switch(current, case)
        if "session" in case:  # a turn of a conversation: OpenLLMetry's association property
            from traceloop.sdk.associations import AssociationProperty, Associations

            Associations.set([(AssociationProperty.SESSION_ID, case["session"])])
        trip(case["question"])
    trace.get_tracer_provider().shutdown()  # type: ignore[attr-defined]


def run_traceloop_tools(out: str, cases: list[Case]) -> None:
    """OpenLLMetry's `@tool` spans inside an `@agent`: a tool returning the case's text (called
    with a positional and a keyword argument) and one returning a structured value."""
    from opentelemetry import trace
    from traceloop.sdk import Traceloop
    from traceloop.sdk.decorators import agent, tool

    Traceloop.init(app_name="conventions", exporter=_exporter(out), disable_batch=True,
                   telemetry_enabled=False, should_enrich_metrics=False)
    current: Case = {}

    @tool(name="lookup")
    def lookup(city: str, units: str = "C") -> str:
        return str(current["tool_result"])

    @tool(name="forecast")
    def forecast(city: str) -> dict[str, str]:
        return {"city": city, "sky": "clear"}

    @agent(name=AGENT_NAME)
    def geo(question: str) -> str:
        lookup(question, units="F")
        forecast("Paris")
        return str(current["answer"])

    for case in cases:
        _switch(current, case)
        geo(case["question"])
    trace.get_tracer_provider().shutdown()  # type: ignore[attr-defined]


def run_pydantic_ai(out: str, cases: list[Case], version: int = 5,
                    history: bool = False) -> None:
    """pydantic-ai's own instrumentation (what logfire turns on); the ground truth goes into
    the run's metadata, which pydantic-ai records on the agent run span. With `history`, each
    run continues an earlier exchange (`message_history`)."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    provider = _provider(out)
    current: Case = {}

    def reply(messages: list[Any], info: Any) -> ModelResponse:
        return ModelResponse(parts=[TextPart(str(current["answer"]))])

    geo = Agent(FunctionModel(reply), name=AGENT_NAME)
    geo.instrument = InstrumentationSettings(tracer_provider=provider, version=version)
    for case in cases:
        _switch(current, case)
        truth = case.get("ground_truth")
        earlier = [ModelRequest.user_text_prompt("Earlier question"),
                   ModelResponse(parts=[TextPart("Earlier answer")])] if history else None
        geo.run_sync(case["question"], message_history=earlier,
                     metadata={GROUND_TRUTH_KEY: truth} if truth is not None else None)
    provider.shutdown()


def run_pydantic_ai_tools(out: str, cases: list[Case]) -> None:
    """pydantic-ai agents that call a tool `rounds` times (0 to 3) before answering, run with
    `run_sync` or streamed (`run_stream`, the answer in pieces), with a system prompt and the
    case's earlier turns (`history`: user/assistant texts) as message history."""
    import asyncio

    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import DeltaToolCall, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    provider = _provider(out)
    current: Case = {}

    def done_rounds(messages: list[Any]) -> int:
        return sum(isinstance(part, ToolReturnPart) for m in messages for part in m.parts)

    def reply(messages: list[Any], info: Any) -> ModelResponse:
        n = done_rounds(messages)
        if n < current.get("rounds", 0):
            return ModelResponse(parts=[ToolCallPart("lookup", {"round": n},
                                                     tool_call_id=f"call_{n}")])
        return ModelResponse(parts=[TextPart(str(current["answer"]))])

    async def stream(messages: list[Any], info: Any) -> Any:
        n = done_rounds(messages)
        if n < current.get("rounds", 0):
            yield {0: DeltaToolCall(name="lookup", json_args=json.dumps({"round": n}),
                                    tool_call_id=f"call_{n}")}
            return
        answer = str(current["answer"])
        for start in range(0, len(answer), 3):
            yield answer[start:start + 3]

    geo = Agent(FunctionModel(reply, stream_function=stream), name=AGENT_NAME,
                system_prompt="SYSTEM-PROMPT: answer in one sentence.")
    geo.instrument = InstrumentationSettings(tracer_provider=provider, version=5)

    @geo.tool_plain
    def lookup(round: int) -> str:
        return f"TOOL-RESULT {round}: {current['tool_result']}"

    async def streamed(question: str, history: Any) -> str:
        async with geo.run_stream(question, message_history=history) as result:
            return str(await result.get_output())

    for case in cases:
        _switch(current, case)
        history = [message for turn in case.get("history", ()) for message in (
            ModelRequest.user_text_prompt(turn["user"]),
            ModelResponse(parts=[TextPart(turn["assistant"])]))] or None
        if case.get("stream"):
            output = asyncio.run(streamed(case["question"], history))
        else:
            output = str(geo.run_sync(case["question"], message_history=history).output)
        assert output == case["answer"], (output, case["answer"])
    provider.shutdown()


def run_genai(out: str, cases: list[Case]) -> None:
    """OpenTelemetry's own GenAI semconv helper (opentelemetry-util-genai), content capture on."""
    import os

    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
    from opentelemetry.util.genai.handler import TelemetryHandler
    from opentelemetry.util.genai.types import InputMessage, OutputMessage, TextPart

    provider = _provider(out)
    handler = TelemetryHandler(tracer_provider=provider,
                               instrumentation_scope_name="convention.genai")
    for case in cases:
        with handler.invoke_local_agent(agent_name=AGENT_NAME, request_model="m") as invocation:
            invocation.input_messages = [
                InputMessage(role="user", parts=[TextPart(case["question"])])
            ]
            _mark_ground_truth(case)
            with handler.tool(name="lookup"):
                pass
            invocation.output_messages = [
                OutputMessage(role="assistant", parts=[TextPart(case["answer"])],
                              finish_reason="stop")
            ]
    provider.shutdown()


def run_genai_workflow(out: str, cases: list[Case]) -> None:
    """OpenTelemetry's GenAI helper: a workflow (`invoke_workflow trip`) around an agent call
    (`invoke_agent geo`, with a tool), both recording the case's question and answer."""
    import os

    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
    from opentelemetry.util.genai.handler import TelemetryHandler
    from opentelemetry.util.genai.types import InputMessage, OutputMessage, TextPart

    provider = _provider(out)
    handler = TelemetryHandler(tracer_provider=provider,
                               instrumentation_scope_name="convention.genai")
    for case in cases:
        question = [InputMessage(role="user", parts=[TextPart(case["question"])])]
        answer = [OutputMessage(role="assistant", parts=[TextPart(case["answer"])],
                                finish_reason="stop")]
        with handler.workflow(name="trip") as workflow:
            workflow.input_messages = question
            with handler.invoke_local_agent(agent_name=AGENT_NAME, request_model="m") as agent:
                agent.input_messages = question
                with handler.tool(name="lookup"):
                    pass
                agent.output_messages = answer
            workflow.output_messages = answer
    provider.shutdown()


RUNNERS: dict[str, Callable[[str, list[Case]], None]] = {
    "genai": run_genai,
    "openinference": run_openinference,
    "traceloop": run_traceloop,
    "pydantic_ai": run_pydantic_ai,
    "pydantic_ai_v2": lambda out, cases: run_pydantic_ai(out, cases, version=2),  # `agent run`
    "pydantic_ai_history": lambda out, cases: run_pydantic_ai(out, cases, history=True),
    "pydantic_ai_tools": run_pydantic_ai_tools,  # tool rounds, streaming, earlier turns
    "genai_workflow": run_genai_workflow,  # invoke_workflow around invoke_agent
    "traceloop_tools": run_traceloop_tools,  # OpenLLMetry @tool spans
}


def main(argv: Sequence[str]) -> int:
    convention, cases_file, out = argv
    with open(cases_file, encoding="utf-8") as handle:
        cases = json.load(handle)
    RUNNERS[convention](out, cases)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
