"""The run scope with the real libraries' spans (pydantic-ai agents calling a tool over several
rounds; OpenTelemetry's GenAI helper writing an agent inside a workflow): in process (the spans
replayed through an SDK pipeline, parents, times and status as recorded), and at the gateway
(each span posted in its own export request, the root last, as their exporters sent them). Each
run is scored once (at the gateway after its quiet period) at its root agent span, with every
LLM call, tool call and sub-agent of the run; every span goes on exactly once; SIGTERM scores
what is waiting.

The libraries run in the conventions side venv (`rigs/conventions.py`).
"""

from __future__ import annotations

import re
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _reach import post_otlp_json
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    StatusCode,
    TraceFlags,
    set_span_in_context,
)
from rigs.conventions import export_convention

from tracescore import ScoringSpanProcessor, build_recognisers
from tracescore import _semconv as sc
from tracescore.gateway import Gateway, GatewayConfig
from tracescore.online._options import OnlineScorer
from tracescore.scoring import Scorer, ScoreResult, ScorerInput
from tracescore.scoring._runs import AGENT, LLM_CALL, TOOL_CALL, Run, Step
from tracescore.testing import GatewayProcess, OTLPReceiver, ReceivedSpan
from tracescore.testing._decode import spans_from_otlp_json

pytestmark = pytest.mark.slow  # installs the conventions side venv on first use (minutes)

CASES = [{"question": f"{n}. What is the oldest bridge in Osaka?", "answer": f"Bridge {n}.",
          "rounds": n, "stream": n % 2 == 1, "tool_result": f"TOOL-RETURN {n}"}
         for n in range(4)]


class _Recorder(Scorer):
    """A run-scope scorer keeping the runs it was given (score: its tool calls / 10)."""

    id = "run-recorder"
    name = "run recorder"
    uses_judge = False
    scope = "run"

    def __init__(self) -> None:
        self.runs: list[tuple[Any, Run]] = []

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        self.runs.append((call.output, call.trajectory))
        return ScoreResult(score=len(call.trajectory.steps) / 10, run_id=call.run_id or "",
                           scorer_id=self.id, scorer_name=self.name)


def _lines(run: str, cases: list[dict[str, Any]]) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="tracescore-runs-") as tmp:
        return export_convention(run, cases, Path(tmp) / "spans.jsonl").read_text().splitlines()


@pytest.fixture(scope="module")
def tool_runs() -> list[str]:
    return _lines("pydantic_ai_tools", CASES)


@pytest.fixture(scope="module")
def workflow_runs() -> list[str]:
    return _lines("genai_workflow", CASES[:2])


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as running:
        yield running


def _gateway(tmp_path: Path, receiver: OTLPReceiver, recorder: _Recorder,
             **runs: Any) -> Gateway:
    return Gateway(GatewayConfig(
        grpc_endpoint="127.0.0.1:0", http_endpoint="127.0.0.1:0", health_endpoint="127.0.0.1:0",
        exporter_endpoint=receiver.grpc_endpoint, journal_path=str(tmp_path / "j.db"),
        journal_sync="normal", scorers=[OnlineScorer(recorder)], isolation="thread",
        shutdown_timeout_s=10.0, runs=runs)).start()


def _results(span: ReceivedSpan) -> list[dict[str, Any]]:
    return [e.attributes for e in span.events_named(sc.GEN_AI_EVALUATION_RESULT)]


def _shape(steps: tuple[Step, ...]) -> list[Any]:
    return [(s.type, s.name, _shape(s.children)) if s.children else (s.type, s.name)
            for s in steps]


def _sent(lines: list[str]) -> list[ReceivedSpan]:
    return [span for line in lines for span in spans_from_otlp_json(line)]


