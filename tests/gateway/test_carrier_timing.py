"""A carrier span never changes the latency of what it judges: through both front doors, a call's
and a conversation's carrier lasts 0 at the end of the span it judges (so the judged trace keeps
its extent, however long the judge or the quiet period took), and says how late its result came
in `tracescore.evaluation.delay_ms`."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _gateway_helpers import agent_attributes, sender
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from test_conversation_scope import Rig
from test_online import Harness, LengthScorer

from tracescore import OnlineScorer
from tracescore import _semconv as sc
from tracescore.testing import GatewayProcess, OTLPReceiver

TESTS = Path(__file__).resolve().parents[1]


def _in_trace(carrier_start: int | None, carrier_end: int | None, judged_start: int | None,
              judged_end: int | None) -> bool:
    """Zero-length, within the judged span (in process a turn is taken just before its span
    ends)."""
    assert None not in (carrier_start, carrier_end, judged_start, judged_end)
    return carrier_start == carrier_end and judged_start <= carrier_start <= judged_end


@pytest.mark.parametrize("judge_s", [0.0, 0.4])
def test_a_calls_carrier_sits_at_the_end_of_the_call_in_process(judge_s: float) -> None:
    gate = threading.Event()
    harness = Harness([OnlineScorer(LengthScorer(gate=gate), sinks=("carrier",))])
    try:
        harness.call("a long enough answer")
        threading.Timer(judge_s, gate.set).start()
        harness.flush()
        harness.wait_for(lambda: any(s.name.startswith("evaluation ") for s in harness.spans()))
        (agent,) = harness.agent_spans()
        (carrier,) = [s for s in harness.spans() if s.name.startswith("evaluation ")]
        assert carrier.parent is not None and carrier.parent.span_id == agent.context.span_id
        assert _in_trace(carrier.start_time, carrier.end_time, agent.start_time, agent.end_time)
        assert all(event.timestamp == agent.end_time for event in carrier.events)
        assert carrier.attributes[sc.TS_EVALUATION_DELAY_MS] >= judge_s * 1000
    finally:
        harness.close()


def test_a_conversations_carrier_sits_at_the_end_of_its_last_turn_in_process() -> None:
    rig = Rig()
    try:
        rig.ask("c1: first question", "c1: second question")
        (carrier,) = rig.wait_for(1)
        last = rig.turns("c1")[-1]
        assert carrier.parent.span_id == last.context.span_id
        assert _in_trace(carrier.start_time, carrier.end_time, last.start_time, last.end_time)
        # the result came after the quiet period, which the judged trace does not show
        assert carrier.attributes[sc.TS_EVALUATION_DELAY_MS] >= 300
    finally:
        rig.shutdown()


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as running:
        yield running


@pytest.mark.slow
def test_carriers_sit_at_the_end_of_what_they_judge_through_the_gateway(
        tmp_path: Path, receiver: OTLPReceiver) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text("scoring:\n  isolation: thread\n  scorers:\n"
                      "    - {scorer: similarity, sinks: [carrier]}\n"
                      "    - {scorer: '_conversation_scorers:TurnCounter'}\n"
                      "conversations: {quiet_s: 0.5}\n", encoding="utf-8")
    env = {"PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    gateway = GatewayProcess(["--config", str(config), "--endpoint", receiver.grpc_endpoint,
                              "--journal", str(tmp_path / "journal.db")], env=env).start()
    try:
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{gateway.http_port}/v1/traces")
        with sender(exporter) as tracer:
            for _ in range(2):  # two turns, each a trace of its own
                with tracer.start_as_current_span("invoke_agent geo", attributes={
                        **agent_attributes(), sc.GEN_AI_CONVERSATION_ID: "conv-7"}):
                    time.sleep(0.01)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            carriers = [s for s in receiver.spans if s.attributes.get(sc.TS_EVALUATION_CARRIER)]
            if len(carriers) >= 3:  # two calls, one conversation
                break
            time.sleep(0.05)
        by_id = {s.span_id: s for s in receiver.spans}
        assert len(carriers) == 3
        for carrier in carriers:
            judged = by_id[carrier.parent_span_id]
            assert _in_trace(carrier.start_time_unix_nano, carrier.end_time_unix_nano,
                             judged.start_time_unix_nano, judged.end_time_unix_nano)
            assert carrier.attributes[sc.TS_EVALUATION_DELAY_MS] >= 0
        conversation = [c for c in carriers if sc.GEN_AI_CONVERSATION_ID in c.attributes]
        assert len(conversation) == 1
        assert conversation[0].attributes[sc.TS_EVALUATION_DELAY_MS] >= 500
    finally:
        gateway.stop()
