"""Three `tracescore serve` replicas share one Redis: the fleet's run limit holds for the judge
(the stub received only the admitted runs' requests), and with Redis stopped midway each replica
falls back to its share of the limit, counted and logged."""

from __future__ import annotations

import random
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
from _gateway_helpers import ANSWER, agent_attributes, plain_request
from _redis import RedisServer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracescore.testing import GatewayProcess, OTLPReceiver, Reply, StubLLMServer

pytestmark = pytest.mark.slow
_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
_LIMIT = 6  # runs a minute for the fleet; `share`: 2 per replica while Redis is down
_AGENT = "invoke_agent geo"


def _agents(rng: random.Random, count: int) -> ExportTraceServiceRequest:
    request = plain_request(0, rng)
    spans = request.resource_spans[0].scope_spans[0].spans
    for index in range(count):
        span = spans.add(name=_AGENT, start_time_unix_nano=1, end_time_unix_nano=2)
        span.trace_id, span.span_id = rng.randbytes(16), rng.randbytes(8)
        for key, value in agent_attributes(question=f"question {index}?", answer=ANSWER).items():
            span.attributes.add(key=key).value.string_value = value
    return request


def _send(replicas: list[GatewayProcess], rng: random.Random, per_replica: int) -> None:
    for gateway in replicas:
        with grpc.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
            channel.unary_unary(_EXPORT)(_agents(rng, per_replica).SerializeToString(), timeout=10)


def _scored(receiver: OTLPReceiver, total: int) -> int:
    deadline = time.monotonic() + 60
    while len(receiver.spans_named(_AGENT)) < total:
        assert time.monotonic() < deadline, "agent spans not forwarded"
        time.sleep(0.05)
    return sum(1 for s in receiver.spans_named(_AGENT) for e in s.events_named(
        "gen_ai.evaluation.result") if "gen_ai.evaluation.score.value" in e.attributes)


def _judge(request: dict[str, Any]) -> Reply:
    step = request.get("response_format", {}).get("json_schema", {}).get("name", "")
    if step.endswith("statements"):
        return Reply(content={"statements": [ANSWER]})
    if step.endswith("verdicts"):
        return Reply(content={"results": [{"result": "yes", "reason": "on topic"}]})
    return Reply(content={"reason": "The score is 1 because it answers."})


def test_three_replicas_hold_one_limit_and_fall_back_to_shares_without_redis(
        tmp_path: Path, otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer) -> None:
    stub_llm.responder = _judge
    redis_server = RedisServer()
    redis_server.start()
    config = tmp_path / "gateway.yaml"
    config.write_text(
        "scoring:\n  isolation: thread\n  scorers:\n    - scorer: relevancy\n"
        f"      options: {{model: openai/judge-stub, api_base: '{stub_llm.base_url}',"
        " api_key: sk-test, timeout: 20}\n"
        f"      fleet: {{redis_url: '{redis_server.url}', requests_per_minute: {_LIMIT},"
        " on_unreachable: share, replicas: 3}\n", encoding="utf-8")
    replicas = [GatewayProcess(["--config", str(config), "--endpoint", otlp_receiver.grpc_endpoint,
                                "--journal", str(tmp_path / f"journal-{i}.db")]).start()
                for i in range(3)]
    try:
        rng = random.Random(3)
        _send(replicas, rng, per_replica=6)  # 18 runs offered, 6 a minute allowed
        assert _scored(otlp_receiver, 18) == _LIMIT
        judged = len(stub_llm.requests)
        assert 0 < judged <= _LIMIT * 3  # relevancy: at most 3 judge requests a run

        redis_server.stop()  # midway: each replica keeps 1/3 of the limit
        _send(replicas, rng, per_replica=6)
        assert _scored(otlp_receiver, 36) == _LIMIT + 3 * (_LIMIT // 3)
        assert len(stub_llm.requests) <= 2 * _LIMIT * 3
        for gateway in replicas:  # the fallback is logged and counted on every replica
            with urllib.request.urlopen(f"http://127.0.0.1:{gateway.health_port}/metrics",
                                        timeout=5) as reply:
                text = reply.read().decode()
            assert re.search(r"^tracescore_gateway_fleet_redis_unreachable [1-9]", text,
                             re.MULTILINE)
            assert any("Redis unreachable" in str(entry) and "on_unreachable=share" in str(entry)
                       for entry in gateway.logs)
    finally:
        for gateway in replicas:
            gateway.terminate(timeout_s=60)
        redis_server.stop()
