"""A two-tier fleet behind the real collector, as collector_config/gateway-fleet.yaml ships it.

app (OTel SDK, one export per span) -> collector -> tier 1: 3 `tracescore serve` replicas routed
by trace id, scoring each agent call -> the collector's `scored` receiver -> the backend; and a
copy of the spans that carry a conversation id -> tier 2: 2 replicas routed by conversation id,
scoring conversations -> the collector's `conversation-results` receiver (copies dropped) -> the
backend. Conversations take turns over time, each turn its own trace, the conversation id where
four conventions put it. Each trace is scored once, on the one tier-1 replica that got all its
spans; each conversation is scored once, with all its turns, on the tier-2 replica its id routes
to; the backend gets every span once, plus the conversation results. And the documented limit:
a tier-2 replica added mid-conversation scores the conversations it takes over in two parts.
"""

from __future__ import annotations

import os
import random
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from _gateway_helpers import agent_attributes, sender
from _lb_ring import Ring, even_ring_ports
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from typing_extensions import Self

from tracescore import _semconv as sc
from tracescore.testing import GatewayProcess, OTLPReceiver
from tracescore.testing._collector import OTelCollector
from tracescore.testing._tools import free_port

TESTS = Path(__file__).resolve().parents[1]
CONFIG = TESTS.parent / "collector_config" / "gateway-fleet.yaml"
ROUTE_KEY = "tracescore.route.conversation_id"  # what the config routes tier 2 by
# where frameworks put a conversation id, in the order the config prefers them: GenAI semconv
# and Mastra on the agent span, OpenInference and OpenLLMetry on every span of the session
ID_KEYS = ("gen_ai.conversation.id", "session.id", "mastra.metadata.threadId",
           "traceloop.association.properties.session_id")
ON_EVERY_SPAN = {"session.id", "traceloop.association.properties.session_id"}
TIER1, TIER2 = 3, 2
CONVERSATIONS, TURNS = 6, 4
QUIET_S = 2.0  # tier 2 scores a conversation this long after its last turn
_PORT_TAKEN = ("already in use", "cannot listen")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # the first test may build the collector

Key = tuple[str, str]  # (trace id, span id), hex


