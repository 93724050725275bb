"""Content from any carrier, through both front doors (issue 34, families 1 and 2): agent spans
whose question and answer are under keys no convention names (`<vendor>.observation.input`,
`<vendor>.spanInputs`, `<vendor>:input`, `function.args`), in the encodings frameworks record
(JSON in JSON, argument tuples, `{"args", "kwargs"}`, keyword-argument objects, chat message
reprs), with system prompts and tool returns beside them. Each door judges the user's question
and the agent's answer, and a `reference:` table keyed by the question gives similarity 1.0."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _span_trees import Recording
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import _semconv as sc
from tracescore.online import OnlineScorer
from tracescore.scoring import ContentSimilarityScorer
from tracescore.testing import OTLPReceiver

SYSTEM = "You are a terse geography assistant. Never mention these rules."
TOOL = "tool returned: population 2.1 million"


def _chat(role: str, text: str) -> str:
    """A chat message object's repr, as Microsoft Agent Framework records it."""
    return (f"ChatMessage(_role=<ChatRole.{role.upper()}: '{role}'>, "
            f"_content=[TextContent(text={text!r})], author_name=None)")


def _cases() -> list[tuple[str, str, dict[str, Any]]]:
    """(question, answer, span attributes) per family member: the marker that makes the span
    an agent call, the content elsewhere."""
    invoke = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "geo"}
    q, a = "What is the capital of {}?", "{} is the capital of {}."
    return [
        # JSON of the call's keyword arguments, itself JSON-encoded; the answer JSON-in-JSON
        (q.format("France"), a.format("Paris", "France"), {
            **invoke,
            "langfuse.observation.input": json.dumps(json.dumps({
                "task": q.format("France"), "stream": False, "reset": True, "images": None})),
            "langfuse.observation.output": json.dumps(json.dumps(a.format("Paris", "France"))),
            "langfuse.observation.metadata.system_prompt": SYSTEM}),
        # a Python repr of the argument tuple; the answer a JSON string
        (q.format("Peru"), a.format("Lima", "Peru"), {
            "openinference.span.kind": "AGENT", "mlflow.spanType": "AGENT",
            "mlflow.spanInputs": repr((q.format("Peru"), "gpt-4o", True)),
            "mlflow.spanOutputs": json.dumps(a.format("Lima", "Peru")),
            "mlflow.spanFunctionName": "answer"}),
        # {"args", "kwargs"}; the answer a list of chat message reprs led by the system prompt
        (q.format("Chile"), a.format("Santiago", "Chile"), {
            "traceloop.span.kind": "agent", "traceloop.entity.name": "geo",
            "acme:input": json.dumps({"args": [q.format("Chile")],
                                      "kwargs": {"stream": False, "session_id": "s-1"}}),
            "acme:output": "[" + _chat("system", SYSTEM) + ", "
                           + _chat("assistant", a.format("Santiago", "Chile")) + "]",
            "acme:tool.output": TOOL}),
        # chat message reprs with a system prompt and a tool return; a response object's repr
        (q.format("Kenya"), a.format("Nairobi", "Kenya"), {
            **invoke,
            "function.args": "[" + ", ".join([
                _chat("system", SYSTEM), _chat("user", q.format("Kenya")),
                _chat("tool", TOOL)]) + "]",
            "function.result": f"AgentResponse(messages=[{_chat('assistant', a.format('Nairobi', 'Kenya'))}])",
            "function.system_prompt": SYSTEM,
            "gen_ai.tool.call.result": TOOL}),
        # keyword arguments whose system prompt reads as prose too ("instructions")
        (q.format("Japan"), a.format("Tokyo", "Japan"), {
            "openinference.span.kind": "AGENT", "input.mime_type": "application/json",
            "input.value": json.dumps({"instructions": SYSTEM, "user_text": q.format("Japan"),
                                       "max_turns": 3}),
            "output.value": a.format("Tokyo", "Japan")}),
        # a mapping picks the argument: `input_field: args.0` of a tuple repr
        (q.format("Ghana"), a.format("Accra", "Ghana"), {
            "app.kind": "agent", "app.call": repr((q.format("Ghana"), "gpt-4o", True)),
            "app.reply": a.format("Accra", "Ghana")}),
    ]


MAPPING = {"name": "decorated", "attributes": {"app.kind": "agent"}, "input": "app.call",
           "input_field": "args.0", "output": "app.reply"}
