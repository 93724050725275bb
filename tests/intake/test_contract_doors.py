"""Both front doors read a span the same: the real libraries' spans of every framework
convention the project knows (`rigs/conventions.py`), with their trace structure, go through the
span processor (replayed into an SDK pipeline with their own ids, parents, kinds, times, events
and status) and through the gateway (posted as the libraries exported them). Scorers that record
what they are given see the same from both: a call scorer the question, answer, ground truth,
tool calls and context; a run scorer each run's steps (LLM calls, tool calls, sub-agents, with
their arguments, results, models, tokens and times); a conversation scorer each conversation's
turns in order (conversation ids from OpenInference's session, OpenLLMetry's association
property, Mastra's memory thread)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
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
from rigs.conventions import CONVENTIONS, CONVERSATIONS, MORE_RUNS, export_convention
from test_conventions import CASES

import tracescore
from tracescore.scoring import Scorer, ScoreResult, ScorerInput
from tracescore.scoring._inputs import InputError, answer_text, question_text
from tracescore.scoring._runs import Step
from tracescore.testing import OTLPReceiver, ReceivedSpan, spans_from_otlp_json

pytestmark = pytest.mark.slow  # the libraries' side environments (cached; minutes on first use)

Reading = tuple[Any, ...]
# a conversation per session (OpenInference, OpenLLMetry) or memory thread (Mastra): two, of two
# turns each, interleaved; the other conventions ignore both keys
TALKS = [dict(case, session=f"session-{n % 2}", thread=f"thread-{n % 2}")
         for n, case in enumerate(CASES[:4])]
# pydantic-ai agents calling a tool over several rounds, streamed or not
TOOL_RUNS = [{"question": f"{n}. What is the oldest bridge in Osaka?", "answer": f"Bridge {n}.",
              "rounds": n, "stream": n % 2 == 1, "tool_result": f"TOOL-RETURN {n}"}
             for n in range(3)]
RUNS: dict[str, list[dict[str, Any]]] = {
    **{convention: TALKS for convention in CONVENTIONS + CONVERSATIONS},
    "pydantic_ai_tools": TOOL_RUNS, "genai_workflow": TALKS[:2], "traceloop_tools": TOOL_RUNS}
assert set(RUNS) == set(CONVENTIONS + MORE_RUNS + CONVERSATIONS)
# their spans carry the cases' conversation ids (pydantic-ai gives each run an id of its own)
CONVERSING = ("openinference", "traceloop", "mastra_memory")


def _text(read: Callable[[Any], str], value: Any) -> str:
    try:
        return read(value)
    except InputError:
        return repr(value)


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


def _steps(steps: tuple[Step, ...]) -> Reading:
    return tuple((s.type, s.name, repr(s.arguments), repr(s.result), s.error, s.model,
                  s.input_tokens, s.output_tokens, s.start_ms, s.duration_ms,
                  _steps(s.children)) for s in steps)


class _RunRecording(_Recording):
    """A run scorer: keeps each run's question, answer and steps."""

    id = "run-recording"
    name = "run recording"
    scope = "run"

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        run = call.trajectory
        with self._lock:
            self.seen.append((_text(question_text, call.input), _text(answer_text, call.output),
                              run.duration_ms, _steps(run.steps)))
        return ScoreResult(run_id=call.run_id or "", scorer_id=self.id, scorer_name=self.name,
                           score=1.0)


class _TurnRecording(_Recording):
    """A conversation scorer: keeps each conversation's turns, in order."""

    id = "turn-recording"
    name = "turn recording"
    scope = "conversation"

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        with self._lock:
            self.seen.append(tuple((_text(question_text, t.input), _text(answer_text, t.output))
                                   for t in call.turns))
        return ScoreResult(run_id=call.run_id or "", scorer_id=self.id, scorer_name=self.name,
                           score=1.0)


class _Scorers:
    """One scorer of each scope; what each saw, sorted (the order runs land in is not read)."""

    def __init__(self) -> None:
        self.calls, self.runs, self.turns = _Recording(), _RunRecording(), _TurnRecording()
        self.all = [self.calls, self.runs, self.turns]

    def seen(self) -> tuple[list[Reading], ...]:
        return tuple(sorted(scorer.seen, key=repr) for scorer in self.all)


QUIET = {"quiet_s": 0.3}  # of runs (at the gateway) and conversations


