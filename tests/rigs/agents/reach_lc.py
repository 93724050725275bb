"""Run agent calls through real Python agent frameworks and send their spans to an OTLP endpoint.

Runs inside the side venv of `rigs/python_frameworks.py` (where tracescore is not installed), so it
imports only the framework, its instrumentation and the OpenTelemetry SDK:

    python reach_lc.py FRAMEWORK CASES.json http://HOST:PORT TEE.jsonl

FRAMEWORK is one of `RUNNERS`. CASES.json is a list of {"question", "answer", "system"?,
"tool"?: {"argument", "result"}, "history"?: [{"role", "content"}], "graph"?, "stream"?}: one
agent call
each, answered by the framework's own fake model (a tool round first when "tool" is given). Every
span is exported over OTLP/HTTP to the endpoint and also appended to TEE.jsonl as OTLP JSON lines
(what was sent).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from convention_agent import _exporter

AGENT_NAME = "geo"
Case = dict[str, Any]


def _provider(endpoint: str, tee: str) -> Any:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_exporter(tee)))
    provider.add_span_processor(SimpleSpanProcessor(
        OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=30)))
    return provider


def _langchain_messages(case: Case, *, system_in_messages: bool) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    messages: list[Any] = []
    if case.get("system") and system_in_messages:
        messages.append(SystemMessage(case["system"]))
    for turn in case.get("history", ()):
        kind = HumanMessage if turn["role"] == "user" else AIMessage
        messages.append(kind(turn["content"]))
    messages.append(HumanMessage(case["question"]))
    return messages


def _langchain_agent(case: Case, index: int) -> tuple[Any, list[Any]]:
    """A LangGraph agent over LangChain's fake chat model: `langchain.agents.create_agent`, or
    LangGraph's older `create_react_agent` when the case's "graph" says so; its system prompt
    given to the agent, or (every other case) as a system message in the input."""
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool

    class _FakeModel(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    @tool
    def lookup(city: str) -> str:
        """Look a city up."""
        return str(case["tool"]["result"])

    replies: list[Any] = []
    if case.get("tool"):
        replies.append(AIMessage(content="", tool_calls=[{
            "name": "lookup", "args": {"city": case["tool"]["argument"]}, "id": f"call_{index}"}]))
    replies.append(AIMessage(content=case["answer"]))
    model = _FakeModel(responses=replies)
    system_in_messages = index % 2 == 1
    prompt = None if system_in_messages else case.get("system")
    if case.get("graph") == "react_agent":
        import warnings

        from langgraph.prebuilt import create_react_agent

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated in LangGraph 1 in favour of create_agent
            agent = create_react_agent(model, [lookup], prompt=prompt, name=AGENT_NAME)
    else:
        from langchain.agents import create_agent

        agent = create_agent(model, [lookup], system_prompt=prompt, name=AGENT_NAME)
    return agent, _langchain_messages(case, system_in_messages=system_in_messages)


def run_langchain(endpoint: str, tee: str, cases: list[Case], instrumentation: str) -> None:
    provider = _provider(endpoint, tee)
    if instrumentation == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=provider)
    else:
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=provider)
    for index, case in enumerate(cases):
        agent, messages = _langchain_agent(case, index)
        if case.get("stream"):  # streamed: each node's update as it finishes
            updates = list(agent.stream({"messages": messages}, stream_mode="updates"))
            assert updates
        else:
            result = agent.invoke({"messages": messages})
            assert result["messages"][-1].content == case["answer"]
    provider.shutdown()


def run_crewai(endpoint: str, tee: str, cases: list[Case]) -> None:
    """One crew per case, its agent's backstory the system prompt and a custom `BaseLLM` that
    answers in CrewAI's ReAct text format (a tool round first when the case has one). A case
    with earlier turns is a crew with an earlier task (its question and answer) before it."""
    import os

    os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"
    os.environ["CREWAI_TRACING_ENABLED"] = "false"
    provider = _provider(endpoint, tee)
    from openinference.instrumentation.crewai import CrewAIInstrumentor

    CrewAIInstrumentor().instrument(tracer_provider=provider)
    from crewai import Agent, Crew, Task
    from crewai.llms.base_llm import BaseLLM
    from crewai.tools import tool

    replies: list[str] = []

    class _ScriptedLLM(BaseLLM):
        def call(self, messages: Any, tools: Any = None, callbacks: Any = None,
                 available_functions: Any = None, from_task: Any = None, from_agent: Any = None,
                 response_model: Any = None) -> str:
            return replies.pop(0)

        def supports_function_calling(self) -> bool:
            return False

    current: Case = {}

    @tool("lookup")
    def lookup(city: str) -> str:
        """Look a city up."""
        return str(current["tool"]["result"])

    for case in cases:
        current.clear()
        current.update(case)
        agent = Agent(role=AGENT_NAME, goal="Answer questions about places.",
                      backstory=case.get("system") or "A geographer.",
                      llm=_ScriptedLLM(model="scripted"), tools=[lookup])
        tasks = []
        history = case.get("history", ())
        for earlier, answer in zip(history[::2], history[1::2], strict=True):
            tasks.append(Task(description=earlier["content"], expected_output="an answer",
                              agent=agent))
            replies.append(f"Thought: I know it.\nFinal Answer: {answer['content']}")
        tasks.append(Task(description=case["question"], expected_output="an answer", agent=agent))
        if case.get("tool"):
            arguments = json.dumps({"city": case["tool"]["argument"]})
            replies.append(f"Thought: look it up.\nAction: lookup\nAction Input: {arguments}")
        replies.append(f"Thought: I know it.\nFinal Answer: {case['answer']}")
        result = Crew(agents=[agent], tasks=tasks).kickoff()
        assert result.raw == case["answer"], (result.raw, case["answer"])
        assert not replies
    provider.shutdown()


def run_llama_index(endpoint: str, tee: str, cases: list[Case]) -> None:
    """A `FunctionAgent` per case over LlamaIndex's `MockFunctionCallingLLM`, which calls the
    tool first when the case has one; system prompt and earlier turns given to the agent."""
    import asyncio

    provider = _provider(endpoint, tee)
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    LlamaIndexInstrumentor().instrument(tracer_provider=provider)
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ToolCallBlock
    from llama_index.core.llms import ChatMessage, MessageRole
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.tools import FunctionTool

    current: Case = {}

    def lookup(city: str) -> str:
        """Look a city up."""
        return str(current["tool"]["result"])

    def reply(messages: Sequence[Any], **kwargs: Any) -> Any:
        if current.get("tool") and not any(m.role == MessageRole.TOOL for m in messages):
            return ChatMessage(role=MessageRole.ASSISTANT, blocks=[ToolCallBlock(
                tool_call_id="call_1", tool_name="lookup",
                tool_kwargs={"city": current["tool"]["argument"]})])
        return ChatMessage(role=MessageRole.ASSISTANT, content=current["answer"])

    for case in cases:
        current.clear()
        current.update(case)
        agent = FunctionAgent(
            name=AGENT_NAME, description="Answers questions about places.",
            tools=[FunctionTool.from_defaults(lookup)], system_prompt=case.get("system"),
            llm=MockFunctionCallingLLM(response_generator=reply, is_chat_model=True))
        history = [ChatMessage(role=t["role"], content=t["content"])
                   for t in case.get("history", ())]

        async def run(agent: Any = agent, history: list[Any] = history) -> Any:
            return await agent.run(user_msg=current["question"], chat_history=history)

        result = asyncio.run(run())
        assert str(result) == case["answer"], (str(result), case["answer"])
    provider.shutdown()


RUNNERS: dict[str, Callable[[str, str, list[Case]], None]] = {
    "crewai": run_crewai,
    "llama_index": run_llama_index,
    "langchain_openinference": lambda e, t, c: run_langchain(e, t, c, "openinference"),
    "langchain_openllmetry": lambda e, t, c: run_langchain(e, t, c, "openllmetry"),
}


def main(argv: Sequence[str]) -> int:
    framework, cases_file, endpoint, tee = argv
    with open(cases_file, encoding="utf-8") as handle:
        cases = json.load(handle)
    RUNNERS[framework](endpoint, tee, cases)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
