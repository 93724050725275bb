"""Span trees run through both front doors: the span processor (the tree is run live under a
`ScoringSpanProcessor` that recognises every built-in convention) and the gateway's engine (the
same tree run under an in-memory exporter, its spans sent one export request per span, in the
order they ended, as a `SimpleSpanProcessor` sends them). What comes out of each door: which
spans carry a score (by their `test.node` attribute), what the scorer was given, what was marked
unscored and what was counted unreadable."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace as trace_api
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

import tracescore
from tracescore import _semconv as sc
from tracescore.scoring import Scorer, ScoreResult, ScorerInput
from tracescore.scoring._inputs import answer_text, question_text

NODE = "test.node"  # which node of the tree a span is


@dataclass
class Node:
    """One span of a tree: its name, attributes and the spans run inside it, in order."""

    name: str
    attributes: dict[str, Any] = field(default_factory=dict)
    children: list[Node] = field(default_factory=list)
    kind: SpanKind = SpanKind.INTERNAL
    remote_parent: bool = False  # its parent is in another service (a request's top span)


def messages(role: str, text: str) -> str:
    """GenAI-semconv messages JSON of one message."""
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def chat(question: str, answer: str, system: str = "You are a helpful agent.") -> Node:
    """A GenAI `chat` model call: the system prompt and the question in, the answer out."""
    return Node("chat m", {
        sc.GEN_AI_OPERATION_NAME: "chat", sc.GEN_AI_REQUEST_MODEL: "m",
        sc.GEN_AI_INPUT_MESSAGES: json.dumps([
            {"role": "system", "parts": [{"type": "text", "content": system}]},
            {"role": "user", "parts": [{"type": "text", "content": question}]}]),
        sc.GEN_AI_OUTPUT_MESSAGES: messages("assistant", answer)})


def tool(name: str = "lookup", result: str = "Sunny") -> Node:
    return Node(f"execute_tool {name}", {sc.GEN_AI_OPERATION_NAME: "execute_tool",
                                          sc.GEN_AI_TOOL_NAME: name,
                                          sc.GEN_AI_TOOL_CALL_ARGUMENTS: '{"city": "Paris"}',
                                          sc.GEN_AI_TOOL_CALL_RESULT: result})


class Recording(Scorer):
    """Scores 1 and keeps the question and answer text it was given."""

    id = "recording"
    name = "recording"
    uses_judge = False

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        with self._lock:
            self.seen.append((question_text(call.input), answer_text(call.output)))
        return ScoreResult(run_id=call.run_id or "", scorer_id=self.id, scorer_name=self.name,
                           score=1.0)


@dataclass
class Outcome:
    """What one door made of some trees."""

    scored: list[str]  # `test.node` of the spans that carry a score, sorted
    seen: list[tuple[str, str]]  # (question, answer) the scorer was given, sorted
    unscored: list[str]  # `test.node` of spans marked unscored
    unreadable: Counter[tuple[str, str]]  # (framework, reason) counted
    spans: int  # spans that came out


def _numbered(tree: Node, prefix: str) -> None:
    tree.attributes.setdefault(NODE, prefix)
    for index, child in enumerate(tree.children):
        _numbered(child, f"{prefix}.{index}")


def run(tracer: Any, tree: Node) -> None:
    """Run `tree` live: each span starts inside its parent and ends after its children."""
    context = None
    if tree.remote_parent:
        context = trace_api.set_span_in_context(NonRecordingSpan(SpanContext(
            trace_id=random.getrandbits(127) | 1,
            span_id=0xABC, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))))
    with tracer.start_as_current_span(tree.name, context=context, attributes=tree.attributes,
                                      kind=tree.kind):
        for child in tree.children:
            run(tracer, child)


def _node_of(attributes: Any) -> str:
    return str(dict(attributes or {}).get(NODE, "?"))


def through_the_processor(trees: Sequence[Node]) -> Outcome:
    for index, tree in enumerate(trees):
        _numbered(tree, str(index))
    scorer = Recording()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    processor = tracescore.ScoringSpanProcessor(
        SimpleSpanProcessor(exporter), [scorer], recognise=tracescore.build_recognisers(),
        isolation="thread")
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("trees")
    for tree in trees:
        run(tracer, tree)
    assert provider.force_flush(30_000)
    stats = processor.stats()
    provider.shutdown()
    spans = exporter.get_finished_spans()
    unreadable: Counter[tuple[str, str]] = Counter()
    for key, value in stats.items():
        if key.startswith("unreadable.") and value:
            _, framework, reason = key.split(".", 2)
            unreadable[(framework, reason)] += value
    return Outcome(
        sorted(_node_of(s.attributes) for s in spans
               if any(e.name == sc.GEN_AI_EVALUATION_RESULT for e in s.events)),
        sorted(scorer.seen),
        sorted(_node_of(s.attributes) for s in spans
               if any(e.name == sc.TS_UNSCORED for e in s.events)),
        unreadable, len(spans))


class _Collected:
    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self._lock = threading.Lock()

    def put(self, ids: tuple[int, ...], body: bytes, count: int) -> None:
        with self._lock:
            self.requests.append(ExportTraceServiceRequest.FromString(body))


@contextmanager
def engine(llm_wait_s: float = 0.5, journal: Any = None
           ) -> Iterator[tuple[Any, Recording, _Collected, Any]]:
    """The gateway's engine with a recording scorer, every built-in convention, no journal
    unless given."""
    from tracescore.gateway._engine import Engine
    from tracescore.gateway._metrics import GatewayMetrics

    scorer, output, metrics = Recording(), _Collected(), GatewayMetrics()
    built = Engine(scorers=[scorer], recognisers=tracescore.build_recognisers(), output=output,
                   metrics=metrics, processor_options={"isolation": "thread"},
                   trace_options={"llm_wait_s": llm_wait_s}, journal=journal)
    try:
        yield built, scorer, output, metrics
    finally:
        built.shutdown(10.0)


def sent_requests(trees: Sequence[Node]) -> list[ExportTraceServiceRequest]:
    """The spans of `trees`, one request per span in the order they ended."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("trees")
    for tree in trees:
        run(tracer, tree)
    provider.shutdown()
    return [encode_spans([span]) for span in memory.get_finished_spans()]


