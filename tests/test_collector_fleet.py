"""A two-tier fleet behind the real collector, as collector_config/gateway-fleet.yaml ships it.

app (OTel SDK, one export per span) -> collector -> tier 1: 3 `tracescore serve` replicas routed
by trace id -> the collector's `scored` receiver -> the backend; and a copy of the spans that carry
a conversation id -> tier 2: 2 replicas routed by conversation id. Conversations take turns over
time, each turn its own trace, the conversation id where four conventions put it. Each
trace is scored once, on the one tier-1 replica that got all its spans; every turn of a
conversation reaches the same tier-2 replica, and only turns do.
"""

from __future__ import annotations

import random
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from _gateway_helpers import agent_attributes, sender
from _lb_ring import Ring, even_ring_ports
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from typing_extensions import Self

from tracescore import _semconv as sc
from tracescore.testing import GatewayProcess, OTLPReceiver, ReceivedSpan
from tracescore.testing._collector import OTelCollector
from tracescore.testing._tools import free_port

CONFIG = Path(__file__).resolve().parent.parent / "collector_config" / "gateway-fleet.yaml"
ROUTE_KEY = "tracescore.route.conversation_id"  # what the config routes tier 2 by
# where frameworks put a conversation id, in the order the config prefers them: GenAI semconv
# and Mastra on the agent span, OpenInference and OpenLLMetry on every span of the session
ID_KEYS = ("gen_ai.conversation.id", "session.id", "mastra.metadata.threadId",
           "traceloop.association.properties.session_id")
ON_EVERY_SPAN = {"session.id", "traceloop.association.properties.session_id"}
TIER1, TIER2 = 3, 2
CONVERSATIONS, TURNS = 6, 4
_PORT_TAKEN = ("already in use", "cannot listen")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # the first test may build the collector

Key = tuple[str, str]  # (trace id, span id), hex


class Fleet:
    """The collector with both tiers of gateways, on loopback. Tier 1 scores content similarity
    at rate 1 and forwards to the collector's `scored` receiver; each tier-2 replica forwards to
    its own receiver in `turns`, so the test sees which replica got what."""

    def __init__(self, tmp_path: Path, backend: OTLPReceiver, turns: list[OTLPReceiver]) -> None:
        self._plan = (tmp_path, backend, turns)
        self._place()

    def _place(self) -> None:
        tmp_path, backend, turns = self._plan
        scored, results = free_port(), free_port()
        tier1_config = tmp_path / "tier1.yaml"
        tier1_config.write_text("scoring:\n  isolation: thread\n  scorers: [{scorer: similarity, rate: 1}]\n",
                                encoding="utf-8")
        tier2_config = tmp_path / "tier2.yaml"  # no call scorer: tier 2 is for conversation scorers
        tier2_config.write_text("scoring:\n  isolation: thread\n  scorers: [{scorer: similarity, rate: 0}]\n",
                                encoding="utf-8")

        def gateway(config: Path, endpoint: str, name: str, port: int) -> GatewayProcess:
            return GatewayProcess(["--config", str(config), "--endpoint", endpoint,
                                   "--journal", str(tmp_path / f"{name}.db")],
                                  grpc_port=port, http_port=free_port(), health_port=free_port())

        self.tier1 = [gateway(tier1_config, f"http://127.0.0.1:{scored}", f"t1-{i}", port)
                      for i, port in enumerate(even_ring_ports(TIER1))]
        self.tier2 = [gateway(tier2_config, receiver.grpc_endpoint, f"t2-{i}", port)
                      for i, (receiver, port) in enumerate(zip(turns, even_ring_ports(TIER2)))]
        self.ring1 = Ring([_endpoint(g) for g in self.tier1])
        self.ring2 = Ring([_endpoint(g) for g in self.tier2])
        env = {f"TRACESCORE_GATEWAY_{i + 1}": _endpoint(g) for i, g in enumerate(self.tier1)}
        env.update({f"TRACESCORE_CONVERSATIONS_{i + 1}": _endpoint(g) for i, g in enumerate(self.tier2)})
        env["BACKEND_OTLP_ENDPOINT"] = backend.grpc_address
        self.results_port = results
        settings = {
            "receivers::otlp/scored::protocols::grpc::endpoint": f"127.0.0.1:{scored}",
            "receivers::otlp/scored::protocols::http::endpoint": f"127.0.0.1:{free_port()}",
            "receivers::otlp/conversation-results::protocols::grpc::endpoint": f"127.0.0.1:{free_port()}",
            "receivers::otlp/conversation-results::protocols::http::endpoint": f"127.0.0.1:{results}",
        }
        self.collector = OTelCollector(CONFIG, env=env, overrides=settings)

    def conversation_ids(self, rng: random.Random) -> list[str]:
        """CONVERSATIONS ids that the ring spreads evenly over tier 2."""
        wanted, chosen = CONVERSATIONS // TIER2, defaultdict[str, list[str]](list)
        while any(len(chosen[_endpoint(g)]) < wanted for g in self.tier2):
            conversation = f"conv-{rng.randrange(10**9)}"
            replica = self.tier2_for(conversation)
            if len(chosen[replica]) < wanted:
                chosen[replica].append(conversation)
        return [c for ids in chosen.values() for c in ids]

    def tier2_for(self, conversation: str) -> str:
        """The tier-2 replica the loadbalancing exporter sends this conversation id to: its key
        is `name=value|` per routing attribute (attribute_routing.go)."""
        return self.ring2.endpoint_for(f"{ROUTE_KEY}={conversation}|".encode())

    def received_by_tier1(self) -> list[float]:
        counts = []
        for gateway in self.tier1:
            with urllib.request.urlopen(f"http://127.0.0.1:{gateway.health_port}/metrics", timeout=10) as r:
                text = r.read().decode()
            line = next(x for x in text.splitlines() if x.startswith("tracescore_gateway_received_total"))
            counts.append(float(line.split()[-1]))
        return counts

    def __enter__(self) -> Self:
        for attempt in range(3):
            try:
                with ExitStack() as stack:
                    for gateway in self.tier1 + self.tier2:
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