class Fleet:
    """The collector with both tiers of gateways, on loopback. Tier 1 scores content similarity
    at rate 1 on every agent call; tier 2 counts each conversation's turns once it is quiet."""

    def __init__(self, tmp_path: Path, backend: OTLPReceiver, *, spare: int = 0) -> None:
        self._plan = (tmp_path, backend, spare)
        self._place()

    def _place(self) -> None:
        """Pick free ports for every process and build them; `spare` tier-2 replicas run but
        are not in the collector's list until `add_spares()`."""
        tmp_path, backend, spare = self._plan
        scored, results = free_port(), free_port()
        tier1_config = tmp_path / "tier1.yaml"
        tier1_config.write_text("scoring:\n  isolation: thread\n  scorers: [{scorer: similarity, rate: 1}]\n",
                                encoding="utf-8")
        tier2_config = tmp_path / "tier2.yaml"
        tier2_config.write_text("scoring:\n  isolation: thread\n"
                                "  scorers: [{scorer: '_conversation_scorers:TurnCounter'}]\n"
                                f"conversations:\n  quiet_s: {QUIET_S}\n", encoding="utf-8")
        env = {"PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}

        def gateway(config: Path, results_port: int, name: str, port: int) -> GatewayProcess:
            return GatewayProcess(["--config", str(config), "--endpoint", f"http://127.0.0.1:{results_port}",
                                   "--journal", str(tmp_path / f"{name}.db")], env=env,
                                  grpc_port=port, http_port=free_port(), health_port=free_port())

        self.tier1 = [gateway(tier1_config, scored, f"t1-{i}", port)
                      for i, port in enumerate(even_ring_ports(TIER1))]
        self.tier2 = [gateway(tier2_config, results, f"t2-{i}", port)
                      for i, port in enumerate(even_ring_ports(TIER2) + [free_port() for _ in range(spare)])]
        self.routed2 = self.tier2[:TIER2]
        self.ring1 = Ring([_endpoint(g) for g in self.tier1])
        self.ring2 = Ring([_endpoint(g) for g in self.routed2])
        env = {f"TRACESCORE_GATEWAY_{i + 1}": _endpoint(g) for i, g in enumerate(self.tier1)}
        env.update({f"TRACESCORE_CONVERSATIONS_{i + 1}": _endpoint(g) for i, g in enumerate(self.routed2)})
        env["BACKEND_OTLP_ENDPOINT"] = backend.grpc_address
        self._env, self._settings = env, {
            "receivers::otlp/scored::protocols::grpc::endpoint": f"127.0.0.1:{scored}",
            "receivers::otlp/scored::protocols::http::endpoint": f"127.0.0.1:{free_port()}",
            "receivers::otlp/conversation-results::protocols::grpc::endpoint": f"127.0.0.1:{results}",
            "receivers::otlp/conversation-results::protocols::http::endpoint": f"127.0.0.1:{free_port()}",
        }
        self.collector = OTelCollector(CONFIG, env=env, overrides=self._settings)

    def add_spares(self) -> None:
        """Put every tier-2 replica in the collector's list, as an operator adding replicas
        does: the collector restarts (SIGTERM drains it) with the longer list."""
        self.collector.stop()
        self.routed2 = self.tier2
        self.ring2 = Ring([_endpoint(g) for g in self.routed2])
        hostnames = ",".join(_endpoint(g) for g in self.routed2)
        self.collector = OTelCollector(CONFIG, env=self._env, overrides={
            **self._settings,
            "exporters::load_balancing/conversations::resolver::static::hostnames": f"[{hostnames}]"})
        self.collector.start()

    def tier2_for(self, conversation: str, ring: Ring | None = None) -> str:
        """The tier-2 replica the loadbalancing exporter sends this conversation id to: its key
        is `name=value|` per routing attribute (attribute_routing.go)."""
        return (ring or self.ring2).endpoint_for(f"{ROUTE_KEY}={conversation}|".encode())

    @staticmethod
    def received(tier: list[GatewayProcess]) -> list[float]:
        """Each replica's count of spans received (its Prometheus counter)."""
        counts = []
        for gateway in tier:
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
                    self.collector.start()
                    self._stack = stack.pop_all()
                return self
            except RuntimeError as exc:  # a port was free when picked, taken before it was bound
                if attempt == 2 or not any(s in str(exc).lower() for s in _PORT_TAKEN):
                    raise
                self._place()
        raise AssertionError("unreachable")

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.collector.stop()
        finally:
            self._stack.close()


def _endpoint(gateway: GatewayProcess) -> str:
    return f"127.0.0.1:{gateway.grpc_port}"


def _pick_ids(rng: random.Random, kind: Callable[[str], str], wanted: dict[str, int]) -> list[str]:
    """Conversation ids, `wanted[k]` of each kind `k` (e.g. the tier-2 replica an id routes to)."""
    chosen = defaultdict[str, list[str]](list)
    while any(len(chosen[k]) < n for k, n in wanted.items()):
        conversation = f"conv-{rng.randrange(10**9)}"
        if len(chosen[kind(conversation)]) < wanted.get(kind(conversation), 0):
            chosen[kind(conversation)].append(conversation)
    return [c for ids in chosen.values() for c in ids]


def _question(conversation: str | None, turn: int) -> str:
    return f"What is the capital of France? ({conversation}, turn {turn})"


def _send(fleet: Fleet, conversations: list[str], turns: range = range(TURNS)
          ) -> tuple[list[Key], dict[str, set[Key]]]:
    """Turns of every conversation in rounds over time, and a trace without a conversation per
    round; each trace an agent span and a chat span below it, exported one span per request
    (the child first). Returns every span sent and each conversation's spans that carry its id."""
    sent: list[Key] = []
    carrying: dict[str, set[Key]] = defaultdict(set)
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{fleet.collector.grpc_port}", insecure=True)
    with sender(exporter, service="chat-app") as tracer:
        for turn in turns:
            for index, conversation in enumerate([*conversations, None]):
                key = ID_KEYS[index % len(ID_KEYS)]
                on_agent = {key: conversation} if conversation else {}
                on_all = on_agent if key in ON_EVERY_SPAN else {}
                question = _question(conversation, turn)
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


def test_each_trace_scored_once_on_one_replica_each_conversation_once_with_all_its_turns(
    tmp_path: Path, otlp_receiver: OTLPReceiver
) -> None:
    with Fleet(tmp_path, otlp_receiver) as fleet:
        wanted = {_endpoint(g): CONVERSATIONS // TIER2 for g in fleet.tier2}
        conversations = _pick_ids(random.Random(7), fleet.tier2_for, wanted)  # spread evenly
        sent, carrying = _send(fleet, conversations)
        otlp_receiver.wait_for_span_ids(sent, timeout=120)
        results = _wait_for_results(otlp_receiver, len(conversations), timeout=60)
        time.sleep(QUIET_S + 0.5)  # time for a second version, had a conversation one
        results = _wait_for_results(otlp_receiver, len(conversations), timeout=0)
        tier1_counts, tier2_counts = fleet.received(fleet.tier1), fleet.received(fleet.tier2)

    # tier 1: each trace whole on one replica (each got exactly the spans of its traces)
    routed = Counter(fleet.ring1.endpoint_for(bytes.fromhex(trace_id)) for trace_id, _ in sent)
    assert tier1_counts == [routed[_endpoint(g)] for g in fleet.tier1] and all(tier1_counts)
    # and every span reaches the backend once, each agent call scored once; tier 2's copies
    # stop at the collector, only its results go on
    carriers = [s for s in otlp_receiver.spans if s.attributes.get(sc.TS_EVALUATION_CARRIER)]
    spans = [(s.trace_id, s.span_id) for s in otlp_receiver.spans if s not in carriers]
    assert sorted(spans) == sorted(sent)
    assert all(ROUTE_KEY not in s.attributes for s in otlp_receiver.spans)
    agents = otlp_receiver.spans_named("invoke_agent geo")
    assert len(agents) == (CONVERSATIONS + 1) * TURNS
    for agent in agents:
        (result,) = agent.events_named(sc.GEN_AI_EVALUATION_RESULT)
        assert result.attributes[sc.TS_SCORER_ID] == "content-similarity"

    # tier 2: each conversation on the replica its id routes to, and nothing else there
    on_replica = Counter(fleet.tier2_for(c) for c in conversations for _ in carrying[c])
    assert tier2_counts == [on_replica[_endpoint(g)] for g in fleet.tier2] and all(tier2_counts)
    # each conversation scored once, with every turn, in order
    assert sorted(r[sc.GEN_AI_CONVERSATION_ID] for r in results) == sorted(conversations)
    for verdict in results:
        conversation = verdict[sc.GEN_AI_CONVERSATION_ID]
        assert verdict[sc.TS_CONVERSATION_TURNS] == TURNS
        assert verdict[sc.GEN_AI_EVALUATION_EXPLANATION] == " | ".join(
            _question(conversation, turn) for turn in range(TURNS))
        assert verdict["links"] == TURNS  # the carrier links every turn it judged
    print(f"tier 1 shares of {len(sent)} spans: {tier1_counts}; tier 2: {tier2_counts} spans "
          f"of {CONVERSATIONS} conversations, each scored once with its {TURNS} turns")


def _wait_for_results(backend: OTLPReceiver, count: int, timeout: float) -> list[dict[str, Any]]:
    """The conversation results at the backend (their carrier spans' events), once `count` are in
    or `timeout` has passed."""
    deadline = time.monotonic() + timeout
    while True:
        found = [dict(e.attributes, links=len(s.links)) for s in backend.spans
                 if s.attributes.get(sc.TS_EVALUATION_CARRIER)
                 for e in s.events_named(sc.GEN_AI_EVALUATION_RESULT)]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_a_conversation_that_a_new_replica_takes_over_is_scored_in_two_parts(
    tmp_path: Path, otlp_receiver: OTLPReceiver
) -> None:
    """The documented limit: adding a tier-2 replica moves some conversations to it. A moved one
    is scored by its old replica with the turns before the change and by the new one with the
    turns after; the others are scored whole."""
    with Fleet(tmp_path, otlp_receiver, spare=1) as fleet:
        later = Ring([_endpoint(g) for g in fleet.tier2])  # the ring once the spare is listed

        def moves(conversation: str) -> str:
            return "moves" if fleet.tier2_for(conversation) != fleet.tier2_for(conversation, later) else "stays"

        conversations = _pick_ids(random.Random(11), moves, {"moves": 2, "stays": 2})
        moved = {c for c in conversations if moves(c) == "moves"}
        half = TURNS // 2
        sent, _ = _send(fleet, conversations, range(half))
        otlp_receiver.wait_for_span_ids(sent, timeout=120)
        fleet.add_spares()
        sent, _ = _send(fleet, conversations, range(half, TURNS))
        otlp_receiver.wait_for_span_ids(sent, timeout=120)
        _wait_for_results(otlp_receiver, len(conversations) + len(moved), timeout=60)
        time.sleep(QUIET_S + 0.5)
        results = _wait_for_results(otlp_receiver, 0, timeout=0)

    by_conversation = defaultdict[str, list[str]](list)  # the turns each result judged
    for verdict in results:
        by_conversation[verdict[sc.GEN_AI_CONVERSATION_ID]].append(verdict[sc.GEN_AI_EVALUATION_EXPLANATION])
    for conversation in conversations:
        asked = [_question(conversation, turn) for turn in range(TURNS)]
        if conversation in moved:  # two parts, neither whole
            assert sorted(by_conversation[conversation]) == sorted(
                [" | ".join(asked[:half]), " | ".join(asked[half:])]), conversation
        else:  # whole in its last version (a first one may have come while the collector restarted)
            assert by_conversation[conversation][-1] == " | ".join(asked), conversation
