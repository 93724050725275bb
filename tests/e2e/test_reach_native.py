"""Agents in other languages, built with their own toolchains and exporting their own spans to
`tracescore serve`, come out scored on the user's question and the agent's answer.

JVM: LangChain4j AI services over its OpenAI chat model against a scripted OpenAI-compatible
model in the agent's process; a LangChain4j chat-model listener writes the model calls as GenAI
`chat` spans, the OpenTelemetry Java SDK exports over OTLP/HTTP (`tests/jvm/agent`, compiled with
Maven once into the cache dir).
Go: the official OpenAI Go client (`openai-go`) against a scripted OpenAI-compatible model in the
agent's process, spans from the OpenTelemetry Go SDK over OTLP/HTTP (`tests/go/agent`, built once
into the cache dir). The judge is the stub of `_reach` (relevancy through litellm).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import pytest
from _reach import gateway_fixtures, judged_pairs
from rigs.native_agents import go_agent, jvm_agent
from test_reach_node import generated_cases

from tracescore import _semconv as sc
from tracescore.testing import GatewayProcess, OTLPReceiver, StubLLMServer

pytestmark = pytest.mark.slow  # builds the Go agent on first use (minutes)

receiver, stub, gateway = gateway_fixtures()


@pytest.mark.parametrize("language", ["go", "jvm"])
def test_agent_calls_in_other_languages_are_scored_through_the_gateway(
        language: str, gateway: GatewayProcess, receiver: OTLPReceiver,
        stub: StubLLMServer) -> None:
    command = [str(go_agent())] if language == "go" else jvm_agent()
    cases = [{k: c[k] for k in ("question", "answer", "system") if k in c}
             for c in generated_cases(seed=len(language), count=6, history=False)]
    receiver.clear()
    stub.clear()
    with tempfile.TemporaryDirectory(prefix="tracescore-reach-native-") as tmp:
        cases_file = Path(tmp) / "cases.json"
        cases_file.write_text(json.dumps(cases), encoding="utf-8")
        done = subprocess.run([*command, str(cases_file), f"http://127.0.0.1:{gateway.http_port}"],
                              capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    received = receiver.wait_for_spans(2 * len(cases), timeout=120)
    assert sorted(s.name for s in received) == sorted(["invoke_agent geo", "chat scripted"]
                                                      * len(cases))
    for span in received:
        events = span.events_named(sc.GEN_AI_EVALUATION_RESULT)
        assert len(events) == (span.name == "invoke_agent geo"), span.name
        assert all(e.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0 for e in events)
    assert sorted(judged_pairs(stub)) == sorted((c["question"], c["answer"]) for c in cases)