def _endpoint(gateway: GatewayProcess) -> str:
    return f"127.0.0.1:{gateway.grpc_port}"


@pytest.fixture
def turn_receivers() -> Iterator[list[OTLPReceiver]]:
    with ExitStack() as stack:
        yield [stack.enter_context(OTLPReceiver(http=False)) for _ in range(TIER2)]


def _send(fleet: Fleet, conversations: list[str]) -> tuple[list[Key], dict[str, set[Key]]]:
    """Turns of every conversation in rounds over time, and a trace without a conversation per
    round; each trace an agent span and a chat span below it, exported one span per request
    (the child first). Returns every span sent and each conversation's spans that carry its id."""
    sent: list[Key] = []
    carrying: dict[str, set[Key]] = defaultdict(set)
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{fleet.collector.grpc_port}", insecure=True)
    with sender(exporter, service="chat-app") as tracer:
        for turn in range(TURNS):
            for index, conversation in enumerate([*conversations, None]):
                key = ID_KEYS[index % len(ID_KEYS)]
                on_agent = {key: conversation} if conversation else {}
                on_all = on_agent if key in ON_EVERY_SPAN else {}
                question = f"What is the capital of France? ({conversation}, turn {turn})"
                agent_attrs = {**agent_attributes(question=question), **on_agent}
                with (tracer.start_as_current_span("invoke_agent geo", attributes=agent_attrs) as agent,
                      tracer.start_as_current_span("chat gpt-4o-mini",
                                                   attributes={"gen_ai.operation.name": "chat", **on_all}) as chat):
                    pass
                for span, carries in ((chat, bool(on_all)), (agent, bool(on_agent))):
                    context = span.get_span_context()
                    sent.append((f"{context.trace_id:032x}", f"{context.span_id:016x}"))
                    if carries and conversation:
                        carrying[conversation].add(sent[-1])
            threading.Event().wait(0.3)  # turns spread over time
    return sent, carrying