CASES = _cases()


Case = tuple[str, str, dict[str, Any]]  # (question, answer, span attributes)


def _scorers(recording: Recording, cases: list[Case]) -> list[Any]:
    reference = {question: answer for question, answer, _ in cases}
    return [recording, OnlineScorer(ContentSimilarityScorer(), reference=reference)]


def _send(tracer: Any, cases: list[Case]) -> None:
    for index, (_, _, attributes) in enumerate(cases):
        with tracer.start_as_current_span(f"agent step {index}", attributes=attributes):
            pass


def _similarity(spans: list[tuple[Any, list[tuple[str, Any]]]]) -> list[float]:
    """The content-similarity scores on the spans ((attributes, [(event name, attributes)]))."""
    return sorted(float(attrs[sc.GEN_AI_EVALUATION_SCORE_VALUE]) for _, events in spans
                  for name, attrs in events if name == sc.GEN_AI_EVALUATION_RESULT
                  and attrs.get(sc.TS_SCORER_ID) == "content-similarity")


def in_process(recording: Recording, cases: list[Case], _: Path, __: OTLPReceiver
               ) -> list[float]:
    """The spans of `cases` through `ScoringSpanProcessor`: the similarity scores exported."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(tracescore.ScoringSpanProcessor(
        SimpleSpanProcessor(exporter), _scorers(recording, cases),
        recognise=tracescore.build_recognisers([MAPPING]), isolation="thread"))
    _send(provider.get_tracer("some.framework"), cases)
    assert provider.force_flush(30_000)
    provider.shutdown()
    return _similarity([(s.attributes, [(e.name, e.attributes) for e in s.events])
                        for s in exporter.get_finished_spans()])


def through_the_gateway(recording: Recording, cases: list[Case], folder: Path,
                        receiver: OTLPReceiver) -> list[float]:
    """The spans of `cases` through `tracescore serve`'s config: the mapping under
    `recognise.mappings`, the similarity scorer's `reference:` a dataset file of the questions
    (some as a tracer recorded them); the similarity scores forwarded."""
    from tracescore.gateway import Gateway, load_gateway_config
    from tracescore.gateway._config import with_overrides

    receiver.clear()
    (folder / "reference.jsonl").write_text("".join(
        json.dumps({"input": json.dumps({"task": q, "stream": False}) if n % 2 else q,
                    "ground_truth": a}) + "\n" for n, (q, a, _) in enumerate(cases)))
    (folder / "gateway.yaml").write_text(
        "scoring:\n  isolation: thread\n"
        "  scorers:\n    - {scorer: similarity, reference: reference.jsonl}\n"
        f"recognise:\n  mappings: [{json.dumps(MAPPING)}]\n")
    config = load_gateway_config(folder / "gateway.yaml", {
        "receivers.grpc": "127.0.0.1:0", "receivers.http": "127.0.0.1:0",
        "receivers.health": "127.0.0.1:0", "exporter.endpoint": receiver.grpc_endpoint,
        "journal.path": str(folder / "journal.db"), "shutdown_timeout_s": 10.0},
        environ={})
    config = with_overrides(config, scorers=(recording, *(config.scorers or ())))
    gateway = Gateway(config).start()
    try:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
            endpoint=f"http://127.0.0.1:{gateway.http_port}/v1/traces")))
        _send(provider.get_tracer("some.framework"), cases)
        provider.shutdown()
        receiver.wait_for_spans(len(cases), timeout=60)
    finally:
        gateway.stop(timeout_s=5)
    return _similarity([(s.attributes, [(e.name, e.attributes) for e in s.events])
                        for s in receiver.spans])


Door = Callable[[Recording, list[Case], Path, OTLPReceiver], list[float]]
DOORS = pytest.mark.parametrize("door", [in_process, through_the_gateway],
                                ids=["process", "gateway"])


@DOORS
def test_every_carrier_and_encoding_gives_the_users_question_and_the_agents_answer(
        door: Door, tmp_path: Path, otlp_receiver: OTLPReceiver) -> None:
    recording = Recording()
    similarity = door(recording, CASES, tmp_path, otlp_receiver)
    assert sorted(recording.seen) == sorted((q, a) for q, a, _ in CASES)
    # the reference table is keyed by the question as the user typed it
    assert similarity == [1.0] * len(CASES)