class _Recorded(IdGenerator):
    """Gives the SDK the ids the library recorded: the next span's, set before it starts."""

    def __init__(self) -> None:
        self.trace_id = 0
        self.span_id = 0

    def generate_trace_id(self) -> int:
        return self.trace_id

    def generate_span_id(self) -> int:
        return self.span_id


def _through_the_processor(spans: list[ReceivedSpan]) -> tuple[list[Reading], ...]:
    scorers = _Scorers()
    ids = _Recorded()
    provider = TracerProvider(id_generator=ids)
    provider.add_span_processor(tracescore.ScoringSpanProcessor(
        SimpleSpanProcessor(InMemorySpanExporter()), scorers.all,
        recognise=tracescore.build_recognisers(), isolation="thread", conversations=QUIET))
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
    provider.shutdown()  # conversations still quiet are scored now (nothing keeps their turns)
    return scorers.seen()


def _through_the_gateway(lines: list[str], tmp_path: Path, receiver: OTLPReceiver,
                         expected: tuple[list[Reading], ...]) -> tuple[list[Reading], ...]:
    """The lines posted to a gateway; what its scorers saw once they saw as many runs and
    conversations as `expected` (its journal keeps quiet conversations over a stop: they are
    waited for here) or 30 s passed."""
    from tracescore.gateway import Gateway, GatewayConfig

    scorers = _Scorers()
    sent = sum(len(spans_from_otlp_json(line)) for line in lines)
    gateway = Gateway(GatewayConfig(
        grpc_endpoint="127.0.0.1:0", http_endpoint="127.0.0.1:0", health_endpoint="127.0.0.1:0",
        exporter_endpoint=receiver.grpc_endpoint, journal_path=str(tmp_path / "journal.db"),
        scorers=scorers.all, isolation="thread", shutdown_timeout_s=10.0, runs=QUIET,
        conversations=QUIET)).start()
    try:
        assert gateway.http_port is not None
        post_otlp_json(gateway.http_port, lines, timeout_s=10)
        receiver.wait_for_spans(sent, timeout=60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(
                len(scorer.seen) < len(want) for scorer, want in zip(scorers.all, expected)):
            time.sleep(0.05)
    finally:
        gateway.stop(timeout_s=5)
    return scorers.seen()


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[str]]]:
    folder = tmp_path_factory.mktemp("conventions")
    found = {}
    for convention, cases in RUNS.items():
        out = export_convention(convention, cases, folder / f"{convention}.jsonl")
        found[convention] = [line for line in out.read_text("utf-8").splitlines() if line.strip()]
    yield found


@pytest.mark.parametrize("convention", list(RUNS))
def test_both_doors_read_the_same_from_every_convention(
        exported: dict[str, list[str]], convention: str, tmp_path: Path,
        otlp_receiver: OTLPReceiver) -> None:
    lines = exported[convention]
    spans = [span for line in lines for span in spans_from_otlp_json(line)]
    in_process = _through_the_processor(spans)
    gateway = _through_the_gateway(lines, tmp_path, otlp_receiver, in_process)
    calls, runs, turns = in_process
    cases = RUNS[convention]
    assert calls, f"no agent span of {convention} was scored in process"
    assert len(calls) >= len(cases)
    if convention in ("genai", "openinference"):  # their agents call a tool: the reading sees it
        assert all(reading[3] for reading in calls)
    # each case's agent call is a run of its own, read with its steps
    assert len(runs) == len(cases), runs
    if convention == "traceloop_tools":  # OpenLLMetry @tool spans: tool calls and context
        assert sorted((r[0], tuple((t[0], t[1]) for t in r[3]), r[4]) for r in calls) == sorted(
            (c["question"], (("lookup", repr({"args": [c["question"]], "kwargs": {"units": "F"}})),
                             ("forecast", repr(["Paris"]))),  # positional: no names
             (c["tool_result"], '{"city": "Paris", "sky": "clear"}')) for c in cases)
    if convention == "pydantic_ai_tools":  # a tool call per round
        assert sorted(len(r[3]) for r in runs) == [c["rounds"] for c in cases]
    if convention in CONVERSING:  # two conversations of two turns, in the order they were asked
        assert sorted(t[0] for talk in turns for t in talk) == sorted(
            c["question"] for c in cases)
        assert sorted(tuple(t[0] for t in talk) for talk in turns) == sorted([
            (cases[0]["question"], cases[2]["question"]),
            (cases[1]["question"], cases[3]["question"])])
    assert gateway[0] == calls
    assert gateway[1] == runs
    assert gateway[2] == turns