def test_each_trace_on_one_scoring_replica_each_conversation_on_one_turn_replica(
    tmp_path: Path, otlp_receiver: OTLPReceiver, turn_receivers: list[OTLPReceiver]
) -> None:
    with Fleet(tmp_path, otlp_receiver, turn_receivers) as fleet:
        conversations = fleet.conversation_ids(random.Random(7))
        sent, carrying = _send(fleet, conversations)
        otlp_receiver.wait_for_span_ids(sent, timeout=120)
        _wait_for_any(turn_receivers, {k for c in conversations for k in carrying[c]}, timeout=120)
        tier1_counts = fleet.received_by_tier1()
        routed = Counter(fleet.ring1.endpoint_for(bytes.fromhex(trace_id)) for trace_id, _ in sent)
        tier1_expected = [routed[_endpoint(g)] for g in fleet.tier1]
        backend = list(otlp_receiver.spans)
        _post_copy_and_carrier(fleet, otlp_receiver)

    # tier 1: every span once at the backend, unchanged by tier 2's routing key
    assert sorted((s.trace_id, s.span_id) for s in backend) == sorted(sent)
    assert all(ROUTE_KEY not in s.attributes for s in backend)
    # each trace whole on one replica: each replica got exactly the spans of its traces
    assert tier1_counts == tier1_expected and all(tier1_counts), tier1_counts
    agents = [s for s in backend if s.name == "invoke_agent geo"]
    assert len(agents) == (CONVERSATIONS + 1) * TURNS
    for agent in agents:
        (result,) = agent.events_named(sc.GEN_AI_EVALUATION_RESULT)  # scored once
        assert result.attributes[sc.TS_SCORER_ID] == "content-similarity"

    # tier 2: each conversation's turns all on one replica, the one its id routes to, and only them
    by_replica = {_endpoint(g): r for g, r in zip(fleet.tier2, turn_receivers)}
    seen: dict[str, set[str]] = defaultdict(set)
    for endpoint, receiver in by_replica.items():
        for span in receiver.spans:
            conversation = _conversation(span)
            assert conversation in conversations, span  # nothing without a conversation id
            seen[conversation].add(endpoint)
            assert (span.trace_id, span.span_id) in carrying[conversation]
    for conversation in conversations:
        assert seen[conversation] == {fleet.tier2_for(conversation)}
        turns = [s for r in turn_receivers for s in r.spans_named("invoke_agent geo")
                 if _conversation(s) == conversation]
        assert len({s.trace_id for s in turns}) == TURNS  # every turn, each its own trace
    assert all(r.spans for r in turn_receivers)  # both replicas have conversations
    print(f"tier 1 shares of {len(sent)} spans: {tier1_counts}; tier 2: "
          f"{[len(r.spans) for r in turn_receivers]} spans of {CONVERSATIONS} conversations")


def _wait_for_any(receivers: list[OTLPReceiver], ids: set[Key], timeout: float) -> None:
    """Until every span in `ids` has reached one of `receivers` (whichever)."""
    deadline = time.monotonic() + timeout
    while missing := ids - {(s.trace_id, s.span_id) for r in receivers for s in r.spans}:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(missing)} of {len(ids)} spans did not reach tier 2")
        time.sleep(0.05)


def _conversation(span: ReceivedSpan) -> str | None:
    route = span.attributes.get(ROUTE_KEY)
    assert route == next((span.attributes[k] for k in ID_KEYS if k in span.attributes), None)
    return route


def _post_copy_and_carrier(fleet: Fleet, backend: OTLPReceiver) -> None:
    """What a tier-2 replica forwards goes to `conversation-results`: the turn copies it was sent
    stop there (tier 1 forwarded them already), a span it made itself (a result carrier) goes on."""
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    rng = random.Random(3)
    for name, route in (("invoke_agent copy", "conv-1"), ("evaluation conversation", None)):
        span = spans.add(name=name, trace_id=rng.randbytes(16), span_id=rng.randbytes(8))
        if route:
            span.attributes.add(key=ROUTE_KEY).value.string_value = route
    before = len(backend.spans)
    post = urllib.request.Request(
        f"http://127.0.0.1:{fleet.results_port}/v1/traces", data=request.SerializeToString(),
        headers={"Content-Type": "application/x-protobuf"})
    with urllib.request.urlopen(post, timeout=30) as response:
        assert response.status == 200
    backend.wait_for_spans(lambda s: s.name == "evaluation conversation", timeout=60)
    assert [s.name for s in backend.spans[before:]] == ["evaluation conversation"]
