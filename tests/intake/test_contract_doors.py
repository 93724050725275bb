"""Both front doors read a span the same: the real libraries' spans of every framework
convention the project knows (`rigs/conventions.py`), with their trace structure, go through the
span processor (replayed into an SDK pipeline with their own ids, parents, kinds, times, events
and status) and through the gateway (posted as the libraries exported them); a scorer that
records what it is given sees the same question, answer, ground truth, tool calls and context
from both."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _reach import post_otlp_json
from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode
from rigs.conventions import CONVENTIONS, export_convention
from test_conventions import CASES

import tracescore
from tracescore.scoring import Scorer, ScoreResult, ScorerInput
from tracescore.scoring._inputs import answer_text, question_text
from tracescore.testing import OTLPReceiver, ReceivedSpan, spans_from_otlp_json

pytestmark = pytest.mark.slow  # the libraries' side environments (cached; minutes on first use)

Reading = tuple[Any, ...]


class _Recording(Scorer):
    """Scores 1 and keeps what it was given, as comparable values."""

    id = "recording"
    name = "recording"
    uses_judge = False

    def __init__(self) -> None:
        self.seen: list[Reading] = []
        self._lock = threading.Lock()

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        reading = (question_text(call.input), answer_text(call.output), repr(call.ground_truth),
                   tuple((t.name, repr(t.arguments), repr(t.result), t.error)
                         for t in call.tool_calls), tuple(call.context))
        with self._lock:
            self.seen.append(reading)
        return ScoreResult(run_id=call.run_id or "", scorer_id=self.id, scorer_name=self.name,
                           score=1.0)


class _Recorded(IdGenerator):
    """Gives the SDK the ids the library recorded: the next span's, set before it starts."""

    def __init__(self) -> None:
        self.trace_id = 0
        self.span_id = 0

    def generate_trace_id(self) -> int:
        return self.trace_id

    def generate_span_id(self) -> int:
        return self.span_id


def _through_the_processor(spans: list[ReceivedSpan]) -> list[Reading]:
    scorer = _Recording()
    ids = _Recorded()
    provider = TracerProvider(id_generator=ids)
    provider.add_span_processor(tracescore.ScoringSpanProcessor(
        SimpleSpanProcessor(InMemorySpanExporter()), [scorer],
        recognise=tracescore.build_recognisers(), isolation="thread"))
    parents = {span.span_id: span.parent_span_id for span in spans}

    def depth(span: ReceivedSpan) -> int:
        found, above = 0, span.parent_span_id
        while above in parents:
            found, above = found + 1, parents[above]
        return found

    # as the library ran: each span starts in start-time order (a parent before its children)
    # and ends in end-time order (the children before their parent)
    steps = sorted([(s.start_time_unix_nano, 0, depth(s), n) for n, s in enumerate(spans)]
                   + [(s.end_time_unix_nano, 1, -depth(s), n) for n, s in enumerate(spans)])
    started: dict[int, Any] = {}
    for _, ending, _, n in steps:
        span = spans[n]
        if ending:
            for event in span.events:
                started[n].add_event(event.name, event.attributes)
            if span.status_code != "UNSET":
                started[n].set_status(Status(StatusCode[span.status_code],
                                             span.status_message or None))
            started[n].end(span.end_time_unix_nano or None)
            continue
        ids.trace_id, ids.span_id = int(span.trace_id, 16), int(span.span_id, 16)
        parent = None
        if span.parent_span_id:
            parent = trace_api.set_span_in_context(NonRecordingSpan(SpanContext(
                trace_id=ids.trace_id, span_id=int(span.parent_span_id, 16), is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED))))
        started[n] = provider.get_tracer(span.scope_name).start_span(
            span.name, context=parent, kind=SpanKind[span.kind], attributes=span.attributes,
            start_time=span.start_time_unix_nano or None)
    assert provider.force_flush(30_000)
    provider.shutdown()
    return sorted(scorer.seen)


def _through_the_gateway(lines: list[str], tmp_path: Path, receiver: OTLPReceiver) -> list[Reading]:
    from tracescore.gateway import Gateway, GatewayConfig

    scorer = _Recording()
    sent = sum(len(spans_from_otlp_json(line)) for line in lines)
    gateway = Gateway(GatewayConfig(
        grpc_endpoint="127.0.0.1:0", http_endpoint="127.0.0.1:0", health_endpoint="127.0.0.1:0",
        exporter_endpoint=receiver.grpc_endpoint, journal_path=str(tmp_path / "journal.db"),
        scorers=[scorer], isolation="thread", shutdown_timeout_s=10.0)).start()
    try:
        assert gateway.http_port is not None
        post_otlp_json(gateway.http_port, lines, timeout_s=10)
        receiver.wait_for_spans(sent, timeout=60)
    finally:
        gateway.stop(timeout_s=5)
    return sorted(scorer.seen)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[str]]]:
    folder = tmp_path_factory.mktemp("conventions")
    found = {}
    for convention in CONVENTIONS:
        out = export_convention(convention, CASES[:4], folder / f"{convention}.jsonl")
        found[convention] = [line for line in out.read_text("utf-8").splitlines() if line.strip()]
    yield found


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_both_doors_read_the_same_from_every_convention(
        exported: dict[str, list[str]], convention: str, tmp_path: Path,
        otlp_receiver: OTLPReceiver) -> None:
    lines = exported[convention]
    spans = [span for line in lines for span in spans_from_otlp_json(line)]
    in_process = _through_the_processor(spans)
    gateway = _through_the_gateway(lines, tmp_path, otlp_receiver)
    assert in_process, f"no agent span of {convention} was scored in process"
    assert len(in_process) >= len(CASES[:4])
    if convention in ("genai", "openinference"):  # their agents call a tool: the reading sees it
        assert all(reading[3] for reading in in_process)
    assert gateway == in_process
