"""Spans that look like agent calls but cannot be read are never unscored in silence.

Generated agent spans of each convention (GenAI, OpenInference, OpenLLMetry, pydantic-ai, Mastra,
the Vercel AI SDK, a user's mapping) lose their input, their output or both; each family also
has readable agent spans and ordinary spans (tools, model calls) around them. Through a real
`tracescore serve` process and in process (`ScoringSpanProcessor(recognise=...)`), every
unreadable one is counted per (framework, reason), one warning is logged per (framework, reason)
naming the span's attribute keys and never their values, and nothing else is counted.
"""

from __future__ import annotations

import json
import logging
import random
import re
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import _semconv as sc
from tracescore.online.intake import _diagnose
from tracescore.online.intake._diagnose import REASONS, Diagnoser
from tracescore.testing import GatewayProcess, OTLPReceiver

SECRET = "SECRET-7f3a"  # in every attribute value of the generated agent spans
USER_MAPPING = {"name": "billing_bot", "attributes": {"app.kind": "agent"},
                "input": "app.request_text", "output": "app.reply_text", "agent": "app.bot"}


@dataclass(frozen=True)
class Family:
    """One convention's agent spans: name, the attributes that mark them, where the content is."""

    name: str  # "{agent}" is replaced
    marks: dict[str, Any]
    input: str
    output: str
    drops: tuple[str, ...] = ("input", "output", "both")  # what a generated span may lose
    others: tuple[tuple[str, dict[str, Any]], ...] = field(default=())  # ordinary spans


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


FAMILIES: dict[str, Family] = {
    "genai": Family("invoke_agent {agent}", {sc.GEN_AI_OPERATION_NAME: "invoke_agent"},
                    sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES,
                    others=(("chat m", {sc.GEN_AI_OPERATION_NAME: "chat"}),
                            ("execute_tool lookup", {sc.GEN_AI_OPERATION_NAME: "execute_tool"}))),
    "openinference": Family("{agent}", {sc.OI_SPAN_KIND: "AGENT"}, sc.OI_INPUT_VALUE,
                            sc.OI_OUTPUT_VALUE,
                            others=(("lookup", {sc.OI_SPAN_KIND: "TOOL"}),
                                    ("llm", {sc.OI_SPAN_KIND: "LLM"}))),
    "traceloop": Family("{agent}.agent", {sc.TL_SPAN_KIND: "agent"}, sc.TL_ENTITY_INPUT,
                        sc.TL_ENTITY_OUTPUT, others=(("lookup.task", {sc.TL_SPAN_KIND: "task"}),)),
    # without its messages a pydantic-ai run is a GenAI invoke_agent span: it loses its output only
    "pydantic_ai": Family("invoke_agent {agent}", {sc.GEN_AI_OPERATION_NAME: "invoke_agent",
                                                   sc.PAI_AGENT_NAME: "{agent}"},
                          sc.PAI_ALL_MESSAGES, sc.PAI_FINAL_RESULT, drops=("output",)),
    "mastra": Family("invoke_agent {agent}", {sc.GEN_AI_OPERATION_NAME: "invoke_agent",
                                              "mastra.span.type": "agent_run"},
                     "mastra.agent_run.input", "mastra.agent_run.output",
                     others=(("model_generation m", {"mastra.span.type": "model_generation",
                                                     sc.GEN_AI_OPERATION_NAME: "chat"}),)),
    "vercel_ai": Family("ai.generateText", {"ai.operationId": "ai.generateText"}, "ai.prompt",
                        "ai.response.text",
                        others=(("ai.generateText.doGenerate",
                                 {"ai.operationId": "ai.generateText.doGenerate"}),
                                ("ai.toolCall", {"ai.operationId": "ai.toolCall"}))),
    "billing_bot": Family("handle", {"app.kind": "agent"}, "app.request_text", "app.reply_text",
                          others=(("handle", {"app.kind": "tool"}),)),
}
_REASON_OF = {"input": "no_input_attribute", "output": "no_output_attribute",
              "both": "no_input_or_output"}


@dataclass
class Generated:
    spans: list[tuple[str, dict[str, Any]]]  # (name, attributes) in sending order
    unreadable: Counter[tuple[str, str]]  # (framework, reason) -> spans
    readable: int


def _content(family: str, key: str, text: str) -> str:
    if key == sc.GEN_AI_INPUT_MESSAGES or key == sc.PAI_ALL_MESSAGES:
        return _messages("user", text)
    if key == sc.GEN_AI_OUTPUT_MESSAGES:
        return _messages("assistant", text)
    if family == "mastra" and key.endswith("output"):
        return json.dumps({"text": text})
    return text


