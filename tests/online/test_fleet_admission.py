"""The fleet's reservation (a Redis round trip) happens in the scoring worker, never in the
agent's thread: an agent call returns while a Redis that accepts and never answers still holds
the reservation, and the run is refused (on_unreachable="refuse") once Redis fails."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracescore import _semconv as sc
from tracescore.instrument._calls import AgentCall, notify_agent_call
from tracescore.online import OnlineScorer, ScoringSpanProcessor
from tracescore.online._fleet_limits import FleetLimiter
from tracescore.scoring._base import Scorer, ScoreResult


class _StallingRedis:
    """A TCP server that accepts connections, reads what they send and never answers."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self._listener.getsockname()[1]}/0"
        self.received = threading.Event()
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        try:
            while conn.recv(4096):
                self.received.set()
        except OSError:
            return

    def close(self) -> None:
        self._listener.close()
        for conn in self._conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()


class _Counted(Scorer):
    id = "counted"
    name = "Counted"
    uses_judge = True

    def __init__(self) -> None:
        self.runs = 0

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None) -> ScoreResult:
        self.runs += 1
        return ScoreResult(run_id=run_id or "x", scorer_id=self.id, scorer_name=self.name,
                           score=1.0, reason="ok")


@pytest.fixture
def stalling() -> Iterator[_StallingRedis]:
    server = _StallingRedis()
    yield server
    server.close()


@pytest.mark.parametrize("sinks", [("span",), ("log",)])
def test_the_agent_call_returns_while_the_fleet_reservation_is_pending(
        stalling: _StallingRedis, sinks: tuple[str, ...]) -> None:
    limiter = FleetLimiter(stalling.url, "stall", requests_per_minute=100, timeout_s=120,
                           on_unreachable="refuse")
    scorer = _Counted()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    processor = ScoringSpanProcessor(SimpleSpanProcessor(exporter), [OnlineScorer(
        scorer, fleet_limits=limiter, sinks=sinks)], isolation="thread")
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    attrs = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: "helper"}
    try:
        with tracer.start_as_current_span("invoke_agent helper", attributes=attrs) as span:
            notify_agent_call(AgentCall(span=span, name="helper", input="q?", output="a.",
                                        error=None, ground_truth=None, attributes=attrs))
        # the agent call has returned; the reservation is under way in the worker, unanswered
        assert stalling.received.wait(30), "the worker never asked Redis"
        assert (limiter.admitted, limiter.refused, limiter.unreachable) == (0, 0, 0)
        assert scorer.runs == 0
        stalling.close()  # Redis fails: on_unreachable="refuse" drops the run, counted
        assert processor.force_flush(30_000)
        deadline = time.monotonic() + 30
        while limiter.unreachable == 0:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert processor.force_flush(30_000)
        assert scorer.runs == 0 and limiter.refused == 1
        stats = processor.stats()
        assert stats["dropped.rate_limited"] == 1 and stats.get("scored", 0) == 0
        (exported,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent helper"]
        reasons = [e.attributes.get(sc.TS_UNSCORED_REASON) for e in exported.events]
        assert reasons == (["rate_limited"] if "span" in sinks else [])
    finally:
        stalling.close()
        processor.shutdown()
