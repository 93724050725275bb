"""`tracescore serve` as a real process under real signals, spans counted end to end:
SIGTERM drains (held spans scored, everything forwarded, exit 0); SIGKILL loses nothing that was
acknowledged (the journal is forwarded by the next start); a bad config exits 2."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from _gateway_helpers import ANSWER, agent_attributes, plain_request
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracescore.testing import GatewayProcess, OTLPReceiver, Reply, StubLLMServer

pytestmark = pytest.mark.slow
_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _mixed_request(rng: random.Random, plain: int = 20, agents: int = 2) -> ExportTraceServiceRequest:
    """`plain` non-agent spans plus `agents` GenAI invoke_agent spans, in one request."""
    request = plain_request(plain, rng)
    spans = request.resource_spans[0].scope_spans[0].spans
    for index in range(agents):
        span = spans.add(name="invoke_agent geo", start_time_unix_nano=1, end_time_unix_nano=2)
        span.trace_id, span.span_id = rng.randbytes(16), rng.randbytes(8)
        for key, value in agent_attributes(question=f"question {index}?", answer=ANSWER).items():
            span.attributes.add(key=key).value.string_value = value
    return request


def _keys(request: ExportTraceServiceRequest) -> set[tuple[bytes, bytes]]:
    return {(s.trace_id, s.span_id) for rs in request.resource_spans for ss in rs.scope_spans
            for s in ss.spans}


def _received_keys(receiver: OTLPReceiver) -> list[tuple[bytes, bytes]]:
    return [(bytes.fromhex(s.trace_id), bytes.fromhex(s.span_id)) for s in receiver.spans]


def _config(tmp_path: Path, scorer: str = "{scorer: similarity}") -> Path:
    path = tmp_path / "gateway.yaml"
    path.write_text(f"scoring:\n  isolation: thread\n  scorers: [{scorer}]\n", encoding="utf-8")
    return path


def test_sigterm_drains_held_scoring_and_exits_0(tmp_path: Path, otlp_receiver: OTLPReceiver,
                                                 stub_llm: StubLLMServer) -> None:
    def slow_judge(request: dict[str, Any]) -> Reply:
        step = request.get("response_format", {}).get("json_schema", {}).get("name", "")
        if step.endswith("statements"):
            return Reply(content={"statements": [ANSWER]}, delay=1.0)
        if step.endswith("verdicts"):
            return Reply(content={"results": [{"result": "yes", "reason": "on topic"}]})
        return Reply(content={"reason": "The score is 1 because it answers."})

    stub_llm.responder = slow_judge
    scorer = ("{scorer: relevancy, options: {model: openai/judge-stub, api_base: '"
              + stub_llm.base_url + "', api_key: sk-test, timeout: 20}}")
    gateway = GatewayProcess(["--config", str(_config(tmp_path, scorer)),
                              "--endpoint", otlp_receiver.grpc_endpoint,
                              "--journal", str(tmp_path / "journal.db")]).start()
    rng = random.Random(7)
    sent: set[tuple[bytes, bytes]] = set()
    with grpc.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
        export = channel.unary_unary(_EXPORT)
        for _ in range(5):
            request = _mixed_request(rng, plain=10, agents=2)
            export(request.SerializeToString(), timeout=10)
            sent |= _keys(request)
    stub_llm.wait_for_requests(1, timeout=20)  # scoring has started: spans are held
    assert gateway.terminate(timeout_s=60) == 0
    received = _received_keys(otlp_receiver)
    assert sorted(received) == sorted(sent)  # each span once
    agents = otlp_receiver.spans_named("invoke_agent geo")
    assert len(agents) == 10
    assert all(s.events_named("gen_ai.evaluation.result") for s in agents)
    scored = [s for s in agents if s.events_named("gen_ai.evaluation.result")[0]
              .attributes.get("gen_ai.evaluation.score.value") == 1.0]
    assert scored  # drained in time: scores are on the spans, not only "unscored" events
    assert gateway.events("stopped")[-1]["drained"] is True


@pytest.mark.parametrize("next_hop", ["down", "up"])
def test_sigkill_loses_nothing_acknowledged(next_hop: str, tmp_path: Path) -> None:
    receiver = OTLPReceiver().start()
    if next_hop == "down":
        receiver.fail_next(1_000_000, status=503)
    gateway = GatewayProcess(["--config", str(_config(tmp_path)),
                              "--endpoint", receiver.grpc_endpoint,
                              "--journal", str(tmp_path / "journal.db"),
                              "--set", "limits.max_pending_spans=1000000"]).start()
    acknowledged: set[tuple[bytes, bytes]] = set()
    stop = threading.Event()

    def send() -> None:
        rng = random.Random(11)
        with grpc.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
            export = channel.unary_unary(_EXPORT)
            while not stop.is_set():
                request = _mixed_request(rng)
                try:
                    export(request.SerializeToString(), timeout=5)
                except grpc.RpcError:
                    return  # the gateway died: this request was not acknowledged
                acknowledged.update(_keys(request))

    thread = threading.Thread(target=send)
    thread.start()
    while len(acknowledged) < 2000 and thread.is_alive():
        thread.join(0.05)
    gateway.kill()
    stop.set()
    thread.join(10)
    if next_hop == "down":
        assert not receiver.spans
        receiver.clear()  # the next hop comes back
    gateway.restart()
    ours = set(acknowledged)
    deadline = time.monotonic() + 60
    while not ours <= set(_received_keys(receiver)) and time.monotonic() < deadline:
        time.sleep(0.2)
    received = _received_keys(receiver)
    assert ours <= set(received), f"{len(ours - set(received))} of {len(ours)} missing"
    duplicates = len(received) - len(set(received))
    if next_hop == "down":
        assert duplicates == 0  # nothing had been forwarded before the kill
    else:  # at least once: only what was forwarded but not yet removed from the journal
        assert duplicates <= 8192 * 2
    gateway.stop()
    receiver.stop()


def test_bad_config_exits_2_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text("exporter:\n  endpiont: http://x:4317\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "tracescore", "serve", "--config", str(path)],
                            check=False, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "exporter.endpiont" in result.stderr
