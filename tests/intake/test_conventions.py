"""Agent spans of every common convention, as the real libraries export them, are recognised and
scored; their other spans are not.

The spans come from OpenTelemetry's GenAI util, OpenInference, OpenLLMetry (traceloop-sdk) and
pydantic-ai (format versions 5 and 2, and runs that continue a conversation) running in a side
venv, and from the Vercel AI SDK (TypeScript) under node (`rigs/conventions.py`,
installed on first use), exported as OTLP JSON lines; no span here is written by hand.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _reach import post_otlp_json
from click.testing import CliRunner
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context
from rigs.conventions import CONVENTIONS, convention_spans, export_convention

import tracescore
from tracescore import _semconv as sc
from tracescore.cli import main
from tracescore.online.intake._recognise import BUILTINS
from tracescore.scoring._inputs import answer_text, question_text
from tracescore.testing import OTLPReceiver, ReceivedSpan, spans_from_otlp_json

pytestmark = pytest.mark.slow  # installs the libraries in a side venv on first use (minutes)

# convention run -> (recogniser's convention name, {agent name: carries the ground truth})
EXPECTED: dict[str, tuple[str, dict[str, bool]]] = {
    "genai": ("genai", {"geo": True}),
    "openinference": ("openinference", {"geo": True}),
    "traceloop": ("traceloop", {"geo": True, "trip": False}),  # the agent and its workflow
    "pydantic_ai": ("pydantic_ai", {"geo": True}),
    "pydantic_ai_v2": ("pydantic_ai", {"geo": True}),
    "pydantic_ai_history": ("pydantic_ai", {"geo": True}),  # runs that continue a conversation
    "vercel_ai": ("genai", {"geo": False}),  # TypeScript: `ai` 7 with @ai-sdk/otel, under node
    "vercel_ai_v6": ("vercel_ai", {"geo": False}),  # `ai` 6 experimental_telemetry: ai.* spans
    "mastra": ("mastra", {"geo": False}),  # @mastra/core agent, @mastra/otel-exporter
}
_PIECES = ["Paris", "é", "日本", "🙂", '"', "'", "\\", "\n", "{", "}", "[", "]", ":", ",",
           "null", "  ", "\t", "<b>", "1.5", "-"]


def generated_cases(seed: int, count: int) -> list[dict[str, Any]]:
    """Questions, answers and ground truths built from awkward pieces (quotes, JSON syntax,
    unicode, whitespace), plus answers that are themselves JSON text."""
    rng = random.Random(seed)

    def text() -> str:
        return "Q" + "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 12)))

    cases: list[dict[str, Any]] = [
        {"question": "What is the capital of France?", "answer": "Paris", "ground_truth": "Paris"},
        {"question": "Give JSON", "answer": '{"capital": "Paris"}', "ground_truth": None},
        {"question": "List", "answer": "[1, 2]", "ground_truth": '"quoted"'},
    ]
    for _ in range(count - len(cases)):
        cases.append({"question": text(), "answer": text(),
                      "ground_truth": text() if rng.random() < 0.5 else None})
    return cases


CASES = generated_cases(seed=12, count=12)


def _recorded(convention: str, answer: str) -> str:
    """The answer as the library records it: Mastra writes a JSON text back compactly."""
    if convention == "mastra":
        try:
            return json.dumps(json.loads(answer), ensure_ascii=False, separators=(",", ":"))
        except ValueError:
            pass
    return answer


@pytest.fixture(scope="module")
def exported() -> Iterator[dict[str, list[ReceivedSpan]]]:
    yield {convention: convention_spans(convention, CASES) for convention in CONVENTIONS}


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_agent_spans_of_the_real_library_are_recognised(
        exported: dict[str, list[ReceivedSpan]], convention: str) -> None:
    name, agents = EXPECTED[convention]
    spans = exported[convention]
    markers = tracescore.recogniser_markers(BUILTINS.values())
    found: dict[str, list[tracescore.RecognisedCall]] = {agent: [] for agent in agents}
    others = 0
    for span in spans:
        call = tracescore.recognise(span.name, span.attributes)
        if call is None:
            others += 1
            continue
        assert markers & span.attributes.keys()
        assert call.convention == name
        found[call.agent].append(call)
    assert others >= len(CASES)  # each call also made a tool / task / model span: not agents
    for agent, carries_truth in agents.items():
        calls = found[agent]
        assert [question_text(c.input) for c in calls] == [c["question"] for c in CASES]
        assert [answer_text(c.output) for c in calls] == [_recorded(convention, c["answer"])
                                                          for c in CASES]
        if convention.startswith("pydantic_ai"):  # the conversation, ending at this run's prompt
            assert [c.input[-1] for c in calls] == [{"role": "user", "content": c["question"]}
                                                    for c in CASES]
            earlier = 2 if convention == "pydantic_ai_history" else 0  # the earlier turn is kept
            assert [len(c.input) for c in calls] == [earlier + 1] * len(CASES)
        truths = [c.ground_truth for c in calls]
        assert truths == ([c["ground_truth"] for c in CASES] if carries_truth else [None] * len(CASES))


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_only_the_conventions_own_recogniser_accepts_its_spans(
        exported: dict[str, list[ReceivedSpan]], convention: str) -> None:
    name, _ = EXPECTED[convention]
    others = [r for r in BUILTINS.values() if r.convention != name]
    for span in exported[convention]:
        assert tracescore.recognise(span.name, span.attributes, others) is None


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_the_processor_scores_each_conventions_agent_spans_in_process(
        exported: dict[str, list[ReceivedSpan]], convention: str) -> None:
    """The real library's spans replayed through an SDK pipeline (same scope, name, attributes):
    `recognise=` makes the processor score them, with their ground truth."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    scorer = tracescore.ContentSimilarityScorer()
    provider.add_span_processor(tracescore.ScoringSpanProcessor(
        SimpleSpanProcessor(exporter), [scorer], recognise=tracescore.build_recognisers(),
        isolation="thread"))
    sampled = SpanContext(trace_id=0xFFFF_FFFF_FFFF_FFFF_FFFF_FFFF_FFFF_FFFF, span_id=1,
                          is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    parent = set_span_in_context(NonRecordingSpan(sampled))
    for span in exported[convention]:
        provider.get_tracer(span.scope_name).start_span(
            span.name, context=parent, attributes=span.attributes).end()
    assert provider.force_flush(30_000)
    provider.shutdown()
    _, agents = EXPECTED[convention]
    scored = [s for s in exporter.get_finished_spans() if any(
        e.name == sc.GEN_AI_EVALUATION_RESULT for e in s.events)]
    assert len(scored) == len(agents) * len(CASES)
    assert len(exporter.get_finished_spans()) == len(exported[convention])  # each span once
    for scored_span in scored:
        (event,) = [e for e in scored_span.events if e.name == sc.GEN_AI_EVALUATION_RESULT]
        call = tracescore.recognise(scored_span.name, scored_span.attributes or {})
        assert call is not None
        expected = scorer.run(input=call.input, output=call.output, ground_truth=call.ground_truth)
        assert (event.attributes or {})[sc.GEN_AI_EVALUATION_SCORE_VALUE] == expected.score


def test_rescore_scores_the_agent_spans_of_every_convention_from_their_files(tmp_path: Path) -> None:
    """The gateway's engine (`tracescore rescore`) over the OTLP JSON lines the real libraries
    wrote: each agent span comes back with a score computed from what the library recorded."""
    traces = tmp_path / "traces.jsonl"
    cases = CASES[:3]
    for convention in CONVENTIONS:
        export_convention(convention, cases, traces)
    out = tmp_path / "rescored.jsonl"
    result = CliRunner().invoke(main, ["rescore", str(traces), "-s", "similarity", "-o", str(out)])
    assert result.exit_code == 0, result.output
    spans = [s for line in out.read_text().splitlines() if line.strip()
             for s in spans_from_otlp_json(line)]
    by_convention: dict[str, int] = {}
    scorer = tracescore.ContentSimilarityScorer()
    for span in spans:
        call = tracescore.recognise(span.name, span.attributes)
        assert call is not None  # only agent spans are written
        by_convention[call.convention] = by_convention.get(call.convention, 0) + 1
        (event,) = span.events_named(sc.GEN_AI_EVALUATION_RESULT)
        expected = scorer.run(input=call.input, output=call.output, ground_truth=call.ground_truth)
        assert event.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] == expected.score
    assert by_convention == {"genai": 6, "openinference": 3, "traceloop": 6, "pydantic_ai": 9,
                             "vercel_ai": 3, "mastra": 3}


