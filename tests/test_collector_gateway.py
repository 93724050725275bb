"""Scoring scaled out behind the real collector, as collector_config/gateway-loadbalancing.yaml ships it.

app -> collector (loadbalancing, routing_key traceID, static resolver) -> 3 `tracescore serve`
replicas -> the same collector's `scored` receiver -> loopback OTLP receiver. Spans are counted:
each arrives exactly once, each sampled agent span carries its score once, the replicas share the
work; a replica SIGKILLed mid-run and started again loses nothing that was acknowledged; and a
Node.js agent instrumented with the OpenTelemetry JS SDK is scored through the same path.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess
import threading
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import grpc
import pytest
from _gateway_helpers import ANSWER, agent_attributes
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracescore import _semconv as sc
from tracescore.online._sampling import is_sampled
from tracescore.testing import GatewayProcess, OTLPReceiver, ReceivedSpan
from tracescore.testing._collector import Collector
from tracescore.testing._tools import _file_lock, cache_dir, free_port

CONFIG = Path(__file__).resolve().parent.parent / "collector_config" / "gateway-loadbalancing.yaml"
NODE_AGENT = Path(__file__).resolve().parent / "node"
REPLICAS = 3
RATE = 0.5  # the scorer's sampling rate on every replica
_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # the first test may build the collector

Key = tuple[str, str]  # (trace id, span id), hex


class Deployment:
    """The collector in front of and behind REPLICAS gateways, all on loopback."""

    def __init__(self, tmp_path: Path, receiver: OTLPReceiver) -> None:
        scored_grpc, scored_http = free_port(), free_port()
        config = tmp_path / "gateway.yaml"
        config.write_text(
            f"scoring:\n  isolation: thread\n  scorers: [{{scorer: similarity, rate: {RATE}}}]\n",
            encoding="utf-8",
        )
        self.gateways = [
            GatewayProcess(
                ["--config", str(config), "--endpoint", f"http://127.0.0.1:{scored_grpc}",
                 "--journal", str(tmp_path / f"journal-{index}.db")],
                grpc_port=free_port(), http_port=free_port(), health_port=free_port(),
            )
            for index in range(REPLICAS)
        ]
        env = {f"TRACESCORE_GATEWAY_{i + 1}": f"127.0.0.1:{g.grpc_port}" for i, g in enumerate(self.gateways)}
        env["BACKEND_OTLP_ENDPOINT"] = receiver.grpc_address
        self.collector = Collector(
            CONFIG,
            env=env,
            overrides={
                "receivers::otlp/scored::protocols::grpc::endpoint": f"127.0.0.1:{scored_grpc}",
                "receivers::otlp/scored::protocols::http::endpoint": f"127.0.0.1:{scored_http}",
                # quicker retries than the shipped 5 s, so a restarted replica is found sooner
                "exporters::loadbalancing::protocol::otlp::retry_on_failure::initial_interval": "500ms",
                "exporters::loadbalancing::protocol::otlp::retry_on_failure::max_interval": "2s",
            },
        )

    def received_by_replica(self) -> list[float]:
        """Each replica's count of spans received (its Prometheus counter)."""
        counts = []
        for gateway in self.gateways:
            url = f"http://127.0.0.1:{gateway.health_port}/metrics"
            with urllib.request.urlopen(url, timeout=10) as response:
                text = response.read().decode()
            line = next(x for x in text.splitlines() if x.startswith("tracescore_gateway_received_total"))
            counts.append(float(line.split()[-1]))
        return counts


@pytest.fixture
def deployment(tmp_path: Path, otlp_receiver: OTLPReceiver) -> Iterator[Deployment]:
    deployed = Deployment(tmp_path, otlp_receiver)
    with ExitStack() as stack:
        for gateway in deployed.gateways:
            stack.enter_context(gateway)
        stack.enter_context(deployed.collector)
        yield deployed


