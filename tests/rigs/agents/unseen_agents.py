"""Run agent calls through real libraries the project was never written for, exporting their own
OpenTelemetry spans to an OTLP endpoint.

Runs inside the side venv of `rigs/unseen.py` (where tracescore is not installed), so it imports
only the library, its tracing and the OpenTelemetry SDK:

    python unseen_agents.py FRAMEWORK CASES.json http://HOST:PORT TEE.jsonl

FRAMEWORK is one of `RUNNERS`. CASES.json is a list of {"question", "answer", "system"?,
"tool"?: {"argument", "result", "fails"?}}: one agent call each, answered by a scripted model (a
tool round first when "tool" is given; a tool that "fails" raises its result as its error). Every span goes to the endpoint over OTLP/HTTP and is appended to
TEE.jsonl as OTLP JSON lines (what was sent). The libraries record content their own way:

- `smolagents`: smolagents' ToolCallingAgent with OpenInference's smolagents instrumentation (the
  agent span's input is the JSON of `run`'s keyword arguments);
- `haystack`: Haystack's Agent with its own OpenTelemetry tracer, content tracing on (no GenAI
  attribute at all; content under `haystack.agent.input` / `.output` as serialised messages);
- `haystack-pipeline`: the same Agent as one component of a Pipeline (a prompt builder writes the
  user message), answering in one model turn (cases without "tool");
- `mlflow`: functions traced by MLflow's `@mlflow.trace` exported over OTLP (span type and
  content JSON-encoded under `mlflow.spanType`, `mlflow.spanInputs`, `mlflow.spanOutputs`);
- `autogen`: AutoGen AgentChat's AssistantAgent with a FunctionTool, its model autogen-ext's
  ReplayChatCompletionClient, traced by AutoGen's own OpenTelemetry spans on the global tracer
  provider (`invoke_agent geo`, `execute_tool lookup`: names and ids, no content);
- `autogen-openai`: the same agent on autogen-ext's OpenAIChatCompletionClient, its model the
  OpenAI-compatible server at `$UNSEEN_MODEL_URL`, the client traced by OpenTelemetry's OpenAI
  instrumentation (opentelemetry-instrumentation-openai-v2) with content capture on: its `chat`
  spans below `invoke_agent geo` carry the messages.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

from convention_agent import _exporter
from reach_lc import _provider  # the SDK provider: the tee and OTLP/HTTP to the endpoint

AGENT_NAME = "geo"
Case = dict[str, Any]


def _lookup_result(case: Case) -> str:
    """The tool's return: the case's result, raised as the error when the tool "fails"."""
    tool = case.get("tool") or {}
    if tool.get("fails"):
        raise RuntimeError(str(tool["result"]))
    return str(tool.get("result", ""))


def run_smolagents(cases: list[Case], endpoint: str, tee: str) -> None:
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor

    provider = _provider(endpoint, tee)
    SmolagentsInstrumentor().instrument(tracer_provider=provider)
    from smolagents import ToolCallingAgent, tool
    from smolagents.models import (
        ChatMessage,
        ChatMessageToolCall,
        ChatMessageToolCallFunction,
        MessageRole,
        Model,
    )

    for case in cases:
        @tool
        def lookup(place: str) -> str:
            """Look a place up.

            Args:
                place: the place
            """
            return _lookup_result(case)  # noqa: B023 - called within this iteration

        class Scripted(Model):
            """The tool round when the case has one, then the final answer."""

            def __init__(self, case: Case) -> None:
                super().__init__(model_id="scripted")
                self.rounds: list[tuple[str, dict[str, Any]]] = [
                    ("lookup", {"place": case["tool"]["argument"]})] if case.get("tool") else []
                self.rounds.append(("final_answer", {"answer": case["answer"]}))

            def generate(self, messages: Any, stop_sequences: Any = None,
                         response_format: Any = None, tools_to_call_from: Any = None,
                         **kwargs: Any) -> Any:
                name, arguments = self.rounds.pop(0)
                call = ChatMessageToolCall(function=ChatMessageToolCallFunction(
                    name=name, arguments=arguments), id=f"call-{name}", type="function")
                return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])

        agent = ToolCallingAgent(tools=[lookup], model=Scripted(case), name=AGENT_NAME,
                                 max_steps=4, verbosity_level=0,
                                 instructions=case.get("system"))
        agent.run(case["question"])
    provider.shutdown()


def run_haystack(cases: list[Case], endpoint: str, tee: str) -> None:
    os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"
    from haystack import component, tracing
    from haystack.components.agents import Agent
    from haystack.dataclasses import ChatMessage, ToolCall
    from haystack.tools import Tool
    from haystack_integrations.tracing.opentelemetry import OpenTelemetryTracer

    provider = _provider(endpoint, tee)
    tracing.enable_tracing(OpenTelemetryTracer(provider.get_tracer("haystack")))
    tracing.tracer.is_content_tracing_enabled = True  # HAYSTACK_CONTENT_TRACING_ENABLED

    for case in cases:
        @component
        class Scripted:
            """The tool round when the case has one, then the final answer."""

            def __init__(self) -> None:
                self.rounds = 1 if case.get("tool") else 0  # noqa: B023

            @component.output_types(replies=list[ChatMessage])
            def run(self, messages: list[ChatMessage], tools: Any = None,
                    **kwargs: Any) -> dict[str, Any]:
                if self.rounds:
                    self.rounds -= 1
                    call = ToolCall(tool_name="lookup",
                                    arguments={"place": case["tool"]["argument"]})  # noqa: B023
                    return {"replies": [ChatMessage.from_assistant(tool_calls=[call])]}
                return {"replies": [ChatMessage.from_assistant(case["answer"])]}  # noqa: B023

        lookup = Tool(name="lookup", description="Look a place up.",
                      parameters={"type": "object", "properties": {"place": {"type": "string"}},
                                  "required": ["place"]},
                      function=lambda place: _lookup_result(case))  # noqa: B023
        agent = Agent(chat_generator=Scripted(), tools=[lookup],
                      system_prompt=case.get("system"))
        agent.warm_up()
        agent.run(messages=[ChatMessage.from_user(case["question"])])
    provider.shutdown()


def run_haystack_pipeline(cases: list[Case], endpoint: str, tee: str) -> None:
    os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"
    from haystack import Pipeline, component, tracing
    from haystack.components.agents import Agent
    from haystack.components.builders import ChatPromptBuilder
    from haystack.dataclasses import ChatMessage
    from haystack_integrations.tracing.opentelemetry import OpenTelemetryTracer

    provider = _provider(endpoint, tee)
    tracing.enable_tracing(OpenTelemetryTracer(provider.get_tracer("haystack")))
    tracing.tracer.is_content_tracing_enabled = True

    for case in cases:
        @component
        class Scripted:
            """The final answer in one turn."""

            @component.output_types(replies=list[ChatMessage])
            def run(self, messages: list[ChatMessage], tools: Any = None,
                    **kwargs: Any) -> dict[str, Any]:
                return {"replies": [ChatMessage.from_assistant(case["answer"])]}  # noqa: B023

        pipeline = Pipeline()
        pipeline.add_component("prompt", ChatPromptBuilder(
            template=[ChatMessage.from_user("{{ question }}")], required_variables=["question"]))
        pipeline.add_component("agent", Agent(chat_generator=Scripted(),
                                              system_prompt=case.get("system")))
        pipeline.connect("prompt.prompt", "agent.messages")
        pipeline.run({"prompt": {"question": case["question"]}})
    provider.shutdown()


def run_mlflow(cases: list[Case], endpoint: str, tee: str) -> None:
    """MLflow exports through its own tracer provider; the tee is a second exporter on it."""
    os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"{endpoint}/v1/traces"
    os.environ["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/protobuf"
    os.environ.setdefault("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # never reached
    import mlflow
    from mlflow.entities import SpanType
    from mlflow.tracing.provider import provider as mlflow_provider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    mlflow_provider.get_or_init_tracer(__name__)  # MLflow's own provider, built as on first use
    mlflow_provider.get().add_span_processor(SimpleSpanProcessor(_exporter(tee)))
    for case in cases:
        @mlflow.trace(span_type=SpanType.CHAT_MODEL, name="chat")
        def model(messages: list[dict[str, str]], tools: list[str]) -> dict[str, Any]:
            if case.get("tool") and not any(m["role"] == "tool" for m in messages):  # noqa: B023
                return {"tool_calls": [{"name": "lookup", "arguments": {
                    "place": case["tool"]["argument"]}}]}  # noqa: B023
            return {"choices": [{"message": {"role": "assistant",
                                             "content": case["answer"]}}]}  # noqa: B023

        @mlflow.trace(span_type=SpanType.TOOL, name="lookup")
        def lookup(place: str) -> str:
            return _lookup_result(case)  # noqa: B023

        @mlflow.trace(span_type=SpanType.AGENT, name=AGENT_NAME)
        def geo(question: str) -> str:
            system = case.get("system")  # noqa: B023
            messages = [{"role": "system", "content": system}] if system else []
            messages.append({"role": "user", "content": question})
            while "choices" not in (reply := model(messages, ["lookup"])):
                for call in reply["tool_calls"]:
                    messages.append({"role": "tool", "content": lookup(**call["arguments"])})
            return str(reply["choices"][0]["message"]["content"])

        geo(case["question"])
    mlflow_provider.get().shutdown()


def _autogen_agent(case: Case, model_client: Any) -> Any:
    """AutoGen's AssistantAgent named `AGENT_NAME` with the `lookup` FunctionTool."""
    from autogen_agentchat.agents import AssistantAgent
    from autogen_core.tools import FunctionTool

    async def lookup(place: str) -> str:
        """Look a place up."""
        return _lookup_result(case)

    return AssistantAgent(
        AGENT_NAME, model_client=model_client,
        tools=[FunctionTool(lookup, description="Look a place up.")],
        system_message=case.get("system") or "You are a helpful assistant.",
        reflect_on_tool_use=True)


