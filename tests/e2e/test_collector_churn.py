"""Replicas come and go under load, behind the real collector, found by its `dns` resolver.

The collector runs collector_config/gateway-loadbalancing.yaml with its `static` resolver
swapped for the `dns` resolver (as deploy/kubernetes/collector.yaml uses it), re-resolving a
hostname every second. The hostname is this test's own lines in /etc/hosts, one loopback address
per replica (each replica's gRPC receiver on its own 127.0.0.x, all on one port); the
collector's Go resolver reads /etc/hosts again when it changes, so rewriting those lines is
adding and removing replicas, as a headless Service's endpoints change on Kubernetes.

Two agents send all along (OTel SDK, one export per span). Two replicas, then a third is
listed, then the first is unlisted and sent SIGTERM, then the second is killed (SIGKILL) and
started again on its journal while still listed. Proven at the end: the resolver followed
(the third got nothing before it was listed and traffic after; the first got nothing after it
was unlisted), every span the collector acknowledged reached the backend (at least once;
duplicates counted), every agent call arrived scored by the similarity scorer or marked
unscored with a reason, never with two results of one scorer, no agent call judged twice, and
the fleet limit in Redis held for the three replicas together (the stub judge saw at most the
limit's runs).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from _gateway_helpers import ANSWER, agent_attributes, sender
from _redis import RedisServer
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from tracescore import _semconv as sc
from tracescore.testing import GatewayProcess, OTLPReceiver, StubLLMServer
from tracescore.testing._collector import OTelCollector
from tracescore.testing._stub_llm import Reply
from tracescore.testing._tools import free_port

TESTS = Path(__file__).resolve().parents[1]
CONFIG = TESTS.parent / "collector_config" / "gateway-loadbalancing.yaml"
HOSTS = Path("/etc/hosts")
HOSTNAME = f"tracescore-churn-{os.getpid()}.test"
TAG = f"# {HOSTNAME} (tests/e2e/test_collector_churn.py)"
ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
LIMIT = 8  # relevancy runs a minute for the whole fleet
AGENTS, PAUSE_S = 2, 0.15  # two agents, each one call every PAUSE_S
FOLLOW_S = 30.0  # the resolver re-resolves every 1 s; Go re-reads /etc/hosts within 5 s
_AGENT = "invoke_agent geo"
_RUN = re.compile(r"churn-call-\d+-\d+")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

Key = tuple[str, str]  # (trace id, span id), hex


@contextmanager
def hosts_lines() -> Iterator[Any]:
    """A setter of this test's lines in /etc/hosts (every other line left as it is), removed at
    the end. Written in place: /etc/hosts may be a bind mount that cannot be replaced."""
    def write(addresses: Sequence[str]) -> None:
        kept = [line for line in HOSTS.read_text(encoding="utf-8").splitlines() if not line.endswith(TAG)]
        ours = [f"{address} {HOSTNAME} {TAG}" for address in addresses]
        with HOSTS.open("r+", encoding="utf-8") as hosts:
            hosts.seek(0)
            hosts.write("\n".join(kept + ours) + "\n")
            hosts.truncate()

    try:
        yield write
    finally:
        write([])
        assert not any(line.endswith(TAG) for line in HOSTS.read_text(encoding="utf-8").splitlines())


class Recorded(SpanExporter):
    """An OTLP exporter that keeps the ids of the spans the collector acknowledged."""

    def __init__(self, endpoint: str) -> None:
        self._inner = OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=10)
        self.acknowledged: list[Key] = []
        self.refused: list[Key] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self._inner.export(spans)
        keys = [(f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}") for s in spans if s.context]
        (self.acknowledged if result is SpanExportResult.SUCCESS else self.refused).extend(keys)
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()


def _agent(number: int, endpoint: str, stop: threading.Event, exporters: list[Recorded]) -> None:
    """One agent: a call (an agent span over a chat span) every PAUSE_S until `stop`."""
    exporter = Recorded(endpoint)
    exporters.append(exporter)
    with sender(exporter, service=f"agent-{number}") as tracer:
        call = 0
        while not stop.is_set():
            run = f"churn-call-{number}-{call}"
            attributes = agent_attributes(question=f"What is the capital of France? ({run})",
                                          answer=f"{ANSWER} ({run})")
            with (tracer.start_as_current_span(_AGENT, attributes=attributes),
                  tracer.start_as_current_span("chat gpt-4o-mini", attributes={"gen_ai.operation.name": "chat"})):
                pass
            call += 1
            stop.wait(PAUSE_S)


class Judge:
    """The stub judge's replies for relevancy, and which call each request judged."""

    def __init__(self) -> None:
        self.requests: list[tuple[float, str, str]] = []  # (time, step, call)
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        step = request.get("response_format", {}).get("json_schema", {}).get("name", "")
        found = _RUN.search(json.dumps(request))
        with self._lock:
            self.requests.append((time.monotonic(), step, found.group(0) if found else ""))
        if step.endswith("statements"):
            return Reply(content={"statements": [ANSWER]})
        if step.endswith("verdicts"):
            return Reply(content={"results": [{"result": "yes", "reason": "on topic"}]})
        return Reply(content={"reason": "The score is 1 because it answers."})


