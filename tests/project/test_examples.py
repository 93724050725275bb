"""Every example in examples/ runs for real in a subprocess; its spans reach a real OTLP receiver."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tracescore import _semconv as sc
from tracescore.testing import OTLPReceiver, ReceivedSpan

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _env(receiver: OTLPReceiver | None, **extra: str) -> dict[str, str]:
    """A clean environment: no OTel or tracescore settings, and no model or key of the caller
    (each example must run offline with no API key)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "TRACESCORE_", "LLM_", "OPENAI_"))}
    env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", "OTEL_BSP_SCHEDULE_DELAY": "100"})
    if receiver is not None:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.http_endpoint
    env.update(extra)
    return env


def run_example(name: str, receiver: OTLPReceiver | None, *args: str,
                **extra_env: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, str(EXAMPLES / name), *args], text=True,
                            capture_output=True, env=_env(receiver, **extra_env), timeout=120,
                            check=False, cwd=EXAMPLES.parent)
    assert result.returncode == 0 or name == "batch_eval.py", result.stderr
    return result


def scores(span: ReceivedSpan) -> dict[str, float]:
    """scorer id -> score of the span's gen_ai.evaluation.result events."""
    return {e.attributes[sc.TS_SCORER_ID]: e.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE]
            for e in span.events if e.name == sc.GEN_AI_EVALUATION_RESULT
            and sc.GEN_AI_EVALUATION_SCORE_VALUE in e.attributes}


def test_minimal_agent(otlp_receiver: OTLPReceiver) -> None:
    result = run_example("minimal_agent.py", None, "--exporter", "otlp-http", "--endpoint",
                         otlp_receiver.http_endpoint)
    assert "Paris is sunny" in result.stdout
    spans = otlp_receiver.wait_for_spans(3)
    (agent,) = otlp_receiver.spans_named("invoke_agent weather-bot")
    children = {s.name for s in otlp_receiver.children_of(agent)}
    assert "execute_tool weather" in children
    assert any(name.startswith("chat ") for name in children)
    assert len({s.trace_id for s in spans}) == 1


def test_demo_agent_runs_on_its_own(tmp_path: Path) -> None:
    result = run_example("demo_agent.py", None)
    assert "Paris is the capital of France." in result.stdout
    assert '"name": "invoke_agent trivia-agent"' in result.stdout  # console exporter


def test_async_streaming_agent(otlp_receiver: OTLPReceiver) -> None:
    result = run_example("async_streaming_agent.py", otlp_receiver)
    assert "Tomorrow in Oslo it will be snowy, around 3 degrees Celsius." in result.stdout
    agents = otlp_receiver.wait_for_spans(lambda s: s.name == "invoke_agent forecast-agent",
                                          count=2)
    for agent in agents:
        tools = sorted(s.name for s in otlp_receiver.children_of(agent))
        assert tools == ["execute_tool find_city", "execute_tool get_forecast"]
        assert "degrees Celsius" in agent.attributes[sc.GEN_AI_OUTPUT_MESSAGES]  # joined stream
        assert set(scores(agent)) == {"answer-relevancy"}


def test_every_example_script_is_run_here() -> None:
    source = Path(__file__).read_text()
    scripts = {p.name for p in EXAMPLES.glob("*.py")} - {"support_bot_lib.py"}  # a library
    assert {name for name in scripts if f'"{name}"' not in source} == set()


def _litellm_agent(receiver: OTLPReceiver, **env: str) -> ReceivedSpan:
    """Run litellm_agent.py; its `chat` span, after checking the answer and the agent's score."""
    result = run_example("litellm_agent.py", receiver, **env)
    assert "cherry blossoms" in result.stdout
    (agent,) = receiver.wait_for_spans(lambda s: s.name == "invoke_agent travel-agent")
    assert "answer-relevancy" in scores(agent)
    (chat,) = receiver.children_of(agent)
    return chat


def test_litellm_agent_runs_offline_by_default(otlp_receiver: OTLPReceiver) -> None:
    chat = _litellm_agent(otlp_receiver)  # no LLM_* and no key: litellm's mock_response
    assert chat.name == "chat gpt-4o-mini"
    assert chat.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] > 0


