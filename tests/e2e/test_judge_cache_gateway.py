"""Two `tracescore serve` replicas with one judge cache in a real Redis: the same agent call
sent to both is judged once (its scoring process reads the cache), and scored on both."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from _gateway_helpers import ANSWER, agent_attributes, plain_request
from _redis import RedisServer, redis
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracescore.scoring._judge_cache import CachedJudge, cache_judge
from tracescore.testing import GatewayProcess, OTLPReceiver, StubLLMServer
from tracescore.testing._stub_llm import Reply

pytestmark = pytest.mark.slow
_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
_AGENT = "invoke_agent geo"


def _agent(rng: random.Random) -> bytes:
    request: ExportTraceServiceRequest = plain_request(0, rng)
    span = request.resource_spans[0].scope_spans[0].spans.add(
        name=_AGENT, start_time_unix_nano=1, end_time_unix_nano=2)
    span.trace_id, span.span_id = rng.randbytes(16), rng.randbytes(8)
    for key, value in agent_attributes(answer=ANSWER).items():
        span.attributes.add(key=key).value.string_value = value
    return request.SerializeToString()


def _judge(request: dict[str, Any]) -> Reply:
    step = request.get("response_format", {}).get("json_schema", {}).get("name", "")
    if step.endswith("statements"):
        return Reply(content={"statements": [ANSWER]})
    if step.endswith("verdicts"):
        return Reply(content={"results": [{"result": "yes", "reason": "on topic"}]})
    return Reply(content={"reason": "The score is 1 because it answers."})


def test_two_replicas_share_one_judge_cache(tmp_path: Path, otlp_receiver: OTLPReceiver,
                                            stub_llm: StubLLMServer) -> None:
    from tracescore import AnswerRelevancyScorer

    stub_llm.responder = _judge
    server = RedisServer()
    server.start()
    config = tmp_path / "gateway.yaml"
    config.write_text(
        "scoring:\n  max_wait_s: 120\n  scorers:\n    - scorer: relevancy\n"
        f"      options: {{model: openai/judge-stub, api_base: '{stub_llm.base_url}',"
        " api_key: sk-test, timeout: 20}\n"
        f"      judge_cache: {{redis_url: '{server.url}', ttl_s: 600}}\n", encoding="utf-8")
    replicas = [GatewayProcess(["--config", str(config), "--endpoint", otlp_receiver.grpc_endpoint,
                                "--journal", str(tmp_path / f"journal-{i}.db")]).start()
                for i in range(2)]
    try:
        rng = random.Random(7)
        for count, gateway in enumerate(replicas, start=1):  # one after the other
            with grpc.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
                channel.unary_unary(_EXPORT)(_agent(rng), timeout=10)
            deadline = time.monotonic() + 150  # held until scored (a scoring process starts)
            while len(otlp_receiver.spans_named(_AGENT)) < count:
                assert time.monotonic() < deadline, "agent span not forwarded"
                time.sleep(0.05)
        scores = [e.attributes.get("gen_ai.evaluation.score.value")
                  for s in otlp_receiver.spans_named(_AGENT)
                  for e in s.events_named("gen_ai.evaluation.result")]
        assert scores == [1.0, 1.0]
        assert len(stub_llm.requests) == 3  # the second replica's three steps: from the cache
        namespace = cache_judge(AnswerRelevancyScorer(  # the gateway's scorer, built alike
            model="openai/judge-stub", api_base=stub_llm.base_url, api_key="sk-test",
            timeout=20), server.url).judge
        assert isinstance(namespace, CachedJudge)
        stats = redis.Redis.from_url(server.url).hgetall(f"{namespace._tag}:stats")
        assert int(stats[b"hits"]) == 3 and int(stats[b"misses"]) == 3
    finally:
        for gateway in replicas:
            gateway.terminate(timeout_s=60)
        server.stop()