def _received(gateway: GatewayProcess) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{gateway.health_port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    line = next(x for x in text.splitlines() if x.startswith("tracescore_gateway_received_total"))
    return float(line.split()[-1])


def _until(condition: Any, what: str, timeout: float = FOLLOW_S) -> float:
    """Seconds until `condition()` holds; fails after `timeout`."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout, what
        time.sleep(0.2)
    return time.monotonic() - start


def _steady(gateway: GatewayProcess, quiet_s: float = 4.0) -> bool:
    """True once `gateway` received nothing new for `quiet_s` (while the agents go on)."""
    before = _received(gateway)
    time.sleep(quiet_s)
    return _received(gateway) == before


def test_replicas_added_and_removed_under_load_lose_nothing_and_hold_the_fleet_limit(
        tmp_path: Path, otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer) -> None:
    judge = Judge()
    stub_llm.responder = judge
    redis_server = RedisServer()
    redis_server.start()
    port, scored = free_port(), free_port()
    gateway_config = tmp_path / "gateway.yaml"
    gateway_config.write_text(
        "scoring:\n  isolation: thread\n  scorers:\n    - {scorer: similarity, rate: 1}\n"
        "    - scorer: relevancy\n      rate: 1\n"
        f"      options: {{model: openai/judge-stub, api_base: '{stub_llm.base_url}',"
        " api_key: sk-test, timeout: 20}\n"
        f"      fleet: {{redis_url: '{redis_server.url}', requests_per_minute: {LIMIT}}}\n",
        encoding="utf-8")
    replicas = [GatewayProcess(["--config", str(gateway_config), "--endpoint", f"http://127.0.0.1:{scored}",
                                "--journal", str(tmp_path / f"replica-{i}.db"), "--grpc", f"{address}:{port}"])
                for i, address in enumerate(ADDRESSES)]
    collector_config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    collector_config["exporters"]["load_balancing"]["resolver"] = {
        "dns": {"hostname": HOSTNAME, "port": str(port), "interval": "1s", "timeout": "1s"}}
    (tmp_path / "collector.yaml").write_text(yaml.safe_dump(collector_config), encoding="utf-8")
    collector = OTelCollector(tmp_path / "collector.yaml", env={"BACKEND_OTLP_ENDPOINT": otlp_receiver.grpc_address},
                              overrides={
        "receivers::otlp/scored::protocols::grpc::endpoint": f"127.0.0.1:{scored}",
        "receivers::otlp/scored::protocols::http::endpoint": f"127.0.0.1:{free_port()}"})
    stop = threading.Event()
    exporters: list[Recorded] = []
    agents = [threading.Thread(target=_agent, args=(n, f"127.0.0.1:{collector.grpc_port}", stop, exporters))
              for n in range(AGENTS)]
    first, second, third = replicas
    timings: dict[str, float] = {}
    started = time.monotonic()
    with hosts_lines() as list_replicas:
        try:
            for replica in replicas:
                replica.start()
            list_replicas(ADDRESSES[:2])
            collector.start()
            for agent in agents:
                agent.start()
            _until(lambda: _received(first) > 0 and _received(second) > 0, "two replicas get traffic")
            time.sleep(3)
            assert _received(third) == 0  # running, but not listed: the collector does not know it

            list_replicas(ADDRESSES)  # a third replica
            timings["added seen after s"] = _until(lambda: _received(third) > 0, "the third is followed")
            time.sleep(3)

            list_replicas(ADDRESSES[1:])  # the first leaves: unlisted, then SIGTERM (it drains)
            unlisted = time.monotonic()
            _until(lambda: _steady(first), "the first is no longer routed to", timeout=FOLLOW_S + 10)
            timings["removed seen within s"] = time.monotonic() - unlisted
            assert first.terminate(timeout_s=60) == 0
            growing = (_received(second), _received(third))
            time.sleep(4)
            assert _received(second) > growing[0] and _received(third) > growing[1]

            second.kill()  # SIGKILL, still listed: the collector keeps its share queued
            time.sleep(2)
            second.restart()  # same address and journal: replays it, then takes the queue
            timings["restarted s"] = time.monotonic() - started
            _until(lambda: _received(second) > 0, "the restarted replica gets its share again")
            time.sleep(3)
        finally:
            stop.set()
            for agent in agents:
                agent.join(timeout=60)
            timings["sending s"] = time.monotonic() - started
            acknowledged = [key for exporter in exporters for key in exporter.acknowledged]
            refused = [key for exporter in exporters for key in exporter.refused]
            try:
                if acknowledged:
                    otlp_receiver.wait_for_span_ids(acknowledged, timeout=120)
            finally:
                collector.stop()
                for replica in replicas:
                    replica.stop()
                redis_server.stop()

    # nothing acknowledged lost: every span the collector acknowledged reached the backend
    arrivals = Counter((s.trace_id, s.span_id) for s in otlp_receiver.spans)
    assert not set(acknowledged) - set(arrivals)
    duplicates = sum(n - 1 for n in arrivals.values() if n > 1)

    # each agent call: every arrival scored by similarity or marked unscored with its reason,
    # never two results of one scorer; each call judged (relevancy) at most once
    calls = {(s.trace_id, s.span_id) for s in otlp_receiver.spans_named(_AGENT)}
    assert len(calls) >= len([k for k in acknowledged if k in calls]) > 50
    results_by_scorer: dict[str, set[Key]] = defaultdict(set)
    unscored = Counter[str]()
    for span in otlp_receiver.spans_named(_AGENT):
        per_scorer = Counter(e.attributes[sc.TS_SCORER_ID] for e in span.events_named(sc.GEN_AI_EVALUATION_RESULT))
        assert all(n == 1 for n in per_scorer.values()), per_scorer
        for scorer in per_scorer:
            results_by_scorer[scorer].add((span.trace_id, span.span_id))
        reasons = [str(e.attributes.get(sc.TS_UNSCORED_REASON)) for e in span.events_named(sc.TS_UNSCORED)]
        unscored.update(reasons)
        assert "content-similarity" in per_scorer or reasons, span.attributes
    judged = Counter((step, call) for _, step, call in judge.requests)
    assert all(call for _, _, call in judge.requests)  # every judge request names its call
    assert all(n == 1 for n in judged.values()), judged.most_common(3)

    # the fleet limit held for the three replicas together: at most LIMIT runs began in any
    # minute (a run's first judge request; 5 s less than a minute for the way to the judge)
    began = sorted(min(t for t, _, c in judge.requests if c == call) for call in {c for _, _, c in judge.requests})
    assert began and max(sum(1 for t in began if start <= t < start + 55) for start in began) <= LIMIT
    assert len(judge.requests) <= 3 * len(began)  # relevancy: three steps a run
    judged_scorers = [s for s in results_by_scorer if s != "content-similarity"]
    assert sum(len(results_by_scorer[s]) for s in judged_scorers) <= len(began)
    print(f"churn: {len(calls)} agent calls, {len(acknowledged)} spans acknowledged ({len(refused)} not), "
          f"{duplicates} duplicate arrivals; similarity results "
          f"{len(results_by_scorer['content-similarity'])}, unscored {dict(unscored)}; judged runs {len(began)} "
          f"of limit {LIMIT}; {', '.join(f'{k} {v:.1f}' for k, v in timings.items())}")