def _traces(rng: random.Random, count: int, *, children: int = 1) -> ExportTraceServiceRequest:
    """`count` traces, each an agent span (GenAI semconv) with `children` chat child spans."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.add(key="service.name").value.string_value = "python-app"
    spans = resource_spans.scope_spans.add().spans
    for index in range(count):
        trace_id, agent_id = rng.randbytes(16), rng.randbytes(8)
        agent = spans.add(name="invoke_agent geo", kind=1, trace_id=trace_id, span_id=agent_id,
                          start_time_unix_nano=1_700_000_000_000_000_000,
                          end_time_unix_nano=1_700_000_000_900_000_000)  # fmt: skip
        question = f"What is the capital of France? ({index})"
        for key, value in agent_attributes(question=question, answer=ANSWER).items():
            agent.attributes.add(key=key).value.string_value = value
        for child in range(children):
            span = spans.add(name=f"chat step-{child}", kind=3, trace_id=trace_id,
                             span_id=rng.randbytes(8), parent_span_id=agent_id,
                             start_time_unix_nano=1_700_000_000_100_000_000,
                             end_time_unix_nano=1_700_000_000_200_000_000)  # fmt: skip
            span.attributes.add(key="gen_ai.operation.name").value.string_value = "chat"
    return request


def _keys(request: ExportTraceServiceRequest) -> list[Key]:
    return [(s.trace_id.hex(), s.span_id.hex()) for rs in request.resource_spans
            for ss in rs.scope_spans for s in ss.spans]  # fmt: skip


def _received(receiver: OTLPReceiver) -> list[Key]:
    return [(s.trace_id, s.span_id) for s in receiver.spans]


def _assert_scored_once(agents: list[ReceivedSpan]) -> None:
    for agent in agents:
        results = agent.events_named(sc.GEN_AI_EVALUATION_RESULT)
        if is_sampled(int(agent.trace_id, 16), RATE):
            (result,) = results  # a sampled agent span carries its score exactly once
            assert result.attributes[sc.TS_SCORER_ID] == "content-similarity"
            assert 0.0 <= result.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] <= 1.0
        else:
            assert results == []


def test_three_replicas_behind_loadbalancing_each_span_once_shares_even(
    deployment: Deployment, otlp_receiver: OTLPReceiver
) -> None:
    rng = random.Random(13)
    sent: list[Key] = []
    with grpc.insecure_channel(f"127.0.0.1:{deployment.collector.grpc_port}") as channel:
        export = channel.unary_unary(_EXPORT)
        for _ in range(12):
            request = _traces(rng, 20)
            export(request.SerializeToString(), timeout=30)
            sent += _keys(request)
    received = otlp_receiver.wait_for_spans(len(sent), timeout=120)
    assert sorted(_received(otlp_receiver)) == sorted(sent)  # every span, exactly once
    assert len(received) == 480

    agents = [s for s in received if s.name == "invoke_agent geo"]
    _assert_scored_once(agents)
    assert sum(is_sampled(int(a.trace_id, 16), RATE) for a in agents) > 0

    # trace-id routing: a trace's spans were forwarded together, by one replica
    shares = deployment.received_by_replica()
    assert sum(shares) == len(sent)
    for share in shares:
        assert abs(share - len(sent) / REPLICAS) <= 0.2 * len(sent) / REPLICAS, shares
    print(f"replica shares of {len(sent)} spans: {shares}")


def test_a_replica_killed_mid_run_loses_nothing_acknowledged(
    deployment: Deployment, otlp_receiver: OTLPReceiver
) -> None:
    acknowledged: list[Key] = []
    enough = threading.Event()
    stop = threading.Event()

    def send() -> None:
        rng = random.Random(17)
        with grpc.insecure_channel(f"127.0.0.1:{deployment.collector.grpc_port}") as channel:
            export = channel.unary_unary(_EXPORT)
            while not stop.is_set() and len(acknowledged) < 3000:
                request = _traces(rng, 10)
                try:
                    export(request.SerializeToString(), timeout=30)
                except grpc.RpcError:
                    continue  # refused: not acknowledged, the app would send it again
                acknowledged.extend(_keys(request))
                if len(acknowledged) >= 240:
                    enough.set()

    sender = threading.Thread(target=send)
    sender.start()
    try:
        assert enough.wait(120)
        victim = deployment.gateways[1]
        victim.kill()
        at_kill = len(acknowledged)
        stop.wait(2)  # traffic keeps flowing while the replica is down
        victim.restart()
        during_outage = len(acknowledged) - at_kill
    finally:
        stop.set()
        sender.join(120)
    assert during_outage > 0  # the collector kept acknowledging while a replica was down
    expected = set(acknowledged)
    otlp_receiver.wait_for_spans(
        lambda s: (s.trace_id, s.span_id) in expected, count=len(expected), timeout=300
    )
    received = Counter(_received(otlp_receiver))
    missing = expected - set(received)
    assert not missing, f"{len(missing)} acknowledged spans lost"
    print(f"after SIGKILL + restart: {len(expected & set(received))}/{len(expected)} acknowledged "
          f"spans arrived ({during_outage} acknowledged while a replica was down); "
          f"{sum(c - 1 for c in received.values())} delivered twice")


# --- a second language ------------------------------------------------------------------------


def _node_agent() -> Path:
    """tests/node with its npm dependencies installed once into the cache; its agent.mjs path."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("the Node.js agent needs node and npm (apt-get install nodejs npm)")
    lock = (NODE_AGENT / "package-lock.json").read_bytes()
    home = cache_dir() / f"node-agent-{hashlib.sha256(lock).hexdigest()[:16]}"
    with _file_lock(cache_dir() / f"{home.name}.lock"):
        if not (home / "node_modules" / ".tracescore-ready").exists():
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            for name in ("package.json", "package-lock.json"):
                shutil.copy(NODE_AGENT / name, home / name)
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                           cwd=home, check=True, timeout=600)  # fmt: skip
            (home / "node_modules" / ".tracescore-ready").write_text("")
        shutil.copy(NODE_AGENT / "agent.mjs", home / "agent.mjs")
    return home / "agent.mjs"