def run_autogen(cases: list[Case], endpoint: str, tee: str) -> None:
    """AutoGen's spans go to the global tracer provider (it takes no provider of its own when an
    agent runs outside a runtime)."""
    import asyncio

    from autogen_core import FunctionCall
    from autogen_core.models import CreateResult, RequestUsage
    from autogen_ext.models.replay import ReplayChatCompletionClient
    from opentelemetry import trace

    provider = _provider(endpoint, tee)
    trace.set_tracer_provider(provider)
    usage = RequestUsage(prompt_tokens=1, completion_tokens=1)

    async def run(case: Case) -> None:
        replies: list[str | CreateResult] = []
        if case.get("tool"):
            call = FunctionCall(id="call-lookup", name="lookup",
                                arguments=json.dumps({"place": case["tool"]["argument"]}))
            replies.append(CreateResult(finish_reason="function_calls", content=[call],
                                        usage=usage, cached=False))
        replies.append(CreateResult(finish_reason="stop", content=case["answer"], usage=usage,
                                    cached=False))
        client = ReplayChatCompletionClient(replies, model_info={
            "vision": False, "function_calling": True, "json_output": False,
            "family": "unknown", "structured_output": False})
        await _autogen_agent(case, client).run(task=case["question"])

    for case in cases:
        asyncio.run(run(case))
    provider.shutdown()