def generated(seed: int, per_family: int) -> Generated:
    """Agent spans of every family, some readable, the others without input, output or both;
    with ordinary spans between them and extra attributes of random keys."""
    rng = random.Random(seed)
    spans: list[tuple[str, dict[str, Any]]] = []
    unreadable: Counter[tuple[str, str]] = Counter()
    readable = 0
    for framework, family in FAMILIES.items():
        for index in range(per_family):
            agent = f"agent{rng.randint(0, 9)}"
            attributes = {k: v.format(agent=agent) if isinstance(v, str) else v
                          for k, v in family.marks.items()}
            attributes[family.input] = _content(framework, family.input, f"{SECRET} question?")
            attributes[family.output] = _content(framework, family.output, f"{SECRET} answer")
            attributes[f"app.extra{rng.randint(0, 99)}"] = f"{SECRET} extra"
            firsts = (family.drops[0], family.drops[-1], None)  # each family has all three
            drop = firsts[index] if index < len(firsts) else rng.choice((None, *family.drops))
            if drop in ("input", "both"):
                del attributes[family.input]
            if drop in ("output", "both"):
                del attributes[family.output]
            if drop is None:
                readable += 1
            else:
                unreadable[(framework, _REASON_OF[drop])] += 1
            spans.append((family.name.format(agent=agent), attributes))
            for name, marks in family.others:
                spans.append((name, {**marks, "app.note": f"{SECRET} other"}))
    return Generated(spans, unreadable, readable)


CASES = generated(seed=22, per_family=6)


def _send(provider: TracerProvider, spans: list[tuple[str, dict[str, Any]]]) -> None:
    tracer = provider.get_tracer("generated.agents")
    for name, attributes in spans:
        tracer.start_span(name, attributes=attributes).end()


# --- through a real gateway process ---------------------------------------------------------------
@pytest.fixture(scope="module")
def gateway_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    """The generated spans sent to `tracescore serve` over OTLP/gRPC: its /metrics text and its
    log messages once every span came out."""
    folder = tmp_path_factory.mktemp("unscored")
    config = folder / "gateway.yaml"
    config.write_text("scoring:\n  isolation: thread\n  scorers: [{scorer: similarity}]\n"
                      f"recognise:\n  mappings: [{json.dumps(USER_MAPPING)}]\n", encoding="utf-8")
    with OTLPReceiver() as receiver:
        gateway = GatewayProcess(["--config", str(config), "--endpoint", receiver.grpc_endpoint,
                                  "--journal", str(folder / "journal.db")]).start()
        try:
            provider = TracerProvider(resource=Resource.create({"service.name": "agents"}))
            provider.add_span_processor(SimpleSpanProcessor(
                OTLPSpanExporter(endpoint=gateway.grpc_endpoint, insecure=True)))
            _send(provider, CASES.spans)
            provider.shutdown()
            received = receiver.wait_for_spans(len(CASES.spans), timeout=60)
            url = f"http://127.0.0.1:{gateway.health_port}/metrics"
            with urllib.request.urlopen(url, timeout=10) as reply:
                metrics = reply.read().decode()
        finally:
            gateway.stop()
    assert len(received) == len(CASES.spans)  # every span forwarded, once
    scored = [s for s in received if s.events_named(sc.GEN_AI_EVALUATION_RESULT)]
    assert len(scored) == CASES.readable
    yield metrics, [str(entry.get("message", "")) for entry in gateway.logs]


def _prometheus_counts(text: str) -> Counter[tuple[str, str]]:
    counts: Counter[tuple[str, str]] = Counter()
    pattern = re.compile(r'^tracescore_gateway_unreadable_agent_spans_total'
                         r'\{framework="([^"]*)",reason="([^"]*)"\} (\d+)$')
    for line in text.splitlines():
        found = pattern.match(line)
        if found:
            counts[(found.group(1), found.group(2))] += int(found.group(3))
    return counts


def test_the_gateway_counts_unreadable_agent_spans_per_framework_and_reason(
        gateway_run: tuple[str, list[str]]) -> None:
    metrics, _ = gateway_run
    assert "# TYPE tracescore_gateway_unreadable_agent_spans_total counter" in metrics
    assert _prometheus_counts(metrics) == CASES.unreadable
    assert {framework for framework, _ in CASES.unreadable} == set(FAMILIES)


