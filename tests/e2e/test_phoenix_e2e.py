"""End to end with a real backend: an instrumented, online-scored agent exports to Arize Phoenix over
OTLP/HTTP, and the spans are read back through Phoenix's REST API with their score events intact.

Phoenix is installed once into a cached venv outside the checkout (~/.cache/tracescore; the first
run takes a few minutes), then started on free loopback ports with telemetry and external
resources off, in a temporary working directory.
"""

from __future__ import annotations

import ipaddress
import socket
import time
import urllib.error
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from _helpers import GEO_ANSWER as ANSWER
from _helpers import geo_agent, geo_llm_and_judge, litellm_instrumented, shut_down_pipelines
from rigs import phoenix as _phoenix
from rigs.phoenix import PhoenixServer

import tracescore
from tracescore import _semconv as sc
from tracescore.cli._otlp import read_spans
from tracescore.testing import StubLLMServer
from tracescore.testing._tools import free_port

PROJECT = "default"  # the test's spans come from the shared test provider, without a project name
ON_TOPIC = "What is the capital of France?"
OFF_TOPIC = "Will it rain in Lyon tomorrow?"  # the stub judge finds the answer off topic


@pytest.fixture(autouse=True)
def _clean_pipelines(span_exporter) -> Iterator[None]:
    yield
    shut_down_pipelines()


def _phoenix_spans(
    phoenix: PhoenixServer, expected_agents: int, timeout: float = 90.0
) -> list[dict[str, Any]]:
    """Poll Phoenix's REST API until the scored agent spans are stored (ingestion is asynchronous)."""
    deadline = time.monotonic() + timeout
    spans: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            spans = phoenix.get_json(f"/v1/projects/{PROJECT}/spans", limit=1000)["data"]
        except urllib.error.HTTPError as exc:
            if exc.code != 404:  # 404: the project does not exist until its first span
                raise
        agents = [s for s in spans if s["name"] == "invoke_agent geo"]
        if len(agents) >= expected_agents and all(
            _events(s, sc.GEN_AI_EVALUATION_RESULT) for s in agents
        ):
            return spans
        time.sleep(0.5)  # an external server: nothing to wait on but its API
    raise TimeoutError(f"Phoenix has {[s['name'] for s in spans]} after {timeout}s")