@pytest.mark.parametrize("key", [None, "sk-test"], ids=["no-key", "LLM_API_KEY"])
def test_litellm_agent_against_an_openai_compatible_server(
        otlp_receiver: OTLPReceiver, stub_llm, key: str | None) -> None:
    stub_llm.enqueue("Spring, for the cherry blossoms, or autumn, for the red maple leaves.")
    env = {"LLM_API_BASE": stub_llm.base_url, "LLM_MODEL": "openai/stub-model"}
    chat = _litellm_agent(otlp_receiver, **env, **({"LLM_API_KEY": key} if key else {}))
    (request,) = stub_llm.requests
    assert request["messages"][-1]["content"] == "What is a good time of year to visit Kyoto?"
    assert request.headers["authorization"] == f"Bearer {key or 'no-key'}"
    assert chat.name == "chat stub-model"
    assert chat.attributes[sc.GEN_AI_REQUEST_MODEL] == "stub-model"


def test_instrument_existing_agent(otlp_receiver: OTLPReceiver) -> None:
    result = run_example("instrument_existing_agent.py", otlp_receiver)
    assert "Standard shipping takes 3 to 5 business days" in result.stdout
    agents = otlp_receiver.wait_for_spans(lambda s: s.name == "invoke_agent support-bot",
                                          count=3)
    assert len(otlp_receiver.spans) == 3  # the call after uninstrument_agent is not traced
    by_question = {s.attributes[sc.GEN_AI_INPUT_MESSAGES]: scores(s) for s in agents}
    relevancy = {q: s["answer-relevancy"] for q, s in by_question.items()}
    shipping = next(v for q, v in relevancy.items() if "shipping" in q)
    colour = next(v for q, v in relevancy.items() if "colour" in q)
    assert shipping > colour


def test_own_tracer_provider(otlp_receiver: OTLPReceiver) -> None:
    result = run_example("own_tracer_provider.py", otlp_receiver)
    assert "sunny in Lisbon" in result.stdout
    (agent,) = otlp_receiver.wait_for_spans(lambda s: s.name == "invoke_agent weather-agent")
    assert agent.resource["service.name"] == "own-provider-example"
    assert "answer-relevancy" in scores(agent)


def test_batch_eval_reports_and_gates(otlp_receiver: OTLPReceiver) -> None:
    result = run_example("batch_eval.py", otlp_receiver)
    assert result.returncode == 0, result.stdout
    assert "verdict: PASS" in result.stdout and "answer-relevancy: mean" in result.stdout
    assert "Our office is closed on public holidays." in result.stdout  # on_item_complete
    items = otlp_receiver.wait_for_spans(lambda s: s.name == "invoke_agent support_bot", count=4)
    for span in items:
        assert set(scores(span)) == {"answer-relevancy", "content-similarity"}

    gated = run_example("batch_eval.py", None, "--min-relevancy", "0.9")
    assert gated.returncode == 1  # the off-topic answer keeps the mean under 0.9
    assert "verdict: FAIL" in gated.stdout


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_fastapi_service(otlp_receiver: OTLPReceiver) -> None:
    port = _free_port()
    server = subprocess.Popen([sys.executable, str(EXAMPLES / "fastapi_service.py"), "--port",
                               str(port)], env=_env(otlp_receiver), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=10) as client:
            for _ in range(300):  # wait for the server to listen (bounded)
                try:
                    client.get("/docs")
                    break
                except httpx.TransportError:
                    if server.poll() is not None:
                        pytest.fail(server.stderr.read() if server.stderr else "server died")
                    time.sleep(0.1)
            first = client.post("/chat", json={"message": "When are you open?"},
                                headers={"X-Conversation-Id": "conv-42"}).json()
            second = client.post("/chat", json={"message": "Where is your shop?"}).json()
    finally:
        server.send_signal(signal.SIGINT)  # graceful: lifespan shutdown flushes the scores
        _, stderr = server.communicate(timeout=60)
    assert server.returncode == 0, stderr  # a clean shutdown, no traceback
    assert first["conversation_id"] == "conv-42" and "9am to 6pm" in first["answer"]
    assert second["conversation_id"] != "conv-42" and "Harbour Street" in second["answer"]
    agents = otlp_receiver.wait_for_spans(lambda s: s.name == "invoke_agent shop-assistant",
                                          count=2)
    conversations = {s.attributes[sc.GEN_AI_CONVERSATION_ID] for s in agents}
    assert conversations == {"conv-42", second["conversation_id"]}
    for agent in agents:
        assert "answer-relevancy" in scores(agent)
        assert [s.name for s in otlp_receiver.children_of(agent)] == [
            "execute_tool lookup_store_info"]