def _assert_tool_runs(recorder: _Recorder) -> None:
    """Each case's run: its LLM calls and tool rounds in order, with arguments and timings."""
    assert len(recorder.runs) == len(CASES)
    for answer, run in recorder.runs:
        rounds = int(re.search(r"Bridge (\d)", str(answer)).group(1))
        expected = [*[(LLM_CALL, "model"), (TOOL_CALL, "lookup")] * rounds, (LLM_CALL, "model")]
        assert [(s.type, "model" if s.type == LLM_CALL else s.name) for s in run.timeline] == \
            expected, (answer, _shape(run.timeline))
        assert all(s.model == "function:reply:stream" for s in run.timeline if s.type == LLM_CALL)
        assert [s.arguments for s in run.steps] == [{"round": n} for n in range(rounds)]
        starts = [s.start_ms or 0.0 for s in run.timeline]
        assert starts == sorted(starts) and all(s.duration_ms is not None for s in run.timeline)
        assert run.duration_ms is not None and run.duration_ms > 0


def _replay(spans: list[ReceivedSpan], processor: ScoringSpanProcessor) -> None:
    """The spans through an SDK pipeline as they ran: started in start order under their own
    parents, ended in end order at their recorded times."""
    provider = TracerProvider()
    provider.add_span_processor(processor)
    started: dict[str, Any] = {}
    for span in sorted(spans, key=lambda s: s.start_time_unix_nano):
        parent = started.get(span.parent_span_id or "")
        context = set_span_in_context(parent) if parent is not None else set_span_in_context(
            NonRecordingSpan(SpanContext(trace_id=int(span.trace_id, 16), span_id=1,
                                         is_remote=True,
                                         trace_flags=TraceFlags(TraceFlags.SAMPLED))))
        started[span.span_id] = provider.get_tracer(span.scope_name).start_span(
            span.name, context=context, attributes=span.attributes,
            start_time=span.start_time_unix_nano)
    for span in sorted(spans, key=lambda s: s.end_time_unix_nano):
        if span.status_code == "ERROR":
            started[span.span_id].set_status(StatusCode.ERROR, span.status_message)
        started[span.span_id].end(end_time=span.end_time_unix_nano)
    assert provider.force_flush(30_000)
    provider.shutdown()


def test_in_process_each_run_is_scored_once_at_its_root_with_all_its_steps(
        tool_runs: list[str]) -> None:
    recorder = _Recorder()
    exporter = InMemorySpanExporter()
    sent = _sent(tool_runs)
    _replay(sent, ScoringSpanProcessor(SimpleSpanProcessor(exporter), [recorder],
                                       recognise=build_recognisers(), isolation="thread"))
    finished = exporter.get_finished_spans()
    assert len(finished) == len(sent)  # each span once
    scored = [s for s in finished if any(e.name == sc.GEN_AI_EVALUATION_RESULT for e in s.events)]
    assert sorted(s.name for s in scored) == ["invoke_agent geo"] * len(CASES)
    _assert_tool_runs(recorder)


def test_each_run_is_scored_once_after_its_quiet_period_with_all_its_steps(
        tmp_path: Path, receiver: OTLPReceiver, tool_runs: list[str]) -> None:
    recorder = _Recorder()
    gateway = _gateway(tmp_path, receiver, recorder, quiet_s=0.5)
    try:
        assert gateway.http_port is not None
        post_otlp_json(gateway.http_port, tool_runs)
        sent = _sent(tool_runs)
        received = receiver.wait_for_spans(len(sent), timeout=30)
        time.sleep(1.5)  # nothing more comes: no run is scored twice
        stats = gateway.stats()
    finally:
        gateway.stop(timeout_s=5)
    received = receiver.spans
    assert Counter((s.trace_id, s.span_id) for s in received) == \
        Counter((s.trace_id, s.span_id) for s in sent)  # each span forwarded once
    roots = [s for s in received if s.name == "invoke_agent geo"]
    assert len(roots) == len(CASES)
    for root in roots:
        [result] = _results(root)
        assert result[sc.TS_SCORER_ID] == "run-recorder"
    assert all(not _results(s) for s in received if s.name != "invoke_agent geo")
    _assert_tool_runs(recorder)
    assert stats["runs_scored.quiet"] == len(CASES) and stats["runs_waiting"] == 0