def test_the_gateway_scores_every_conventions_agent_spans_received_over_otlp_json(
        tmp_path: Path, otlp_receiver: OTLPReceiver) -> None:
    """`tracescore serve`'s engine behind its OTLP/HTTP receiver: the real libraries' export
    requests are posted as they are; every span is forwarded once, the agent spans with a score."""
    from tracescore.gateway import Gateway, GatewayConfig

    traces = tmp_path / "traces.jsonl"
    for convention in CONVENTIONS:
        export_convention(convention, CASES[:2], traces)
    lines = [line for line in traces.read_text().splitlines() if line.strip()]
    sent = sum(len(spans_from_otlp_json(line)) for line in lines)
    gateway = Gateway(GatewayConfig(
        grpc_endpoint="127.0.0.1:0", http_endpoint="127.0.0.1:0", health_endpoint="127.0.0.1:0",
        exporter_endpoint=otlp_receiver.grpc_endpoint, journal_path=str(tmp_path / "journal.db"),
        scorers=[tracescore.create_content_similarity_scorer()], isolation="thread",
        shutdown_timeout_s=10.0)).start()
    try:
        assert gateway.http_port is not None
        post_otlp_json(gateway.http_port, lines, timeout_s=10)
        spans = otlp_receiver.wait_for_spans(sent, timeout=60)
    finally:
        gateway.stop(timeout_s=5)
    assert len({(s.trace_id, s.span_id) for s in spans}) == len(spans) == sent
    scored: dict[str, int] = {}
    for span in spans:
        call = tracescore.recognise(span.name, span.attributes)
        events = span.events_named(sc.GEN_AI_EVALUATION_RESULT)
        assert len(events) == (call is not None)
        if call is not None:
            scored[call.convention] = scored.get(call.convention, 0) + 1
    assert scored == {"genai": 4, "openinference": 2, "traceloop": 4, "pydantic_ai": 6,
                      "vercel_ai": 2, "mastra": 2}