def test_a_nodejs_agent_is_scored_through_the_collector(
    deployment: Deployment, otlp_receiver: OTLPReceiver
) -> None:
    questions = [f"What is the capital of {country}? ({i})" for i in range(8) for country in ("France", "Italy")]
    questions.append("What is the weather in France today?")
    agent = _node_agent()
    run = subprocess.run(
        ["node", str(agent), *questions],
        env={"PATH": "/usr/bin:/bin:/usr/local/bin",
             "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{deployment.collector.http_endpoint}/v1/traces"},
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    calls = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(calls) == len(questions)

    agents = otlp_receiver.wait_for_spans(lambda s: s.name == "invoke_agent travel", count=len(calls), timeout=120)
    chats = otlp_receiver.wait_for_spans(lambda s: s.name == "chat gpt-4o-mini", count=len(calls), timeout=30)
    assert {(a.trace_id, a.span_id) for a in agents} == {(c["trace_id"], c["span_id"]) for c in calls}
    assert all(a.resource["service.name"] == "node-travel-agent" for a in agents)
    assert all(a.scope_name == "node-travel-agent" for a in agents)
    assert {c.parent_span_id for c in chats} == {a.span_id for a in agents}
    _assert_scored_once(agents)
    scored = [a for a in agents if a.events_named(sc.GEN_AI_EVALUATION_RESULT)]
    assert scored, "no Node.js agent span was sampled"
    for span in scored:
        (result,) = span.events_named(sc.GEN_AI_EVALUATION_RESULT)
        call = next(c for c in calls if c["span_id"] == span.span_id)
        assert call["answer"] in span.attributes["gen_ai.output.messages"]
        assert result.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] > 0  # answer shares words with question