def test_a_workflow_run_has_its_agent_as_a_sub_agent_step(
        tmp_path: Path, receiver: OTLPReceiver, workflow_runs: list[str]) -> None:
    recorder = _Recorder()
    gateway = _gateway(tmp_path, receiver, recorder, quiet_s=0.3)
    try:
        assert gateway.http_port is not None
        post_otlp_json(gateway.http_port, workflow_runs)
        sent = _sent(workflow_runs)
        receiver.wait_for_spans(len(sent), timeout=30)
    finally:
        gateway.stop(timeout_s=5)
    received = receiver.spans
    assert len(received) == len(sent)
    scored = [s for s in received if _results(s)]
    assert {s.attributes.get(sc.GEN_AI_OPERATION_NAME) for s in scored} == {"invoke_workflow"}
    assert len(scored) == len(recorder.runs) == 2
    for _, run in recorder.runs:
        assert _shape(run.timeline) == [(AGENT, "geo", [(TOOL_CALL, "lookup")])]
        [agent] = run.timeline
        assert agent.start_ms is not None and agent.duration_ms is not None
        assert [s.name for s in run.steps] == ["lookup"]


def test_sigterm_scores_the_runs_still_in_their_quiet_period(
        tmp_path: Path, receiver: OTLPReceiver, tool_runs: list[str]) -> None:
    """`tracescore serve` with a run-scope scorer from its YAML and a quiet period longer than
    the test: SIGTERM scores the waiting runs and forwards every span, none lost."""
    config = tmp_path / "gateway.yaml"
    config.write_text(
        "scoring:\n  isolation: thread\n  scorers:\n"
        "    - {scorer: trajectory-accuracy, options: {expected_trajectory: [lookup]}}\n"
        "runs:\n  quiet_s: 600\n", encoding="utf-8")
    process = GatewayProcess(["--config", str(config), "--endpoint", receiver.grpc_endpoint,
                              "--journal", str(tmp_path / "journal.db")]).start()
    try:
        assert process.http_port is not None
        post_otlp_json(process.http_port, tool_runs)
        time.sleep(0.5)
        assert not [s for s in receiver.spans if s.name == "invoke_agent geo"]  # waiting
        assert process.terminate() == 0
    finally:
        process.stop()
    sent = _sent(tool_runs)
    received = receiver.spans
    assert Counter((s.trace_id, s.span_id) for s in received) == \
        Counter((s.trace_id, s.span_id) for s in sent)
    scores = sorted(_results(s)[0][sc.GEN_AI_EVALUATION_SCORE_VALUE]
                    for s in received if s.name == "invoke_agent geo")
    assert scores == [0.0, 1.0, 1.0, 1.0]  # the run without a tool call misses `lookup`


def test_sigkill_loses_no_run_the_restart_scores_them_from_the_journal(
        tmp_path: Path, receiver: OTLPReceiver, tool_runs: list[str]) -> None:
    """Killed while its runs wait for their quiet period: the next start replays their agent
    spans from the journal and scores each run once (with the agent spans: the run's other
    spans went on before the kill)."""
    config = tmp_path / "gateway.yaml"
    config.write_text(
        "scoring:\n  isolation: thread\n  scorers:\n"
        "    - {scorer: trajectory-accuracy, options: {expected_trajectory: [lookup]}}\n"
        "runs:\n  quiet_s: 0.5\n", encoding="utf-8")
    waiting = tmp_path / "waiting.yaml"
    waiting.write_text(config.read_text().replace("quiet_s: 0.5", "quiet_s: 600"))
    journal = str(tmp_path / "journal.db")
    process = GatewayProcess(["--config", str(waiting), "--endpoint", receiver.grpc_endpoint,
                              "--journal", journal]).start()
    try:
        assert process.http_port is not None
        post_otlp_json(process.http_port, tool_runs)
        process.kill()
        assert not [s for s in receiver.spans if s.name == "invoke_agent geo"]
        process.args = ["--config", str(config), "--endpoint", receiver.grpc_endpoint,
                        "--journal", journal]
        process.restart()
        roots = receiver.wait_for_spans(len(_sent(tool_runs)), timeout=30)
        assert process.terminate() == 0
    finally:
        process.stop()
    roots = [s for s in receiver.spans if s.name == "invoke_agent geo"]
    assert {s.span_id for s in roots} == \
        {s.span_id for s in _sent(tool_runs) if s.name == "invoke_agent geo"}
    assert all(len(_results(s)) == 1 for s in roots) and len(roots) == len(CASES)