def run_autogen_openai(cases: list[Case], endpoint: str, tee: str) -> None:
    """The model calls traced by the OpenAI instrumentation, content capture on."""
    import asyncio

    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
    from autogen_ext.models.openai import OpenAIChatCompletionClient
    from opentelemetry import trace
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    provider = _provider(endpoint, tee)
    trace.set_tracer_provider(provider)
    OpenAIInstrumentor().instrument(tracer_provider=provider)

    async def run(case: Case) -> None:
        client = OpenAIChatCompletionClient(
            model="gpt-4o-mini", base_url=os.environ["UNSEEN_MODEL_URL"], api_key="sk-test",
            max_retries=0)
        await _autogen_agent(case, client).run(task=case["question"])
        await client.close()

    for case in cases:
        asyncio.run(run(case))
    provider.shutdown()


RUNNERS: dict[str, Callable[[list[Case], str, str], None]] = {
    "smolagents": run_smolagents,
    "haystack": run_haystack,
    "haystack-pipeline": run_haystack_pipeline,
    "mlflow": run_mlflow,
    "autogen": run_autogen,
    "autogen-openai": run_autogen_openai,
}


def main(argv: list[str]) -> int:
    framework, cases_path, endpoint, tee = argv[1:5]
    with open(cases_path, encoding="utf-8") as handle:
        cases = json.load(handle)
    RUNNERS[framework](cases, endpoint, tee)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
