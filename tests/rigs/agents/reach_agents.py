"""Run OpenAI Agents SDK agents under a real instrumentation and export their spans over OTLP.

Runs inside its own side venv (`REQUIREMENTS`; tracescore is not installed there), so it imports
only the Agents SDK, the instrumentation and the OpenTelemetry SDK:

    python reach_agents.py INSTRUMENTATION CASES.json MODEL_URL OTLP_URL TEE.jsonl

INSTRUMENTATION is "openinference" (`openinference-instrumentation-openai-agents`) or "logfire"
(`logfire.instrument_openai_agents()`, sending nothing to logfire's cloud). The agent's model is
`OpenAIChatCompletionsModel` on an `AsyncOpenAI` client at MODEL_URL (a chat-completions stub);
the agent has one tool, `lookup`. CASES.json is a list of {"question", "system"?, "history"?}:
one `Runner.run` each, with the case's system prompt as the agent's instructions and its earlier
turns before the question. Spans go to OTLP_URL over OTLP/HTTP and, as OTLP JSON lines, to TEE.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

# the side venv: the libraries, and the OpenTelemetry packages they resolve with
REQUIREMENTS: tuple[str, ...] = (
    "openai-agents==0.24.0",
    "openai==3.60.0",
    "openinference-instrumentation-openai-agents==2.6.0",
    "openinference-instrumentation==0.1.72",
    "logfire==5.4.0",
    "opentelemetry-api==1.45.2",
    "opentelemetry-sdk==1.45.2",
    "opentelemetry-exporter-otlp-proto-http==1.45.2",
)
INSTRUMENTATIONS = ("openinference", "logfire")
AGENT_NAME = "geo"

Case = dict[str, Any]


def _instrument(instrumentation: str, otlp_url: str, tee: str) -> Callable[[], None]:
    """Send the Agents SDK's spans through `instrumentation` to OTLP/HTTP and the tee; returns
    the function that flushes and shuts the export down."""
    from convention_agent import _exporter  # the sibling script: OTLP JSON lines
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    processors = [BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{otlp_url}/v1/traces")),
                  SimpleSpanProcessor(_exporter(tee))]
    if instrumentation == "openinference":
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
        from opentelemetry.sdk.trace import TracerProvider

        provider = TracerProvider()
        for processor in processors:
            provider.add_span_processor(processor)
        # exclusive (the default): replaces the SDK's own exporter to OpenAI's backend
        OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
        return provider.shutdown
    import agents
    import logfire

    agents.set_trace_processors([])  # nothing to OpenAI's backend; logfire wraps the provider
    logfire.configure(send_to_logfire=False, console=False, metrics=False,
                      service_name="reach-agents", additional_span_processors=processors)
    logfire.instrument_openai_agents()
    return logfire.shutdown


def run(instrumentation: str, cases: list[Case], model_url: str, otlp_url: str,
        tee: str) -> None:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
    from openai import AsyncOpenAI

    finish = _instrument(instrumentation, otlp_url, tee)
    current: Case = {}

    @function_tool
    def lookup(topic: str) -> str:
        """Look up facts about a topic."""
        return str(current["tool"]["result"])

    model = OpenAIChatCompletionsModel(model="agent-model", openai_client=AsyncOpenAI(
        base_url=model_url, api_key="sk-test", max_retries=0))
    previous: list[Any] = []
    for case in cases:
        current.clear()
        current.update(case)
        agent = Agent(name=AGENT_NAME, instructions=case.get("system"), model=model,
                      tools=[lookup])
        question = {"role": "user", "content": case["question"]}
        if case.get("continue"):  # the previous run's items (tool rounds included), then this
            items: Any = [*previous, question]
        elif case.get("history"):
            items = [*case["history"], question]
        else:
            items = case["question"]
        result = Runner.run_sync(agent, items)
        if result.final_output != case["answer"]:
            raise AssertionError(f"agent answered {result.final_output!r}, not {case['answer']!r}")
        previous = result.to_input_list()
    finish()


def main(argv: Sequence[str]) -> int:
    instrumentation, cases_file, model_url, otlp_url, tee = argv
    if instrumentation not in INSTRUMENTATIONS:
        raise SystemExit(f"unknown instrumentation {instrumentation!r}")
    with open(cases_file, encoding="utf-8") as handle:
        cases = json.load(handle)
    run(instrumentation, cases, model_url, otlp_url, tee)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
