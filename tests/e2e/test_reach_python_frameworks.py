"""Python agent frameworks' own spans, sent by the real libraries to `tracescore serve`, come out
scored with the right question and answer; every other span passes through unchanged.

LangChain / LangGraph agents (`langchain.agents.create_agent` and LangGraph's `create_react_agent`
on LangChain's fake chat model, with a tool round, a system prompt and earlier turns, invoked or
streamed; under OpenInference's and OpenLLMetry's instrumentations), CrewAI crews and LlamaIndex
agents (OpenInference) run in one cached side venv (`rigs/python_frameworks.py`),
export over OTLP/HTTP to a real gateway process, which forwards to the project's OTLP receiver
and judges relevancy through litellm at the stub judge. The judge's
requests show what was judged (`test_reach_node`'s checks): the question block is the user's last
question (no system prompt, no tool return, no earlier turn), the statements the final answer.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from _reach import gateway_fixtures, judged_pairs, unreadable_counts
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context
from rigs.python_frameworks import RUNNER, python_frameworks_venv
from test_reach_node import assert_scored, generated_cases

import tracescore
from tracescore import _semconv as sc
from tracescore.online.intake._tool_results import tool_result
from tracescore.online.intake._tool_spans import tool_of
from tracescore.testing import GatewayProcess, OTLPReceiver, ReceivedSpan, StubLLMServer
from tracescore.testing._decode import spans_from_otlp_json

pytestmark = pytest.mark.slow  # installs the frameworks in a side venv on first use (minutes)

_GRAPHS = ("create_agent", "react_agent")


def langgraph_cases(seed: int, count: int) -> list[dict[str, Any]]:
    """`test_reach_node`'s generated cases (system prompts, tool rounds, earlier turns, answers
    that are JSON text), alternating between the two ways of building the agent; every third
    run streamed."""
    cases = generated_cases(seed, count)
    for index, case in enumerate(cases):
        case["graph"] = _GRAPHS[index % len(_GRAPHS)]
        case["stream"] = index % 3 == 1
    return cases


@pytest.fixture(scope="module")
def venv_python() -> Path:
    return python_frameworks_venv() / "bin" / "python"


receiver, stub, gateway = gateway_fixtures()


def run_through_gateway(framework: str, cases: list[dict[str, Any]], venv_python: Path,
                        gateway: GatewayProcess, receiver: OTLPReceiver, stub: StubLLMServer
                        ) -> tuple[list[ReceivedSpan], list[ReceivedSpan]]:
    """Run the cases through the real framework, exporting to the gateway; (sent, received)."""
    receiver.clear()
    stub.clear()
    with tempfile.TemporaryDirectory(prefix="tracescore-reach-") as tmp:
        cases_file, tee = Path(tmp) / "cases.json", Path(tmp) / "sent.jsonl"
        cases_file.write_text(json.dumps(cases), encoding="utf-8")
        done = subprocess.run(
            [str(venv_python), str(RUNNER), framework, str(cases_file),
             f"http://127.0.0.1:{gateway.http_port}", str(tee)],
            capture_output=True, text=True, timeout=300, cwd=tmp, check=False)
        assert done.returncode == 0, done.stderr[-4000:]
        sent = [s for line in tee.read_text().splitlines() for s in spans_from_otlp_json(line)]
    received = receiver.wait_for_spans(len(sent), timeout=120)
    return sent, received


def assert_tool_texts(sent: list[ReceivedSpan], cases: list[dict[str, Any]]) -> None:
    """The tool spans of `sent` give the cases' tool results as context text, whatever object
    their framework recorded the result in."""
    tools = [found for s in sent if (found := tool_of(s.name, s.attributes)) is not None]
    assert tools and all(not isinstance(t.result, str) or t.result.startswith("{")
                         for t in tools)  # recorded inside an object
    assert sorted(str(tool_result(t.result)) for t in tools) == sorted(
        str(c["tool"]["result"]) for c in cases if c.get("tool"))


def test_langgraph_runs_are_scored_once_at_their_top_span_with_openinference(
        venv_python: Path, gateway: GatewayProcess, receiver: OTLPReceiver,
        stub: StubLLMServer) -> None:
    """The graph's top span (CHAIN, the conversation state in and out) is the agent call; its
    nodes are steps, even `create_react_agent`'s node named "agent" (an AGENT span), neither
    scored nor counted as agent spans that could not be read."""
    cases = langgraph_cases(seed=21, count=8)
    unreadable = unreadable_counts(gateway)
    sent, received = run_through_gateway("langchain_openinference", cases, venv_python, gateway,
                                         receiver, stub)
    kinds = {(s.name, s.attributes.get("openinference.span.kind")) for s in sent}
    assert {("lookup", "TOOL"), ("agent", "AGENT"), ("model", "CHAIN"), ("geo", "CHAIN")} <= kinds
    assert_scored(sent, received, {"geo"}, stub, [(c["question"], c["answer"]) for c in cases])
    assert unreadable_counts(gateway) == unreadable  # node steps are not "unreadable agents"
    assert_tool_texts(sent, cases)  # ToolMessage as `message_to_dict`: its content


def test_langgraph_runs_are_scored_at_their_workflow_span_with_openllmetry(
        venv_python: Path, gateway: GatewayProcess, receiver: OTLPReceiver,
        stub: StubLLMServer) -> None:
    """OpenLLMetry's `{graph}.workflow` span (traceloop workflow, `{"inputs": state}` in,
    `{"outputs": state}` out) is the agent call; its tasks, tools and model calls are not."""
    cases = langgraph_cases(seed=22, count=8)
    sent, received = run_through_gateway("langchain_openllmetry", cases, venv_python, gateway,
                                         receiver, stub)
    names = {s.name for s in sent}
    assert {"execute_tool lookup", "invoke_agent geo", "_FakeModel.chat"} <= names
    assert_scored(sent, received, {"geo.workflow"}, stub,
                  [(c["question"], c["answer"]) for c in cases])
    assert_tool_texts(sent, cases)  # a serialised ToolMessage in the callback's envelope


def test_crewai_tasks_are_scored_on_their_own_description_with_openinference(
        venv_python: Path, gateway: GatewayProcess, receiver: OTLPReceiver,
        stub: StubLLMServer) -> None:
    """Each task an agent performs (its AGENT span `{role}._execute_core`) is scored on the
    task's description and the agent's final answer, never on CrewAI's own prompts, the backstory
    (the system prompt) or the tool's return; an earlier task of the crew is scored on its own."""
    cases = generated_cases(seed=23, count=6)
    sent, received = run_through_gateway("crewai", cases, venv_python, gateway, receiver, stub)
    results = [str(s.attributes.get("output.value")) for s in sent
               if s.name == "geo._execute_core"]
    assert all(any(c["tool"]["result"] in r for r in results) for c in cases if "tool" in c)
    pairs = [(c["question"], c["answer"]) for c in cases]
    pairs += [(c["history"][0]["content"], c["history"][1]["content"]) for c in cases
              if "history" in c]
    assert_scored(sent, received, {"geo._execute_core"}, stub, pairs)