def test_the_gateway_logs_once_per_framework_and_reason_with_keys_never_values(
        gateway_run: tuple[str, list[str]]) -> None:
    _, messages = gateway_run
    assert not [m for m in messages if SECRET in m]
    warnings = [m for m in messages if m.startswith("tracescore: agent span not scored")]
    assert len(warnings) == len(CASES.unreadable)  # once per pair, not once per span
    for framework, reason in CASES.unreadable:
        (line,) = [m for m in warnings if f"({framework})" in m and REASONS[reason] in m]
        family = FAMILIES[framework]
        present = {"no_input_attribute": family.output, "no_output_attribute": family.input}
        if reason in present:
            assert present[reason] in line  # the keys it has are named
        assert "app.extra" in line


# --- in process -----------------------------------------------------------------------------------
def test_the_processor_counts_the_same_in_stats_and_logs_once(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_diagnose, "_warned", set())  # a fresh process's log-once state
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    processor = tracescore.ScoringSpanProcessor(
        SimpleSpanProcessor(exporter), [tracescore.ContentSimilarityScorer()],
        recognise=tracescore.build_recognisers([USER_MAPPING]), isolation="thread")
    provider.add_span_processor(processor)
    with caplog.at_level(logging.WARNING, logger="tracescore"):
        _send(provider, CASES.spans)
        assert provider.force_flush(30_000)
    stats = processor.stats()
    provider.shutdown()
    counted = Counter({tuple(key.split(".")[1:]): value for key, value in stats.items()
                       if key.startswith("unreadable.")})
    assert counted == CASES.unreadable
    assert len(exporter.get_finished_spans()) == len(CASES.spans)
    assert stats["scored"] == CASES.readable
    warnings = [r.getMessage() for r in caplog.records
                if r.getMessage().startswith("tracescore: agent span not scored")]
    assert len(warnings) == len(CASES.unreadable)
    assert not [r for r in caplog.records if SECRET in r.getMessage()]


@pytest.fixture
def diagnosed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the spans that reach a diagnosis, in order."""
    monkeypatch.setattr(_diagnose, "_warned", set())
    seen: list[str] = []
    original = Diagnoser.__call__

    def spy(self: Diagnoser, name: str, attributes: Any) -> Any:
        seen.append(name)
        return original(self, name, attributes)

    monkeypatch.setattr(Diagnoser, "__call__", spy)
    return seen


def test_the_processor_diagnoses_only_agent_like_spans_and_only_its_own_conventions(
        diagnosed: list[str]) -> None:
    """Ordinary spans and spans of conventions the processor was not asked to read never reach
    the diagnosis: the check costs them nothing more than the chain's marker test."""
    provider = TracerProvider()
    processor = tracescore.ScoringSpanProcessor(
        SimpleSpanProcessor(InMemorySpanExporter()), [tracescore.ContentSimilarityScorer()],
        score_genai_spans=True, isolation="thread")
    provider.add_span_processor(processor)
    plain = [("GET /", {"http.method": "GET"}), ("db", {"db.system": "sqlite"})]
    agents = [(name, attrs) for name, attrs in CASES.spans if sc.GEN_AI_OPERATION_NAME not in attrs]
    _send(provider, plain + agents)
    assert provider.force_flush(30_000)
    assert diagnosed == []  # no span carried gen_ai.operation.name: the diagnosis never ran
    _send(provider, [(n, a) for n, a in CASES.spans if a.get(sc.GEN_AI_OPERATION_NAME) == "chat"])
    assert provider.force_flush(30_000)
    assert diagnosed  # these did (gen_ai.operation.name chat): not agent-like, not counted
    assert not [key for key in processor.stats() if key.startswith("unreadable.")]
    provider.shutdown()