def through_the_gateway(trees: Sequence[Node], llm_wait_s: float = 0.5,
                        shuffled: int | None = None) -> Outcome:
    """`shuffled`: every span in one request, in an order shuffled with this seed (as a
    collector's batch may hold them), instead of one request per span in end order."""
    for index, tree in enumerate(trees):
        _numbered(tree, str(index))
    with engine(llm_wait_s) as (built, scorer, output, metrics):
        requests = sent_requests(trees)
        if shuffled is not None:
            spans = [span for request in requests for rs in request.resource_spans
                     for ss in rs.scope_spans for span in ss.spans]
            random.Random(shuffled).shuffle(spans)
            requests = requests[:1]
            del requests[0].resource_spans[0].scope_spans[0].spans[:]
            requests[0].resource_spans[0].scope_spans[0].spans.extend(spans)
        for request in requests:
            built.accept(request, request.SerializeToString())
        deadline = time.monotonic() + 10.0
        while built.held and time.monotonic() < deadline:  # scored, or their wait is over
            time.sleep(0.01)
        assert built.flush(10.0)
    spans = [span for request in output.requests for rs in request.resource_spans
             for ss in rs.scope_spans for span in ss.spans]
    from tracescore.online.intake import attributes_of

    def named(span: Any, event: str) -> bool:
        return any(e.name == event for e in span.events)

    return Outcome(
        sorted(_node_of(attributes_of(s.attributes)) for s in spans
               if named(s, sc.GEN_AI_EVALUATION_RESULT)),
        sorted(scorer.seen),
        sorted(_node_of(attributes_of(s.attributes)) for s in spans
               if named(s, sc.TS_UNSCORED)),
        Counter(metrics.labelled("unreadable_agent_spans")), len(spans))


def both(trees_of: Any) -> tuple[Outcome, Outcome]:
    """(processor, gateway) outcomes of the trees `trees_of()` builds (built twice: numbered
    in place)."""
    return through_the_processor(trees_of()), through_the_gateway(trees_of())