def _events(span: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [event["attributes"] for event in span["events"] if event["name"] == name]


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the first run installs Phoenix into the cache
def test_scored_agent_traces_arrive_in_phoenix(
    phoenix: PhoenixServer, stub_llm: StubLLMServer, span_exporter
) -> None:
    geo = geo_agent(stub_llm)
    stub_llm.responder = geo_llm_and_judge
    scorers = [
        tracescore.create_answer_relevancy_scorer(
            model="openai/judge", api_base=stub_llm.base_url, api_key="sk-test"
        ),
        tracescore.create_content_similarity_scorer(),
    ]
    handle = tracescore.configure(
        exporter="otlp-http", endpoint=phoenix.base_url, scorers=scorers, online={"max_wait_s": 30}
    )
    with litellm_instrumented():
        for question in (ON_TOPIC, OFF_TOPIC):
            with tracescore.ground_truth(ANSWER):
                assert geo(question) == ANSWER
    assert handle.flush(40)

    spans = _phoenix_spans(phoenix, expected_agents=2)
    sent = {
        s.context.trace_id: s
        for s in span_exporter.get_finished_spans()
        if s.name == "invoke_agent geo"
    }
    by_question: dict[str, dict[str, Any]] = {}
    for agent in (s for s in spans if s["name"] == "invoke_agent geo"):
        trace_id = agent["context"]["trace_id"]
        assert int(trace_id, 16) in sent  # the very traces the SDK produced
        children = {s["name"] for s in spans if s["parent_id"] == agent["context"]["span_id"]}
        assert children == {"execute_tool lookup", "chat agent-llm"}
        assert agent["attributes"]["gen_ai.agent.name"] == "geo"
        question = (
            ON_TOPIC if ON_TOPIC in agent["attributes"][sc.GEN_AI_INPUT_MESSAGES] else OFF_TOPIC
        )
        by_question[question] = agent
    assert set(by_question) == {ON_TOPIC, OFF_TOPIC}
    assert not [
        s for s in spans if s["name"].startswith("chat judge")
    ]  # judge calls are not traced

    for question, score, label in ((ON_TOPIC, 1.0, "relevant"), (OFF_TOPIC, 0.0, "irrelevant")):
        results = {
            e[sc.TS_SCORER_ID]: e
            for e in _events(by_question[question], sc.GEN_AI_EVALUATION_RESULT)
        }
        relevancy, similarity = results["answer-relevancy"], results["content-similarity"]
        assert relevancy[sc.GEN_AI_EVALUATION_SCORE_VALUE] == score
        assert relevancy[sc.GEN_AI_EVALUATION_SCORE_LABEL] == label
        assert relevancy[sc.GEN_AI_EVALUATION_EXPLANATION].startswith(
            f"The score is {score:g} because"
        )
        assert relevancy[sc.GEN_AI_EVALUATION_NAME] == "Answer Relevancy"
        assert (
            similarity[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
        )  # the answer equals the ground truth
        steps = {e[sc.TS_STEP_NAME] for e in _events(by_question[question], sc.TS_EVALUATION_STEP)}
        assert {"preprocess", "analyze"} <= steps


def test_phoenix_starts_on_other_ports_when_its_picked_port_is_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another process (here an HTTP/2 gRPC server) takes the port picked for Phoenix before
    Phoenix binds it: the helper notices, picks new ports and starts Phoenix there."""
    squatter = grpc.server(futures.ThreadPoolExecutor(1))
    taken = squatter.add_insecure_port("127.0.0.1:0")
    squatter.start()
    picks = iter([taken])
    monkeypatch.setattr(_phoenix, "free_port", lambda: next(picks, None) or free_port())
    try:
        with PhoenixServer(startup_timeout=300) as server:
            assert server.port != taken
            assert server.get_json("/v1/projects")["data"]  # the default project: it is Phoenix
    finally:
        squatter.stop(None)


def _listening(port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The local addresses of the TCP sockets listening on `port` (from /proc/net/tcp and tcp6)."""
    found: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    for table, size in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port_hex = local.split(":")
            if state != "0A" or int(port_hex, 16) != port:  # 0A: LISTEN
                continue
            raw = b"".join(bytes.fromhex(address[i:i + 8])[::-1] for i in range(0, size, 8))
            found.append(ipaddress.ip_address(raw))
    return found


def _loopback(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or bool(mapped and mapped.is_loopback)


@pytest.fixture
def squatters() -> Iterator[list[int]]:
    """Two listening sockets (not Phoenix) holding two loopback ports, as a collector would."""
    sockets = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]
    try:
        yield [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@pytest.mark.parametrize("setting", ["PHOENIX_PORT", "PHOENIX_GRPC_PORT"])
@pytest.mark.parametrize("given_by", ["environment", "flag"])
@pytest.mark.parametrize("command", ["serve", "demo"])
def test_a_port_set_but_taken_is_one_line_naming_its_setting(
    setting: str, given_by: str, command: str, squatters: list[int], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("PHOENIX_PORT", raising=False)
    monkeypatch.delenv("PHOENIX_GRPC_PORT", raising=False)
    monkeypatch.setitem(_phoenix.DEFAULT_PORTS, "PHOENIX_PORT", free_port())  # no Phoenix there
    taken = squatters[0]
    flag = {"PHOENIX_PORT": "--port", "PHOENIX_GRPC_PORT": "--grpc-port"}[setting]
    argv = [command, "--exit", "--working-dir", str(tmp_path)]
    if given_by == "environment":
        monkeypatch.setenv(setting, str(taken))
    else:
        argv += [flag, str(taken)]
    monkeypatch.setattr(_phoenix, "phoenix_venv", lambda *a: pytest.fail("Phoenix was started"))
    assert _phoenix.main(argv) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    (line,) = err.splitlines()
    assert f"port {taken} ({setting}) is in use" in line and f"set {setting}" in line


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the first run installs Phoenix into the cache
def test_demo_phoenix_takes_free_loopback_ports_when_the_defaults_are_taken(
    squatters: list[int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`make demo-phoenix` next to a collector on 4317 (and something else on 6006): Phoenix
    starts on free ports instead, its gRPC receiver on loopback only, and the demo runs."""
    monkeypatch.delenv("PHOENIX_PORT", raising=False)
    monkeypatch.delenv("PHOENIX_GRPC_PORT", raising=False)
    monkeypatch.setattr(_phoenix, "DEFAULT_PORTS", dict(zip(_phoenix.DEFAULT_PORTS, squatters)))
    started: list[PhoenixServer] = []
    listeners: dict[str, list[Any]] = {}

    class Recorded(PhoenixServer):
        def start(self) -> Recorded:
            started.append(self)
            super().start()
            return self

    def demo_while_listening(base_url: str, spans_file: Path) -> int:
        (server,) = started
        listeners.update(http=_listening(server.port), grpc=_listening(server.grpc_port))
        return real_demo(base_url, spans_file)

    real_demo = _phoenix.run_demo
    monkeypatch.setattr(_phoenix, "PhoenixServer", Recorded)
    monkeypatch.setattr(_phoenix, "run_demo", demo_while_listening)
    assert _phoenix.main(["demo", "--exit", "--working-dir", str(tmp_path)]) == 0
    (server,) = started
    assert not {server.port, server.grpc_port} & set(squatters)
    assert listeners["http"] and all(_loopback(a) for a in listeners["http"]), listeners
    assert listeners["grpc"] and all(_loopback(a) for a in listeners["grpc"]), listeners
    out = capsys.readouterr().out
    assert f"OTLP/gRPC: http://127.0.0.1:{server.grpc_port}" in out
    exported = [s for s in read_spans(tmp_path / "demo-spans.jsonl") if s.name.startswith("invoke")]
    assert exported and all(s.events for s in exported)  # the demo ran and was scored
