"""The TypeScript frameworks' own spans, sent by the real libraries to `tracescore serve`, come out
scored with the right question and answer; every other span passes through unchanged.

Mastra (`@mastra/core` agents and workflows, exported by `@mastra/otel-exporter` over OTLP/gRPC
and OTLP/HTTP) and the Vercel AI SDK 4, 5, 6 (`experimental_telemetry`) and 7 (`@ai-sdk/otel`,
both integrations) run under node with their own mock models (`rigs/conventions.py`,
one cached npm folder), export to a real gateway process, which forwards to the project's OTLP
receiver and judges relevancy through litellm at the stub judge. The judge's requests show what
was judged: the question block must be the user's last question (no system prompt, no tool
return, no earlier turn) and the statements the agent's final answer.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from _reach import assert_spans_scored, gateway_fixtures, judged_pairs
from rigs.conventions import conventions_node_prefix

from tracescore.testing import GatewayProcess, OTLPReceiver, ReceivedSpan, StubLLMServer
from tracescore.testing._decode import spans_from_otlp_json

pytestmark = pytest.mark.slow  # installs the npm packages on first use (minutes)

AGENT_SCRIPT = Path(__file__).resolve().parents[1] / "rigs" / "agents" / "convention_agent.mjs"
_QUESTIONS = ["Which river flows through {}?", "What is the capital of {}?",
              "How old is the oldest bridge in {}?", "Name one museum in {}."]
_PLACES = ["Vienna", "Kraków", "São Paulo", "Zürich", "Lyon", "Osaka", "Quito", "Tartu"]
_ANSWERS = ["The Danube.", "It is {}.", "About 800 years, in {}.", "The main museum of {}.",
            '{{"city": "{}"}}', "[\"{}\"]"]


def generated_cases(seed: int, count: int, *, calls: tuple[str, ...] = ("generateText",),
                    history: bool = True) -> list[dict[str, Any]]:
    """Questions and answers (some answers JSON text), with and without a system prompt, a tool
    round (its result a text the question must not contain) and earlier turns."""
    rng = random.Random(seed)
    cases: list[dict[str, Any]] = []
    for index in range(count):
        place = rng.choice(_PLACES)
        case: dict[str, Any] = {"question": f"{index}. " + rng.choice(_QUESTIONS).format(place),
                                "answer": rng.choice(_ANSWERS).format(place),
                                "call": calls[index % len(calls)]}
        if rng.random() < 0.6:
            case["system"] = f"SYSTEM-PROMPT {index}: answer in one short sentence."
        if case["call"].endswith("Text") and index % 2 == 0:
            case["tool"] = {"argument": place, "result": f"TOOL-RESULT {index} about {place}"}
        if history and index % 3 == 2:
            case["history"] = [{"role": "user", "content": f"EARLIER-TURN {index} about {place}?"},
                               {"role": "assistant", "content": "EARLIER-ANSWER."}]
        cases.append(case)
    return cases


def expected_answer(case: dict[str, Any]) -> str:
    if case["call"].endswith("Object"):  # the object as the SDK records it (JSON.stringify)
        return json.dumps({"answer": case["answer"]}, ensure_ascii=False, separators=(",", ":"))
    return str(case["answer"])


def mastra_answer(case: dict[str, Any]) -> str:
    """The answer as Mastra records it: a text that is JSON is written back compactly."""
    try:
        return json.dumps(json.loads(case["answer"]), ensure_ascii=False, separators=(",", ":"))
    except ValueError:
        return str(case["answer"])


@pytest.fixture(scope="module")
def node_prefix() -> Path:
    return conventions_node_prefix()


receiver, stub, gateway = gateway_fixtures()


def run_through_gateway(convention: str, cases: list[dict[str, Any]], protocol: str,
                        node_prefix: Path, gateway: GatewayProcess, receiver: OTLPReceiver,
                        stub: StubLLMServer) -> tuple[list[ReceivedSpan], list[ReceivedSpan]]:
    """Run the cases through the real library, exporting to the gateway; (sent, received)."""
    receiver.clear()
    stub.clear()
    port = gateway.grpc_port if protocol == "grpc" else gateway.http_port
    with tempfile.TemporaryDirectory(prefix="tracescore-reach-") as tmp:
        cases_file, tee = Path(tmp) / "cases.json", Path(tmp) / "sent.jsonl"
        cases_file.write_text(json.dumps(cases), encoding="utf-8")
        done = subprocess.run(
            ["node", str(AGENT_SCRIPT), convention, str(cases_file), f"{protocol}://127.0.0.1:{port}"],
            env={**os.environ, "TRACESCORE_NODE_PREFIX": str(node_prefix), "TRACESCORE_TEE": str(tee)},
            capture_output=True, text=True, timeout=300, cwd=tmp, check=False)
        assert done.returncode == 0, done.stderr[-4000:]
        sent = [s for line in tee.read_text().splitlines() for s in spans_from_otlp_json(line)]
    received = receiver.wait_for_spans(len(sent), timeout=120)
    return sent, received


def assert_scored(sent: list[ReceivedSpan], received: list[ReceivedSpan], agent_names: set[str],
                  stub: StubLLMServer, expected: list[tuple[str, str]]) -> None:
    """Every span arrived once and unchanged; the agent spans (by name) with one evaluation,
    judged on `expected` (question, answer) pairs; no other span scored."""
    assert assert_spans_scored(sent, received, lambda s: s.name in agent_names) == len(expected)
    assert sorted(judged_pairs(stub)) == sorted(expected)


# --- Mastra ------------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_mastra_agent_runs_are_scored_over_both_protocols(
        protocol: str, node_prefix: Path, gateway: GatewayProcess, receiver: OTLPReceiver,
        stub: StubLLMServer) -> None:
    cases = generated_cases(seed=1 if protocol == "grpc" else 2, count=6)
    sent, received = run_through_gateway("mastra", cases, protocol, node_prefix, gateway,
                                         receiver, stub)
    assert any(s.name == "execute_tool lookup" for s in sent)  # the tool ran, in its own span
    assert_scored(sent, received, {"invoke_agent geo"}, stub,
                  [(c["question"], mastra_answer(c)) for c in cases])


def test_mastra_workflow_runs_and_their_agent_calls_are_scored(
        node_prefix: Path, gateway: GatewayProcess, receiver: OTLPReceiver,
        stub: StubLLMServer) -> None:
    cases = generated_cases(seed=3, count=4, history=False)
    sent, received = run_through_gateway("mastra_workflow", cases, "grpc", node_prefix, gateway,
                                         receiver, stub)
    pairs = [(c["question"], mastra_answer(c)) for c in cases]
    assert_scored(sent, received, {"invoke_agent geo", "invoke_workflow trip"}, stub, pairs * 2)


def test_mastra_thread_memory_turns_are_scored_on_the_new_question(
        node_prefix: Path, gateway: GatewayProcess, receiver: OTLPReceiver,
        stub: StubLLMServer) -> None:
    """An agent with thread memory: the model sees the thread's earlier turns, the judge only
    the turn's new question."""
    cases = generated_cases(seed=4, count=7, history=False)
    for index, case in enumerate(cases):
        case["thread"] = f"thread-{index % 2}"
    sent, received = run_through_gateway("mastra_memory", cases, "http", node_prefix, gateway,
                                         receiver, stub)
    prompts = [str(s.attributes.get("mastra.model_generation.input")) for s in sent
               if s.name.startswith("model_generation")]
    assert any(cases[0]["question"] in p and cases[2]["question"] in p for p in prompts)
    assert {s.attributes.get("mastra.metadata.threadId") for s in sent
            if s.name == "invoke_agent geo"} == {"thread-0", "thread-1"}
    assert_scored(sent, received, {"invoke_agent geo"}, stub,
                  [(c["question"], mastra_answer(c)) for c in cases])


