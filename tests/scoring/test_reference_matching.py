"""A `reference:` dataset file matches agent calls on their question text, whatever the shape of
the dataset's input or the call's (plain text, chat messages in any recorded shape, an AI SDK
`{"system", "prompt"}` object); a scorer that compares with a ground truth and found none says so
in its event instead of comparing the output with the input in silence."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _gateway_helpers import sender
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracescore
from tracescore import _semconv as sc
from tracescore._exporters import OTLPJsonFileExporter
from tracescore.cli import main
from tracescore.gateway import load_gateway_config
from tracescore.testing import spans_from_otlp_json

SYSTEM = "You answer questions about geography."


def _plain(q: str) -> Any:
    return q


def _genai(q: str) -> Any:
    return [{"role": "system", "parts": [{"type": "text", "content": SYSTEM}]},
            {"role": "user", "parts": [{"type": "text", "content": "Earlier question"}]},
            {"role": "assistant", "parts": [{"type": "text", "content": "Earlier answer"}]},
            {"role": "user", "parts": [{"type": "text", "content": q}]}]


def _openai(q: str) -> Any:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": [{"type": "text", "text": q}]}]


def _ai_sdk_prompt(q: str) -> Any:
    return {"system": SYSTEM, "prompt": q}


def _ai_sdk_messages(q: str) -> Any:
    return {"system": SYSTEM, "messages": [{"role": "user", "content": q}]}


def _pydantic_ai_tool_round(q: str) -> Any:  # the question, then a tool return recorded as "user"
    return [{"role": "user", "parts": [{"type": "text", "content": q}]},
            {"role": "assistant", "parts": [{"type": "tool_call", "id": "1", "name": "lookup"}]},
            {"role": "user", "parts": [{"type": "tool_call_response", "id": "1",
                                        "response": "a tool's answer"}]}]


SHAPES: dict[str, Callable[[str], Any]] = {f.__name__[1:]: f for f in (
    _plain, _genai, _openai, _ai_sdk_prompt, _ai_sdk_messages, _pydantic_ai_tool_round)}
_questions = st.lists(st.text(min_size=1, max_size=30).filter(str.strip), min_size=2, max_size=4,
                      unique_by=str.strip)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_questions, st.sampled_from(sorted(SHAPES)), st.sampled_from(sorted(SHAPES)))
def test_a_reference_file_matches_on_the_question_whatever_the_shapes(
        tmp_path: Path, questions: list[str], stored: str, asked: str) -> None:
    dataset = tmp_path / "reference.jsonl"
    dataset.write_text("".join(json.dumps({"input": SHAPES[stored](q), "ground_truth": f"t{i}"})
                               + "\n" for i, q in enumerate(questions[1:])))
    config = tmp_path / "gateway.yaml"
    config.write_text("scoring:\n  scorers:\n    - {scorer: similarity, reference: "
                      "reference.jsonl}\n")
    (online,) = load_gateway_config(config, environ={}).scorers or ()
    for index, question in enumerate(questions[1:]):
        assert online.lookup_reference(SHAPES[asked](question)) == f"t{index}"
    assert online.lookup_reference(SHAPES[asked](questions[0])) is None


def test_rescore_scores_against_the_reference_and_marks_calls_it_does_not_know(
        tmp_path: Path) -> None:
    """GenAI spans whose input holds the system prompt and earlier turns, and AI SDK-style spans
    (`ai.prompt` = `{"system", "prompt"}`, read by a mapping): each known question is scored
    against its ground truth, the unknown one carries `tracescore.reference.missing`."""
    known = {"What is the capital of France?": "Paris is the capital of France.",
             "Who wrote Hamlet?": "Hamlet was written by William Shakespeare."}
    unknown = "How many moons has Mars?"
    answers = {q: f"I think: {a}" for q, a in known.items()} | {unknown: "Two."}
    dataset = tmp_path / "reference.jsonl"
    dataset.write_text("".join(json.dumps({"input": q, "ground_truth": a}) + "\n"
                               for q, a in known.items()))
    config = tmp_path / "gateway.yaml"
    config.write_text(
        "scoring:\n  scorers:\n    - {scorer: similarity, reference: reference.jsonl}\n"
        "recognise:\n  mappings:\n    - {name: ai_sdk, input: ai.prompt, output: ai.response.text,"
        " span_name: 'ai\\.generateText'}\n")
    traces = tmp_path / "traces.jsonl"
    with sender(OTLPJsonFileExporter(traces)) as tracer:
        for question, answer in answers.items():
            tracer.start_span("invoke_agent geo", attributes={
                sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
                sc.GEN_AI_INPUT_MESSAGES: json.dumps(_genai(question)),
                sc.GEN_AI_OUTPUT_MESSAGES: json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]),
            }).end()
            tracer.start_span("ai.generateText", attributes={
                "ai.prompt": json.dumps(_ai_sdk_prompt(question)),
                "ai.response.text": answer}).end()
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(main, ["rescore", str(traces), "-c", str(config), "-o", str(out)])
    assert result.exit_code == 0, result.output
    spans = [s for line in out.read_text().splitlines() for s in spans_from_otlp_json(line)]
    assert len(spans) == 2 * len(answers)
    scorer = tracescore.ContentSimilarityScorer()
    for span in spans:
        (event,) = span.events_named(sc.GEN_AI_EVALUATION_RESULT)
        recognisers = tracescore.build_recognisers(
            [{"input": "ai.prompt", "output": "ai.response.text"}])
        call = tracescore.recognise(span.name, span.attributes, recognisers)
        assert call is not None
        question = next(q for q in answers if q in json.dumps(span.attributes))
        truth = known.get(question)
        expected = scorer.run(input=call.input, output=call.output, ground_truth=truth)
        assert event.attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] == expected.score
        if truth is None:
            assert event.attributes[sc.TS_REFERENCE_MISSING] is True
            assert "with the input instead" in event.attributes[sc.TS_REFERENCE_FALLBACK]
        else:
            assert sc.TS_REFERENCE_MISSING not in event.attributes
