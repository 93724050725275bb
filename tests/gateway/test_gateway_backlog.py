"""The backlog gauges a replica exports to scale on: judge runs queued and in flight, and the age
of the oldest held agent span, read from /metrics while a slow scorer holds spans."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from _gateway_helpers import agent_trace, sender
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from tracescore.gateway import Gateway, GatewayConfig
from tracescore.scoring._base import Scorer, ScoreResult
from tracescore.testing import OTLPReceiver


class _GatedScorer(Scorer):
    id = "gated"
    name = "Gated"
    uses_judge = False

    def __init__(self) -> None:
        self.gate = threading.Event()

    async def arun(self, *, input: Any, output: Any, run_id: str | None = None,
                   **_: Any) -> ScoreResult:
        while not self.gate.is_set():
            await asyncio.sleep(0.02)
        return ScoreResult(run_id=run_id or "r", scorer_id=self.id, scorer_name=self.name,
                           score=1.0)


def _gauges(port: int | None) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        lines = reply.read().decode().splitlines()
    return {line.split()[0]: float(line.split()[1]) for line in lines
            if line.startswith("tracescore_gateway_") and "{" not in line}


def test_backlog_gauges_show_held_work_and_its_age(tmp_path: Path,
                                                   otlp_receiver: OTLPReceiver) -> None:
    scorer = _GatedScorer()
    gateway = Gateway(GatewayConfig(
        grpc_endpoint="127.0.0.1:0", http_endpoint="127.0.0.1:0", health_endpoint="127.0.0.1:0",
        exporter_endpoint=otlp_receiver.grpc_endpoint, journal_path=str(tmp_path / "j.db"),
        scorers=[scorer], isolation="thread", concurrency=1, max_wait_s=30.0,
        shutdown_timeout_s=10.0))
    gateway.start()
    try:
        exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{gateway.grpc_port}", insecure=True)
        with sender(exporter) as tracer:
            for _ in range(3):
                agent_trace(tracer, plain_children=0)
        deadline = time.monotonic() + 20
        while True:
            gauges = _gauges(gateway.health_port)
            if gauges.get("tracescore_gateway_scoring_in_flight") == 1 and gauges.get(
                    "tracescore_gateway_scoring_queued") == 2:
                break
            assert time.monotonic() < deadline, gauges
            time.sleep(0.05)
        time.sleep(0.3)
        gauges = _gauges(gateway.health_port)
        assert gauges["tracescore_gateway_held_now"] == 3
        assert 0.3 <= gauges["tracescore_gateway_oldest_held_age_seconds"] < 30
        scorer.gate.set()
        otlp_receiver.wait_for_spans(3, timeout=20)
        deadline = time.monotonic() + 10
        while (gauges := _gauges(gateway.health_port))["tracescore_gateway_held_now"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert gauges["tracescore_gateway_scoring_in_flight"] == 0
        assert gauges["tracescore_gateway_oldest_held_age_seconds"] == 0
    finally:
        gateway.stop()
