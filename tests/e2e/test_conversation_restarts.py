"""Conversations in `tracescore serve` across SIGTERM and SIGKILL, over their bounds: every turn the
gateway acknowledged is in some result after the restart (generated conversations over
`max_conversations` and `max_turns`), and a version being judged at a SIGKILL is scored after
the restart (the stub judge slow at the kill)."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import grpc
import pytest
from _gateway_helpers import agent_attributes
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracescore import _semconv as sc
from tracescore.testing import GatewayProcess, OTLPReceiver, StubLLMServer
from tracescore.testing._stub_llm import Reply

pytestmark = pytest.mark.slow
TESTS = Path(__file__).resolve().parents[1]
_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
Key = tuple[str, str]  # a turn: (trace id, span id) in hex


def _start(folder: Path, receiver: OTLPReceiver, scorer: str, conversations: str
           ) -> GatewayProcess:
    config = folder / "gateway.yaml"
    config.write_text(f"scoring:\n  isolation: thread\n  scorers:\n    - {scorer}\n"
                      f"conversations: {conversations}\n", encoding="utf-8")
    env = {"PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    return GatewayProcess(["--config", str(config), "--endpoint", receiver.grpc_endpoint,
                           "--journal", str(folder / "journal.db")], env=env).start()


def _send(gateway: GatewayProcess, turns: list[str], rng: random.Random, per_request: int = 8
          ) -> set[Key]:
    """One agent span per turn (each a trace of its own, `turns` naming its conversation, in
    the order they ended), `per_request` to a request; the turns acknowledged."""
    sent: set[Key] = set()
    now = time.time_ns()
    with grpc.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
        export = channel.unary_unary(_EXPORT)
        for start in range(0, len(turns), per_request):
            request = ExportTraceServiceRequest()
            spans = request.resource_spans.add().scope_spans.add().spans
            for index, conversation in enumerate(turns[start:start + per_request], start):
                span = spans.add(name="invoke_agent geo", start_time_unix_nano=now + index,
                                 end_time_unix_nano=now + index + 1)
                span.trace_id, span.span_id = rng.randbytes(16), rng.randbytes(8)
                attributes = {**agent_attributes(question=f"{conversation} question {index}?"),
                              "session.id": conversation}
                for key, value in attributes.items():
                    span.attributes.add(key=key).value.string_value = value
                sent.add((span.trace_id.hex(), span.span_id.hex()))
            export(request.SerializeToString(), timeout=30)  # acknowledged
    return sent


def _judged(receiver: OTLPReceiver) -> tuple[set[Key], list[dict[str, object]]]:
    """The turns some conversation result judged (its carrier's parent and links), and the
    results."""
    turns: set[Key] = set()
    results: list[dict[str, object]] = []
    for span in list(receiver.spans):
        if not span.attributes.get(sc.TS_EVALUATION_CARRIER):
            continue
        turns.add((span.trace_id, span.parent_span_id or ""))
        turns.update((link.trace_id, link.span_id) for link in span.links)
        results.extend(e.attributes for e in span.events_named(sc.GEN_AI_EVALUATION_RESULT))
    return turns, results


def _wait_judged(receiver: OTLPReceiver, sent: set[Key], timeout_s: float) -> set[Key]:
    deadline = time.monotonic() + timeout_s
    while True:
        missing = sent - _judged(receiver)[0]
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(0.2)


def _stop(gateway: GatewayProcess, stop: signal.Signals) -> None:
    if stop == signal.SIGKILL:
        gateway.kill()
    else:
        gateway.terminate(timeout_s=60)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_every_acknowledged_turn_is_judged_after_a_restart_over_the_bounds(
        stop: signal.Signals, tmp_path: Path, otlp_receiver: OTLPReceiver) -> None:
    """40 conversations of 8 turns, interleaved, against `max_conversations: 20` and
    `max_turns: 4`: versions are let go by both bounds while turns still arrive; the gateway
    stops right after the last acknowledgement."""
    rng = random.Random(int(stop))
    queues = {f"chat-{n}": 8 for n in range(40)}
    turns: list[str] = []
    while queues:
        conversation = rng.choice(sorted(queues))
        turns.append(conversation)
        queues[conversation] -= 1
        if not queues[conversation]:
            del queues[conversation]
    scorer = "{scorer: '_conversation_scorers:TurnCounter'}"
    bounds = "{quiet_s: 1, max_conversations: 20, max_turns: 4}"
    gateway = _start(tmp_path, otlp_receiver, scorer, bounds)
    try:
        sent = _send(gateway, turns, rng)
        _stop(gateway, stop)
        gateway.restart()
        missing = _wait_judged(otlp_receiver, sent, timeout_s=60)
        assert not missing, f"{len(missing)} of {len(sent)} acknowledged turns never judged"
    finally:
        gateway.stop()


def test_a_version_being_judged_at_a_sigkill_is_judged_after_the_restart(
        tmp_path: Path, otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer) -> None:
    stub_llm.default_reply = Reply(content={"satisfied": True, "reasoning": "answered"},
                                   delay=30.0)  # still judging at the kill
    scorer = ("{scorer: multi-turn-judge, options: {criterion: The user got an answer., "
              f"model: openai/judge-stub, api_base: '{stub_llm.base_url}', api_key: sk-test}}}}")
    gateway = _start(tmp_path, otlp_receiver, scorer, "{quiet_s: 0.5}")
    try:
        sent = _send(gateway, ["chat-a", "chat-b", "chat-a", "chat-b"], random.Random(3))
        stub_llm.wait_for_requests(2, timeout=30)  # both conversations are being judged
        gateway.kill()
        stub_llm.default_reply = {"satisfied": True, "reasoning": "answered"}
        gateway.restart()
        assert not _wait_judged(otlp_receiver, sent, timeout_s=60)
        results = _judged(otlp_receiver)[1]
        assert sorted((r[sc.GEN_AI_CONVERSATION_ID], r[sc.TS_CONVERSATION_TURNS])
                      for r in results) == [("chat-a", 2), ("chat-b", 2)]
    finally:
        gateway.stop()
