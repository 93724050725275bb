"""More runs of the conventions side venv's real libraries through a real `tracescore serve`,
their spans posted as their exporter wrote them: pydantic-ai agents that call tools, several
rounds, streamed or not, continuing earlier turns; OpenTelemetry's GenAI helper writing an
`invoke_workflow` around an `invoke_agent`. Each agent call comes out scored on the user's
question (never a tool return, the system prompt or an earlier turn) and the final answer (never
a tool call); every other span passes through unchanged.

The libraries run in the conventions side venv (`rigs/conventions.py`), pydantic-ai
with its own `FunctionModel` (no network); the judge is real litellm at the stub of `_reach.py`.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import Any

import pytest
from _reach import assert_spans_scored, gateway_fixtures, judged_pairs, post_otlp_json
from rigs.conventions import export_convention

from tracescore.testing import GatewayProcess, OTLPReceiver, ReceivedSpan, StubLLMServer
from tracescore.testing._decode import spans_from_otlp_json

pytestmark = pytest.mark.slow  # installs the conventions side venv on first use (minutes)

receiver, stub, gateway = gateway_fixtures()
_PLACES = ["Vienna", "Kraków", "São Paulo", "Zürich", "Osaka", "Quito"]


def generated_cases(seed: int, count: int) -> list[dict[str, Any]]:
    """Questions with 0 to 3 tool rounds (results a question must never contain), run or
    streamed, some continuing earlier turns; answers, some JSON text."""
    rng = random.Random(seed)
    cases = []
    for index in range(count):
        place = rng.choice(_PLACES)
        case: dict[str, Any] = {
            "question": f"{index}. What is the oldest bridge in {place}?",
            "answer": rng.choice([f"The old bridge of {place}.", f'{{"bridge": "{place}"}}']),
            "rounds": index % 4, "stream": index % 2 == 1,
            "tool_result": f"TOOL-RETURN about {place}"}
        if rng.random() < 0.5:
            case["history"] = [{"user": f"EARLIER-TURN {index}?", "assistant": "EARLIER-ANSWER."}]
        cases.append(case)
    return cases


def run_through_gateway(run: str, cases: list[dict[str, Any]], gateway: GatewayProcess,
                        receiver: OTLPReceiver, stub: StubLLMServer
                        ) -> tuple[list[ReceivedSpan], list[ReceivedSpan]]:
    """The cases through the real library, its export requests posted to the gateway as OTLP
    JSON; (sent, received)."""
    with tempfile.TemporaryDirectory(prefix="tracescore-reach-") as tmp:
        lines = export_convention(run, cases, Path(tmp) / "spans.jsonl").read_text().splitlines()
    receiver.clear()
    stub.clear()
    post_otlp_json(gateway.http_port, lines)
    sent = [span for line in lines for span in spans_from_otlp_json(line)]
    return sent, receiver.wait_for_spans(len(sent), timeout=120)


def test_pydantic_ai_runs_with_tools_streaming_and_history_are_scored(
        gateway: GatewayProcess, receiver: OTLPReceiver, stub: StubLLMServer) -> None:
    cases = generated_cases(seed=41, count=12)
    sent, received = run_through_gateway("pydantic_ai_tools", cases, gateway, receiver, stub)
    tools = [s for s in sent if s.name == "execute_tool lookup"]
    assert len(tools) == sum(c["rounds"] for c in cases)  # the tool rounds really ran
    assert assert_spans_scored(sent, received, lambda s: s.name == "invoke_agent geo") == len(cases)
    assert sorted(judged_pairs(stub)) == sorted((c["question"], c["answer"]) for c in cases)


def test_genai_workflows_and_the_agents_inside_them_are_scored(
        gateway: GatewayProcess, receiver: OTLPReceiver, stub: StubLLMServer) -> None:
    """GenAI `invoke_workflow` spans are read like `invoke_agent` ones (the workflow's name in
    `gen_ai.workflow.name`): the workflow and the agent call inside it are both scored."""
    cases = generated_cases(seed=43, count=5)
    sent, received = run_through_gateway("genai_workflow", cases, gateway, receiver, stub)
    names = {"invoke_workflow trip", "invoke_agent geo"}
    assert {s.name for s in sent} >= names | {"execute_tool lookup"}
    assert assert_spans_scored(sent, received, lambda s: s.name in names) == 2 * len(cases)
    assert sorted(judged_pairs(stub)) == sorted([(c["question"], c["answer"]) for c in cases] * 2)
