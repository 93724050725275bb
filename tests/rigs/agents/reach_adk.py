"""Run Google ADK and Strands Agents agents with a scripted model; their own telemetry exports the spans.

Runs inside the side venv `rigs.side_envs.adk_strands_venv()` (where tracescore is not installed):

    python reach_adk.py FRAMEWORK CASES.json ENDPOINT TEE.jsonl

FRAMEWORK is `adk` or `strands`; the telemetry options are the environment's (the test sets the
variables a user would). ENDPOINT is `grpc://host:port` or `http://host:port` (OTLP); every span
is also appended to TEE.jsonl as OTLP JSON lines. CASES.json is a list of {"question", "answer",
"session", "system" (optional), "tool": {"argument", "result"} (optional)}: one agent call each,
in order; the calls of one session are the turns of one conversation (an ADK session, one Strands
agent called again), its agent instructed with the `system` of its first case. The scripted model
first calls the `lookup` tool when the case has one, then answers the case's answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Any

from convention_agent import _exporter  # the sibling script's OTLP JSON lines exporter

Case = dict[str, Any]
AGENT_NAME = "geo"


def _provider(endpoint: str, tee: str) -> Any:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    protocol, _, address = endpoint.partition("://")
    exporter: Any
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        exporter = OTLPSpanExporter(endpoint=address, insecure=True)
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HTTPSpanExporter,
        )
        exporter = HTTPSpanExporter(endpoint=f"http://{address}/v1/traces")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_exporter(tee)))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider


def _sessions(cases: list[Case]) -> dict[str, str | None]:
    """Each session's system prompt (its first case's), in order of first use."""
    sessions: dict[str, str | None] = {}
    for case in cases:
        sessions.setdefault(case["session"], case.get("system"))
    return sessions


def run_adk(cases: list[Case]) -> None:
    from google.adk.agents import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    current: Case = {}

    class ScriptedModel(BaseLlm):
        model: str = "scripted"

        async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False
                                         ) -> AsyncGenerator[LlmResponse, None]:
            last = llm_request.contents[-1]
            tool = current.get("tool")
            if tool and not any(part.function_response for part in last.parts or ()):
                part = types.Part(function_call=types.FunctionCall(
                    name="lookup", args={"city": tool["argument"]}))
            else:
                part = types.Part(text=current["answer"])
            yield LlmResponse(content=types.Content(role="model", parts=[part]))

    def lookup(city: str) -> str:
        """Look a city up."""
        return str(current["tool"]["result"])

    async def run() -> None:
        runners: dict[str, tuple[Any, str]] = {}
        for session, system in _sessions(cases).items():
            agent = LlmAgent(name=AGENT_NAME, model=ScriptedModel(), instruction=system or "",
                             tools=[lookup])
            runner = InMemoryRunner(agent=agent, app_name="reach")
            created = await runner.session_service.create_session(app_name="reach", user_id="u")
            runners[session] = (runner, created.id)
        for case in cases:
            current.clear()
            current.update(case)
            runner, session_id = runners[case["session"]]
            message = types.Content(role="user", parts=[types.Part(text=case["question"])])
            async for _ in runner.run_async(user_id="u", session_id=session_id,
                                            new_message=message):
                pass

    asyncio.run(run())


def run_strands(cases: list[Case]) -> None:
    from strands import Agent, tool
    from strands.models.model import Model

    current: Case = {}

    class ScriptedModel(Model):
        def __init__(self) -> None:
            self.config: dict[str, Any] = {"model_id": "scripted"}

        def update_config(self, **model_config: Any) -> None:
            self.config.update(model_config)

        def get_config(self) -> Any:
            return self.config

        def structured_output(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

        async def stream(self, messages: Any, tool_specs: Any = None, system_prompt: Any = None,
                         **kwargs: Any) -> AsyncIterator[Any]:
            tool_ = current.get("tool")
            returned = any("toolResult" in block for block in messages[-1]["content"])
            yield {"messageStart": {"role": "assistant"}}
            if tool_ and not returned:
                yield {"contentBlockStart": {"start": {"toolUse": {
                    "name": "lookup", "toolUseId": f"call-{current['index']}"}}}}
                yield {"contentBlockDelta": {"delta": {"toolUse": {
                    "input": json.dumps({"city": tool_["argument"]})}}}}
                yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "tool_use"}}
            else:
                yield {"contentBlockDelta": {"delta": {"text": current["answer"]}}}
                yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "end_turn"}}

    @tool
    def lookup(city: str) -> str:
        """Look a city up."""
        return str(current["tool"]["result"])

    agents = {session: Agent(name=AGENT_NAME, model=ScriptedModel(), system_prompt=system,
                             tools=[lookup], callback_handler=None)
              for session, system in _sessions(cases).items()}
    for index, case in enumerate(cases):
        current.clear()
        current.update(case, index=index)
        agents[case["session"]](case["question"])


RUNNERS: dict[str, Callable[[list[Case]], None]] = {"adk": run_adk, "strands": run_strands}


def main(argv: Sequence[str]) -> int:
    framework, cases_file, endpoint, tee = argv
    with open(cases_file, encoding="utf-8") as handle:
        cases = json.load(handle)
    provider = _provider(endpoint, tee)
    logs = _log_provider(endpoint) if os.environ.get("REACH_EXPORT_LOGS") == "1" else None
    try:
        RUNNERS[framework](cases)
    finally:
        if logs is not None:
            logs.shutdown()
        provider.shutdown()
    return 0


def _log_provider(endpoint: str) -> Any:
    """The global LoggerProvider, its records exported to `endpoint` as they are emitted (for
    frameworks that log their content: `REACH_EXPORT_LOGS=1`)."""
    from opentelemetry._logs import set_logger_provider
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

    protocol, _, address = endpoint.partition("://")
    exporter: Any
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        exporter = OTLPLogExporter(endpoint=address, insecure=True)
    else:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import (
            OTLPLogExporter as HTTPLogExporter,
        )
        exporter = HTTPLogExporter(endpoint=f"http://{address}/v1/logs")
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    set_logger_provider(provider)
    return provider


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
