"""Conversation scope in `tracescore serve`: real Mastra agent calls with thread memory, each turn
in a trace of its own, are grouped by Mastra's thread id (and OpenInference's and OpenLLMetry's
agent calls by their session ids); each conversation is scored once it is quiet and again after
a new turn; its turns survive a restart of the gateway (the journal)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _reach import post_otlp_json
from rigs.conventions import conventions_node_prefix, export_convention

from tracescore import _semconv as sc
from tracescore.testing import GatewayProcess, OTLPReceiver, ReceivedSpan
from tracescore.testing._decode import spans_from_otlp_json

pytestmark = pytest.mark.slow  # installs the npm packages on first use (minutes)

TESTS = Path(__file__).resolve().parents[1]
AGENT_SCRIPT = TESTS / "rigs" / "agents" / "convention_agent.mjs"
QUIET_S = 0.5


@pytest.fixture(scope="module")
def node_prefix() -> Path:
    return conventions_node_prefix()


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as running:
        yield running


def start_gateway(folder: Path, receiver: OTLPReceiver, quiet_s: float = QUIET_S
                  ) -> GatewayProcess:
    config = folder / "gateway.yaml"
    config.write_text("scoring:\n  isolation: thread\n  scorers:\n"
                      "    - {scorer: '_conversation_scorers:TurnCounter'}\n"
                      f"conversations:\n  quiet_s: {quiet_s}\n", encoding="utf-8")
    env = {"PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    return GatewayProcess(["--config", str(config), "--endpoint", receiver.grpc_endpoint,
                           "--journal", str(folder / "journal.db")], env=env).start()


def run_mastra(cases: list[dict[str, Any]], gateway: GatewayProcess, node_prefix: Path
               ) -> list[ReceivedSpan]:
    """The cases through Mastra's agent with thread memory, exported to the gateway; the spans
    the library sent."""
    with tempfile.TemporaryDirectory(prefix="tracescore-conv-") as tmp:
        cases_file, tee = Path(tmp) / "cases.json", Path(tmp) / "sent.jsonl"
        cases_file.write_text(json.dumps(cases), encoding="utf-8")
        done = subprocess.run(
            ["node", str(AGENT_SCRIPT), "mastra_memory", str(cases_file),
             f"http://127.0.0.1:{gateway.http_port}"],
            env={**os.environ, "TRACESCORE_NODE_PREFIX": str(node_prefix),
                 "TRACESCORE_TEE": str(tee)},
            capture_output=True, text=True, timeout=300, cwd=tmp, check=False)
        assert done.returncode == 0, done.stderr[-4000:]
        return [s for line in tee.read_text().splitlines() for s in spans_from_otlp_json(line)]


def cases(thread: str, questions: list[str]) -> list[dict[str, Any]]:
    return [{"question": q, "answer": f"Answer {n}.", "thread": thread}
            for n, q in enumerate(questions)]


def results(receiver: OTLPReceiver, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
    """The conversation results the gateway forwarded (their carrier spans' events), once
    `count` have arrived."""
    deadline = time.monotonic() + timeout
    while True:
        found = [dict(e.attributes, links=len(s.links), parent=s.parent_span_id,
                      trace=s.trace_id) for s in receiver.spans
                 if s.attributes.get(sc.TS_EVALUATION_CARRIER)
                 for e in s.events_named(sc.GEN_AI_EVALUATION_RESULT)]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_mastra_threads_are_scored_as_conversations_once_quiet_and_again_after_a_turn(
        tmp_path: Path, receiver: OTLPReceiver, node_prefix: Path) -> None:
    gateway = start_gateway(tmp_path, receiver)
    try:
        first = ["Which river flows through Vienna?", "And its length?", "Thanks!"]
        other = ["What is the capital of Peru?", "Name one museum there."]
        sent = run_mastra(cases("thread-a", first) + cases("thread-b", other), gateway,
                          node_prefix)
        turns = [s for s in sent if s.name == "invoke_agent geo"]
        assert len({s.trace_id for s in turns}) == 5  # every turn a trace of its own
        assert {s.attributes.get("mastra.metadata.threadId") for s in turns} == {
            "thread-a", "thread-b"}
        got = results(receiver, 2)
        time.sleep(4 * QUIET_S)
        got = results(receiver, 2)
        assert len(got) == 2  # once per quiet period
        by_id = {r[sc.GEN_AI_CONVERSATION_ID]: r for r in got}
        assert by_id["thread-a"][sc.TS_CONVERSATION_TURNS] == 3
        assert by_id["thread-a"][sc.GEN_AI_EVALUATION_EXPLANATION] == " | ".join(first)
        assert by_id["thread-a"]["links"] == 3
        assert by_id["thread-b"][sc.TS_CONVERSATION_TURNS] == 2
        # each turn was forwarded as it came: no conversation result on the turns themselves
        assert not [s for s in receiver.spans if s.name == "invoke_agent geo"
                    and s.events_named(sc.GEN_AI_EVALUATION_RESULT)]

        run_mastra(cases("thread-a", ["One more question?"]), gateway, node_prefix)
        got = results(receiver, 3)
        versions = sorted(r[sc.TS_CONVERSATION_TURNS] for r in got
                          if r[sc.GEN_AI_CONVERSATION_ID] == "thread-a")
        assert versions == [3, 4]  # appended, the first version kept
    finally:
        gateway.stop()


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_pending_conversation_survives_a_restart_of_the_gateway(
        stop: signal.Signals, tmp_path: Path, receiver: OTLPReceiver, node_prefix: Path) -> None:
    gateway = start_gateway(tmp_path, receiver, quiet_s=60)  # not quiet before it stops
    try:
        run_mastra(cases("thread-r", ["First question?", "Second question?"]), gateway,
                   node_prefix)
        receiver.wait_for_spans(1, timeout=30)
        gateway.process.send_signal(stop)  # SIGKILL: nothing flushed; SIGTERM: not scored
        gateway.process.wait(30)
        assert not results(receiver, 1, timeout=0)
    finally:
        gateway.stop()
    gateway = start_gateway(tmp_path, receiver)  # the same journal, a short quiet period
    try:
        [result] = results(receiver, 1)
        assert result[sc.GEN_AI_CONVERSATION_ID] == "thread-r"
        assert result[sc.TS_CONVERSATION_TURNS] == 2
        run_mastra(cases("thread-r", ["Third question?"]), gateway, node_prefix)
        got = results(receiver, 2)
        assert sorted(r[sc.TS_CONVERSATION_TURNS] for r in got) == [2, 3]
    finally:
        gateway.stop()
    gateway = start_gateway(tmp_path, receiver)  # scored versions are not scored again
    try:
        time.sleep(4 * QUIET_S)
        assert len(results(receiver, 3, timeout=0)) == 2
    finally:
        gateway.stop()


@pytest.mark.parametrize(("convention", "attribute"), [
    ("openinference", "session.id"),
    ("traceloop", "traceloop.association.properties.session_id"),
])
def test_python_frameworks_session_ids_make_conversations(
        convention: str, attribute: str, tmp_path: Path, receiver: OTLPReceiver) -> None:
    """OpenInference's `using_session` and OpenLLMetry's session association, from the real
    libraries: each agent call of a session is one turn of its conversation."""
    turns = [("s-1", "Where is my parcel?"), ("s-2", "Can I change my address?"),
             ("s-1", "It is parcel 7."), ("s-1", "Thanks!")]
    out = export_convention(convention, [
        {"question": q, "answer": f"Answer {n}.", "session": s}
        for n, (s, q) in enumerate(turns)], tmp_path / "spans.jsonl")
    lines = out.read_text().splitlines()
    sent = [s for line in lines for s in spans_from_otlp_json(line)]
    assert {s.attributes.get(attribute) for s in sent} == {"s-1", "s-2"}
    gateway = start_gateway(tmp_path, receiver)
    try:
        post_otlp_json(gateway.http_port, lines)
        got = results(receiver, 2)
        time.sleep(4 * QUIET_S)
        got = results(receiver, 2)
    finally:
        gateway.stop()
    by_id = {r[sc.GEN_AI_CONVERSATION_ID]: r for r in got}
    assert len(got) == 2 and set(by_id) == {"s-1", "s-2"}
    assert by_id["s-1"][sc.GEN_AI_EVALUATION_EXPLANATION] == (
        "Where is my parcel? | It is parcel 7. | Thanks!")
    assert by_id["s-1"][sc.TS_CONVERSATION_TURNS] == 3 and by_id["s-1"]["links"] == 3
    assert by_id["s-2"][sc.TS_CONVERSATION_TURNS] == 1