# --- the Vercel AI SDK ---------------------------------------------------------------------------
_AI_CALLS = ("generateText", "streamText", "generateObject", "streamObject")
_AI_SPANS = {f"ai.{call}" for call in _AI_CALLS}


@pytest.mark.parametrize(("convention", "protocol"), [
    ("vercel_ai_v6", "grpc"), ("vercel_ai_v7_legacy", "http"), ("vercel_ai_v5", "http"),
    ("vercel_ai_v4", "grpc"),
])
def test_ai_sdk_calls_are_scored(convention: str, protocol: str, node_prefix: Path,
                                 gateway: GatewayProcess, receiver: OTLPReceiver,
                                 stub: StubLLMServer) -> None:
    """generateText, streamText, generateObject, streamObject, with tool rounds (multi-step)
    and earlier turns: the top-level `ai.*` span is scored, its model and tool calls are not."""
    cases = generated_cases(seed=len(convention), count=8, calls=_AI_CALLS)
    sent, received = run_through_gateway(convention, cases, protocol, node_prefix, gateway,
                                         receiver, stub)
    names = {s.name for s in sent}
    assert {"ai.toolCall", "ai.generateText.doGenerate", "ai.streamText.doStream"} <= names
    assert_scored(sent, received, _AI_SPANS, stub,
                  [(c["question"], expected_answer(c)) for c in cases])


def test_ai_sdk_7_modern_integration_is_scored_as_genai(
        node_prefix: Path, gateway: GatewayProcess, receiver: OTLPReceiver,
        stub: StubLLMServer) -> None:
    cases = generated_cases(seed=7, count=6, calls=_AI_CALLS)
    sent, received = run_through_gateway("vercel_ai", cases, "grpc", node_prefix, gateway,
                                         receiver, stub)
    assert_scored(sent, received, {"invoke_agent geo"}, stub,
                  [(c["question"], expected_answer(c)) for c in cases])
