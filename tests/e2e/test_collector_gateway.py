"""Scoring scaled out behind the real collector, as collector_config/gateway-loadbalancing.yaml ships it.

app -> collector (loadbalancing, routing_key traceID, static resolver) -> 3 `tracescore serve`
replicas -> the same collector's `scored` receiver -> loopback OTLP receiver. Spans are counted:
each arrives exactly once, each sampled agent span carries its score once, the replicas share the
work; a replica SIGKILLed mid-run and started again loses nothing that was acknowledged; the
replicas' log records and metrics and the apps' own reach the backend too; and a Node.js agent
instrumented with the OpenTelemetry JS SDK is scored through the same path.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import grpc
import pytest
from _gateway_helpers import ANSWER, agent_attributes
from _helpers import npm_project
from _lb_ring import Ring, even_ring_ports
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from typing_extensions import Self

from tracescore import _semconv as sc
from tracescore.online._sampling import is_sampled
from tracescore.testing import GatewayProcess, OTLPReceiver, ReceivedSpan
from tracescore.testing._collector import OTelCollector
from tracescore.testing._tools import free_port

CONFIG_DIR = Path(__file__).resolve().parents[2] / "collector_config"
NODE_AGENT = Path(__file__).resolve().parents[1] / "node"
REPLICAS = 3
RATE = 0.5  # the scorer's sampling rate on every replica
_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # the first test may build the collector

Key = tuple[str, str]  # (trace id, span id), hex
# how the collector and the gateway say a port picked free was taken by another process meanwhile
_PORT_TAKEN = ("already in use", "cannot listen")


class Deployment:
    """A shipped gateway config's collector in front of and behind its gateways, all on loopback.

    gateway.yaml runs one replica; the loadbalancing configs run REPLICAS. Every replica scores
    with content similarity at `rate`; with `telemetry` it also sends its results as log records
    (the `log` sink) and its metrics every 0.2 s, to its forward endpoint as by default.
    """

    def __init__(self, tmp_path: Path, receiver: OTLPReceiver, config: str = "gateway-loadbalancing.yaml",
                 *, rate: float = RATE, overrides: dict[str, str] | None = None,
                 telemetry: bool = False) -> None:
        self._plan = (tmp_path, receiver, config, rate, overrides)
        self._telemetry = telemetry
        self._place()

    def _place(self) -> None:
        """Pick free ports for every process and build them (nothing starts yet)."""
        tmp_path, receiver, config, rate, overrides = self._plan
        scored_grpc, scored_http = free_port(), free_port()
        gateway_config = tmp_path / "gateway.yaml"
        sinks = ", sinks: [span, log]" if self._telemetry else ""
        telemetry = "telemetry: {metrics: true, interval_s: 0.2}\n" if self._telemetry else ""
        gateway_config.write_text(
            f"scoring:\n  isolation: thread\n  scorers: [{{scorer: similarity, rate: {rate}{sinks}}}]\n{telemetry}",
            encoding="utf-8",
        )
        balanced = config != "gateway.yaml"
        self.gateways = [
            GatewayProcess(
                ["--config", str(gateway_config), "--endpoint", f"http://127.0.0.1:{scored_grpc}",
                 "--journal", str(tmp_path / f"journal-{index}.db")],
                grpc_port=port, http_port=free_port(), health_port=free_port(),
            )
            for index, port in enumerate(even_ring_ports(REPLICAS) if balanced else [free_port()])
        ]
        self.ring = Ring([f"127.0.0.1:{g.grpc_port}" for g in self.gateways])
        env = {f"TRACESCORE_GATEWAY_{i + 1}": f"127.0.0.1:{g.grpc_port}" for i, g in enumerate(self.gateways)}
        env["TRACESCORE_GATEWAY_ENDPOINT"] = f"127.0.0.1:{self.gateways[0].grpc_port}"
        env["BACKEND_OTLP_ENDPOINT"] = receiver.grpc_address
        settings = {
            "receivers::otlp/scored::protocols::grpc::endpoint": f"127.0.0.1:{scored_grpc}",
            "receivers::otlp/scored::protocols::http::endpoint": f"127.0.0.1:{scored_http}",
        }
        if balanced:  # quicker retries than the shipped 5 s, so a restarted replica is found sooner
            retry = "exporters::load_balancing::protocol::otlp::retry_on_failure"
            settings.update({f"{retry}::initial_interval": "500ms", f"{retry}::max_interval": "2s"})
        self.collector = OTelCollector(CONFIG_DIR / config, env=env, overrides={**settings, **(overrides or {})})

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

    def __enter__(self) -> Self:
        for attempt in range(3):
            try:
                with ExitStack() as stack:
                    for gateway in self.gateways:
                        stack.enter_context(gateway)
                    stack.enter_context(self.collector)
                    self._stack = stack.pop_all()
                return self
            except RuntimeError as exc:  # a port was free when picked, taken before it was bound
                if attempt == 2 or not any(s in str(exc).lower() for s in _PORT_TAKEN):
                    raise
                self._place()
        raise AssertionError("unreachable")

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()


@pytest.fixture
def deployment(tmp_path: Path, otlp_receiver: OTLPReceiver) -> Iterator[Deployment]:
    with Deployment(tmp_path, otlp_receiver) as deployed:
        yield deployed


def _traces(rng: random.Random, count: int, *, children: int = 1,
            answer: Callable[[int], str] = lambda index: ANSWER) -> ExportTraceServiceRequest:
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
        for key, value in agent_attributes(question=question, answer=answer(index)).items():
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
        for _ in range(30):
            request = _traces(rng, 50)
            export(request.SerializeToString(), timeout=30)
            sent += _keys(request)
    received = otlp_receiver.wait_for_spans(len(sent), timeout=120)
    assert sorted(_received(otlp_receiver)) == sorted(sent)  # every span, exactly once
    assert len(received) == 3000

    agents = [s for s in received if s.name == "invoke_agent geo"]
    _assert_scored_once(agents)
    assert sum(is_sampled(int(a.trace_id, 16), RATE) for a in agents) > 0

    # trace-id routing: each replica received exactly the spans of the traces the ring gives it
    shares = deployment.received_by_replica()
    routed = Counter(deployment.ring.endpoint_for(bytes.fromhex(trace_id)) for trace_id, _ in sent)
    assert shares == [routed[f"127.0.0.1:{g.grpc_port}"] for g in deployment.gateways]
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
            while not stop.is_set() and len(acknowledged) < 20_000:
                request = _traces(rng, 10)
                try:
                    export(request.SerializeToString(), timeout=30)
                except grpc.RpcError:
                    continue  # refused: not acknowledged, the app would send it again
                acknowledged.extend(_keys(request))
                if len(acknowledged) >= 240:
                    enough.set()
                stop.wait(0.02)  # a steady stream (at most 500 spans/s), not a burst

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
        while len(acknowledged) < at_kill + during_outage + 240 and sender.is_alive():
            sender.join(0.05)  # and keeps flowing after the restart
    finally:
        stop.set()
        sender.join(120)
    assert during_outage > 0  # the collector kept acknowledging while a replica was down
    expected = set(acknowledged)
    # by id, not by count: a retried or replayed span arrives twice, and a count of arrivals
    # would be reached while spans still on their way (a retry's backoff) are not yet in
    otlp_receiver.wait_for_span_ids(expected, timeout=300)  # else TimeoutError: spans lost
    received = Counter(_received(otlp_receiver))
    print(f"after SIGKILL + restart: {len(expected & set(received))}/{len(expected)} acknowledged "
          f"spans arrived ({during_outage} acknowledged while a replica was down); "
          f"{sum(c - 1 for c in received.values())} delivered twice")


def test_a_replica_down_past_its_queue_is_refused_not_dropped(
    tmp_path: Path, otlp_receiver: OTLPReceiver
) -> None:
    """While a replica is down its share waits in its exporter's queue; once that is full the
    collector must refuse (retryable) what it cannot queue, never acknowledge and drop it."""
    queue = "exporters::load_balancing::protocol::otlp::sending_queue::queue_size"
    rng = random.Random(29)
    acknowledged: list[Key] = []
    refused: list[grpc.StatusCode] = []
    with Deployment(tmp_path, otlp_receiver, overrides={queue: "3"}) as deployment:
        victim = deployment.gateways[1]
        victim.kill()
        with grpc.insecure_channel(f"127.0.0.1:{deployment.collector.grpc_port}") as channel:
            export = channel.unary_unary(_EXPORT)
            for _ in range(30):
                request = _traces(rng, 10)
                try:
                    export(request.SerializeToString(), timeout=30)
                except grpc.RpcError as exc:
                    refused.append(exc.code())
                    continue
                acknowledged.extend(_keys(request))
                threading.Event().wait(0.25)  # apart, so no two requests share an export
        victim.restart()
        otlp_receiver.wait_for_span_ids(acknowledged, timeout=120)  # else TimeoutError: lost
    assert refused and set(refused) == {grpc.StatusCode.UNAVAILABLE}, refused
    print(f"replica down: {len(acknowledged) // 20} requests acknowledged and delivered, "
          f"{len(refused)} refused (UNAVAILABLE) once its queue was full")


def _send(deployment: Deployment, requests: list[ExportTraceServiceRequest]) -> list[Key]:
    sent: list[Key] = []
    with grpc.insecure_channel(f"127.0.0.1:{deployment.collector.grpc_port}") as channel:
        export = channel.unary_unary(_EXPORT)
        for request in requests:
            export(request.SerializeToString(), timeout=30)
            sent += _keys(request)
    return sent


def test_one_replica_behind_the_shipped_gateway_config(tmp_path: Path, otlp_receiver: OTLPReceiver) -> None:
    rng = random.Random(19)
    with Deployment(tmp_path, otlp_receiver, "gateway.yaml") as deployment:
        sent = _send(deployment, [_traces(rng, 25) for _ in range(4)])
        received = otlp_receiver.wait_for_spans(len(sent), timeout=120)
        assert deployment.received_by_replica() == [len(sent)]
    assert sorted(_received(otlp_receiver)) == sorted(sent)  # every span, exactly once
    assert len(received) == 200
    _assert_scored_once([s for s in received if s.name == "invoke_agent geo"])


@pytest.mark.parametrize("config", ["gateway.yaml", "gateway-loadbalancing.yaml", "gateway-tail-sampling.yaml"])
def test_log_records_and_metrics_reach_the_backend(
    config: str, tmp_path: Path, otlp_receiver: OTLPReceiver
) -> None:
    """The replicas' `log` sink records and metrics, sent where they forward spans, and the apps'
    own log records and metrics, sent to the collector's main receiver, all reach the backend;
    tail sampling leaves log records alone (it may drop their traces)."""
    request = _traces(random.Random(31), 6)
    agents = {(s.trace_id.hex(), s.span_id.hex()) for s in request.resource_spans[0].scope_spans[0].spans
              if s.name == "invoke_agent geo"}  # fmt: skip
    overrides = {"processors::tail_sampling::decision_wait": "1s"} if "tail" in config else None
    with Deployment(tmp_path, otlp_receiver, config, rate=1.0, telemetry=True,
                    overrides=overrides) as deployment:  # fmt: skip
        _send(deployment, [request])
        records = otlp_receiver.wait_for_logs(lambda r: r.event_name == sc.GEN_AI_EVALUATION_RESULT,
                                              count=len(agents), timeout=60)
        received = otlp_receiver.wait_for_metric("tracescore.gateway.received", timeout=60)
        otlp_receiver.wait_for_metric("tracescore.evaluation.scored", timeout=60)
        with grpc.insecure_channel(f"127.0.0.1:{deployment.collector.grpc_port}") as channel:
            channel.unary_unary(_EXPORT_LOGS)(_app_log().SerializeToString(), timeout=30)
            channel.unary_unary(_EXPORT_METRICS)(_app_metric().SerializeToString(), timeout=30)
        otlp_receiver.wait_for_logs(lambda r: r.body == "app log line", timeout=60)
        otlp_receiver.wait_for_metric("app.requests", timeout=60)
        # stopped while the collector is up: their last flush of telemetry finds it at once
        assert [gateway.terminate() for gateway in deployment.gateways] == [0] * len(deployment.gateways)
    assert {(r.trace_id, r.span_id) for r in records} == agents  # one result per agent call
    assert {r.resource["service.name"] for r in records} == {"tracescore-gateway"}
    assert received.resource["service.name"] == "tracescore-gateway"


_EXPORT_LOGS = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
_EXPORT_METRICS = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"


def _app_log() -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    record = request.resource_logs.add().scope_logs.add().log_records.add()
    record.body.string_value = "app log line"
    return request


def _app_metric() -> ExportMetricsServiceRequest:
    request = ExportMetricsServiceRequest()
    metric = request.resource_metrics.add().scope_metrics.add().metrics.add(name="app.requests")
    metric.gauge.data_points.add(as_int=1, time_unix_nano=1_700_000_000_000_000_000)
    return request


def test_content_log_records_go_through_the_gateway_to_their_span(
    tmp_path: Path, otlp_receiver: OTLPReceiver
) -> None:
    """gateway.yaml, an app whose agent spans have no content and whose prompts and answers are
    GenAI log events (the SDK's own OTLP exporters, to the collector): the content records take
    the gateway's way, the spans are scored, and every record, content or not, reaches the
    backend exactly once."""
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    with Deployment(tmp_path, otlp_receiver, "gateway.yaml", rate=1.0) as deployment:
        endpoint = f"http://127.0.0.1:{deployment.collector.grpc_port}"
        logs = LoggerProvider()
        logs.add_log_record_processor(SimpleLogRecordProcessor(
            OTLPLogExporter(endpoint=endpoint, insecure=True)))
        traces = TracerProvider()
        traces.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True)))
        logger, tracer = logs.get_logger("agent.app"), traces.get_tracer("agent.app")
        agents = []
        for index in range(6):
            with tracer.start_as_current_span("invoke_agent geo", attributes={
                    "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "geo"}) as span:
                logger.emit(event_name="gen_ai.user.message", body={"content": f"question {index}?"})
                logger.emit(body=f"app log line {index}")
                logger.emit(event_name="gen_ai.choice",
                            body={"index": 0, "message": {"role": "assistant", "content": ANSWER}})
            agents.append(f"{span.get_span_context().span_id:016x}")
        scored = otlp_receiver.wait_for_spans(
            lambda s: s.span_id in agents and any(e.name == sc.GEN_AI_EVALUATION_RESULT for e in s.events),
            count=len(agents), timeout=60)
        records = otlp_receiver.wait_for_logs(18, timeout=60)
        logs.shutdown()
        traces.shutdown()
        forwarded = [_metric(g, "tracescore_gateway_logs_forwarded_total") for g in deployment.gateways]
    assert sorted(s.span_id for s in scored) == sorted(agents)  # each once
    seen = Counter((r.span_id, r.event_name, json.dumps(r.body, sort_keys=True))
                   for r in otlp_receiver.logs)
    assert sum(seen.values()) == 18 and set(seen.values()) == {1}  # none lost, none twice
    assert {r.span_id for r in records if r.event_name} == set(agents)
    assert sum(forwarded) == 12  # the content records only went through the gateway


def _metric(gateway: GatewayProcess, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{gateway.health_port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return float(next(x for x in text.splitlines() if x.startswith(name + " ")).split()[-1])


OFF_TOPIC = "Bananas grow well in warm humid weather."  # content similarity 0.13 to the question


def test_gateway_before_tail_sampling_keeps_every_low_score(tmp_path: Path, otlp_receiver: OTLPReceiver) -> None:
    rng = random.Random(23)
    requests, per_request, low_every = 6, 50, 3

    def answer(index: int) -> str:
        return OFF_TOPIC if index % low_every == 0 else ANSWER

    overrides = {"processors::tail_sampling::decision_wait": "5s"}
    with Deployment(tmp_path, otlp_receiver, "gateway-tail-sampling.yaml", rate=1.0,
                    overrides=overrides) as deployment:  # fmt: skip
        sent = _send(deployment, [_traces(rng, per_request, answer=answer) for _ in range(requests)])
        # a last low-score trace: once it is through, every earlier trace has been decided
        (sentinel, _) = _send(deployment, [_traces(rng, 1, answer=lambda index: OFF_TOPIC)])
        otlp_receiver.wait_for_spans(lambda s: s.span_id == sentinel[1], timeout=120)

    scores = {}
    for agent in otlp_receiver.spans_named("invoke_agent geo"):
        (result,) = agent.events_named(sc.GEN_AI_EVALUATION_RESULT)  # rate 1: every one scored
        scores[agent.trace_id] = result.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE]
    sent_traces = {trace_id for trace_id, _ in sent}
    low = {t for t, score in scores.items() if score < 0.5} & sent_traces
    sent_low = requests * sum(answer(index) == OFF_TOPIC for index in range(per_request))
    assert len(low) == sent_low  # every low-score trace kept
    kept_good = len(scores.keys() & sent_traces) - len(low)
    good = requests * per_request - sent_low
    mean, sd = good * 0.1, (good * 0.1 * 0.9) ** 0.5
    assert mean - 5 * sd <= kept_good <= mean + 5 * sd, f"kept {kept_good}/{good} well-scored traces"
    kept_spans = Counter(trace_id for trace_id, _ in _received(otlp_receiver))
    assert all(kept_spans[t] == 2 for t in scores)  # a kept trace is kept whole (agent + chat)
    print(f"gateway + tail sampling kept {len(low)}/{len(low)} low-score traces and "
          f"{kept_good}/{good} = {kept_good / good:.1%} of the rest")


# --- a second language ------------------------------------------------------------------------


def _node_agent() -> Path:
    """tests/node with its npm dependencies installed once into the cache; its agent.mjs path."""
    return npm_project(NODE_AGENT, "agent.mjs", "node-agent")


def test_a_nodejs_agent_is_scored_through_the_collector(
    deployment: Deployment, otlp_receiver: OTLPReceiver
) -> None:
    questions = [f"What is the capital of {country}? ({i})" for i in range(8) for country in ("France", "Italy")]
    questions.append("What is the weather in France today?")
    agent = _node_agent()
    run = subprocess.run(
        ["node", str(agent), *questions],
        env={"PATH": os.environ["PATH"],
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