def test_llama_index_agent_runs_are_scored_from_their_llm_spans(
        venv_python: Path, gateway: GatewayProcess, receiver: OTLPReceiver,
        stub: StubLLMServer) -> None:
    """LlamaIndex's `FunctionAgent` under OpenInference: no span records the question and the
    answer together (the top `FunctionAgent.run` CHAIN span holds the workflow's start state and
    a cut-off text of its stop event; only the LLM spans below hold the messages), so each run
    is read from its LLM spans: the first call's last user text, the last call's final text.
    No workflow step is misread as an agent call and every span is forwarded unchanged."""
    cases = generated_cases(seed=24, count=4)
    sent, received = run_through_gateway("llama_index", cases, venv_python, gateway, receiver,
                                         stub)
    runs = [s for s in sent if s.name == "FunctionAgent.run"]
    assert len(runs) == len(cases)
    assert {"FunctionTool.acall", "MockFunctionCallingLLM.astream_chat"} <= {s.name for s in sent}
    # its tool result is a ToolOutput's JSON (blocks, raw input, metadata): context is its text
    results = [s.attributes["output.value"] for s in sent if s.name == "FunctionTool.acall"]
    assert results and all("raw_input" in str(r) for r in results)
    assert sorted(str(tool_result(r)) for r in results) == sorted(
        str(c["tool"]["result"]) for c in cases if c.get("tool"))
    assert_scored(sent, received, {"FunctionAgent.run"}, stub,
                  [(c["question"], c["answer"]) for c in cases])


def test_langgraph_runs_are_scored_the_same_in_process_as_through_the_gateway(
        venv_python: Path, gateway: GatewayProcess, receiver: OTLPReceiver,
        stub: StubLLMServer) -> None:
    """The spans the gateway scored, replayed through an in-process `ScoringSpanProcessor` with
    the built-in recognisers and the same judge: the same spans scored, on the same question and
    answer, with the same scores."""
    cases = langgraph_cases(seed=25, count=4)
    sent, received = run_through_gateway("langchain_openinference", cases, venv_python, gateway,
                                         receiver, stub)
    by_gateway = sorted((s.name, e.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE]) for s in received
                        for e in s.events_named(sc.GEN_AI_EVALUATION_RESULT))
    judged_by_gateway = sorted(judged_pairs(stub))
    stub.clear()
    exporter, provider = InMemorySpanExporter(), TracerProvider()
    scorer = tracescore.create_answer_relevancy_scorer(  # the gateway config's scorer
        model="openai/judge-stub", api_base=stub.base_url, api_key="sk-test", timeout=30)
    provider.add_span_processor(tracescore.ScoringSpanProcessor(
        SimpleSpanProcessor(exporter), [scorer], recognise=tracescore.build_recognisers(),
        isolation="thread"))
    parent = set_span_in_context(NonRecordingSpan(SpanContext(
        trace_id=0xABC, span_id=1, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))))
    for span in sent:
        provider.get_tracer(span.scope_name).start_span(
            span.name, context=parent, attributes=span.attributes).end()
    assert provider.force_flush(60_000)
    provider.shutdown()
    in_process = sorted((s.name, (e.attributes or {})[sc.GEN_AI_EVALUATION_SCORE_VALUE])
                        for s in exporter.get_finished_spans() for e in s.events
                        if e.name == sc.GEN_AI_EVALUATION_RESULT)
    assert by_gateway == in_process == [("geo", 1.0)] * len(cases)
    assert sorted(judged_pairs(stub)) == judged_by_gateway == sorted(
        (c["question"], c["answer"]) for c in cases)