@pytest.mark.parametrize("reason, input_messages, output_messages", [
    ("no_question_text",
     [{"role": "system", "content": "Be brief."},
      {"role": "tool", "tool_call_id": "1", "content": "TOOL-RESULT"}],
     [{"role": "assistant", "content": "Paris"}]),
    ("no_output_text", [{"role": "user", "content": "Where?"}],
     [{"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "f"}}]}]),
    ("not_read", [{"role": "user", "content": "Where?"}], [{"role": "assistant", "content": "Paris"}]),
])
def test_a_rejected_span_with_both_attributes_is_told_apart_by_its_text(
        reason: str, input_messages: list[Any], output_messages: list[Any]) -> None:
    """The reason given for a span the chain rejected although its input and output attributes
    are there says what their text lacks (the question, the answer), or that neither lacks."""
    diagnose = Diagnoser(tracescore.build_recognisers())
    found = diagnose("invoke_workflow trip", {
        sc.GEN_AI_OPERATION_NAME: "invoke_workflow",
        sc.GEN_AI_INPUT_MESSAGES: json.dumps(input_messages),
        sc.GEN_AI_OUTPUT_MESSAGES: json.dumps(output_messages)})
    assert found is not None
    assert (found.framework, found.reason) == ("genai", reason)


def test_the_metrics_escape_label_values() -> None:
    from tracescore.gateway._metrics import GatewayMetrics

    metrics = GatewayMetrics()
    metrics.add_labelled("unreadable_agent_spans", ('my "bot"', "no_output_attribute"), 2)
    assert ('tracescore_gateway_unreadable_agent_spans_total{framework="my \\"bot\\"",'
            'reason="no_output_attribute"} 2') in metrics.prometheus()


def test_the_counts_reach_a_meter_provider_in_process_and_in_the_gateway() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from tracescore.gateway._metrics import GatewayMetrics

    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    provider = TracerProvider()
    provider.add_span_processor(tracescore.ScoringSpanProcessor(
        SimpleSpanProcessor(InMemorySpanExporter()), [tracescore.ContentSimilarityScorer()],
        recognise=tracescore.build_recognisers([USER_MAPPING]), isolation="thread",
        meter_provider=meters))
    gateway = GatewayMetrics()
    gateway.register(meters)
    for (framework, reason), count in CASES.unreadable.items():
        gateway.add_labelled("unreadable_agent_spans", (framework, reason), count)
    _send(provider, CASES.spans)
    assert provider.force_flush(30_000)
    provider.shutdown()
    points: dict[str, Counter[tuple[str, str]]] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if "unreadable" not in metric.name:
                    continue
                for point in metric.data.data_points:
                    attrs = dict(point.attributes or {})
                    labels = (attrs.get(sc.TS_UNREADABLE_FRAMEWORK, attrs.get("framework")),
                              attrs.get(sc.TS_UNREADABLE_REASON, attrs.get("reason")))
                    points.setdefault(metric.name, Counter())[labels] += int(
                        point.value)
    assert points[sc.METRIC_UNREADABLE_AGENT_SPANS] == CASES.unreadable
    assert points["tracescore.gateway.unreadable_agent_spans"] == CASES.unreadable
    meters.shutdown()


def test_the_gateway_engine_diagnoses_no_ordinary_span(diagnosed: list[str]) -> None:
    """A request of ordinary spans takes the engine's pass-through path without any diagnosis;
    a span with a marker but no agent call is diagnosed and not counted."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from tracescore.gateway._engine import Engine
    from tracescore.gateway._metrics import GatewayMetrics


    class Output:
        def __init__(self) -> None:
            self.count = 0

        def put(self, ids: tuple[int, ...], body: bytes, count: int) -> None:
            self.count += count

    def request(spans: list[tuple[str, dict[str, Any]]]) -> Any:
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        _send(provider, spans)
        return encode_spans(exporter.get_finished_spans())

    output, metrics = Output(), GatewayMetrics()
    engine = Engine(scorers=[tracescore.ContentSimilarityScorer()],
                    recognisers=tracescore.build_recognisers(), output=output, metrics=metrics,
                    processor_options={"isolation": "thread"},
                    trace_options={"llm_wait_s": 0})  # a span without content: decided at once
    plain = request([("GET /", {"http.method": "GET"}), ("db", {"db.system": "sqlite"})] * 5)
    engine.accept(plain, plain.SerializeToString())
    assert diagnosed == []
    others = [(n, a) for n, a in CASES.spans if a.get(sc.GEN_AI_OPERATION_NAME) == "chat"
              or a.get(sc.OI_SPAN_KIND) in ("TOOL", "LLM")]
    marked = request(others)
    engine.accept(marked, marked.SerializeToString())
    assert len(diagnosed) == len(others)
    assert metrics.labelled("unreadable_agent_spans") == {}
    unreadable = request([("invoke_agent geo", {sc.GEN_AI_OPERATION_NAME: "invoke_agent"})])
    engine.accept(unreadable, unreadable.SerializeToString())
    assert metrics.labelled("unreadable_agent_spans") == {("genai", "no_input_or_output"): 1}
    engine.shutdown(5.0)
    assert output.count == 10 + len(others) + 1
