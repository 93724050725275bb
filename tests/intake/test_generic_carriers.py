"""Invented conventions (issue 34, families 1 and 2): agent spans taken by a known marker whose
question and answer sit under keys nobody told us about (random namespaces, separators and
key styles), in the encodings frameworks record, nested 0-2 times, beside distractor keys
holding system prompts, tool returns and object reprs. What is judged (the intake's reading,
then the worker's unwrapping, as both doors do) is the user's text and the agent's answer:
never a system prompt, a tool return or a repr."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_carriers import DOORS, Door, Recording
from test_unwrap import _STYLES, SYSTEM, TEXT, TOOL, _listed, _message

import tracescore
from tracescore.online.intake import AgentReader, RecognisedCall, unwrap_input, unwrap_output
from tracescore.online.intake._generic import generic_keys, kind_of
from tracescore.scoring._inputs import answer_text, question_text

READER = AgentReader(tracescore.build_recognisers())
# the markers that make a span an agent call without content under its convention's keys
MARKERS = [
    {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "geo"},
    {"gen_ai.operation.name": "invoke_agent", "gen_ai.input.messages": "[]"},
    {"openinference.span.kind": "AGENT"},
    {"traceloop.span.kind": "agent"},
    {"mastra.span.type": "agent_run"},
]
# (input word, output word) as conventions name them
WORDS = [("input", "output"), ("inputs", "outputs"), ("prompt", "completion"),
         ("args", "result"), ("arguments", "response"), ("question", "answer"),
         ("query", "response")]
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_RESERVED = {"system", "tool", "tools", "type", "id", "usage", "token", "tokens", "count",
             "schema", "template", "mime", "metadata", "error", "exception", "instruction",
             "instructions", "call", "function"} | {w for pair in WORDS for w in pair}
SEGMENT = st.text(st.sampled_from(_LETTERS), min_size=2, max_size=7).filter(
    lambda s: s not in _RESERVED)
FLAGS = {"stream": False, "reset": True, "images": None, "session_id": "a1b2c3d4",
         "model": "gpt-4o-mini", "system_prompt": "You are a helpful agent. Be brief."}


@st.composite
def keys(draw: st.DrawFn) -> tuple[str, str, str, str]:
    """(input key, output key, namespace, separator) of one invented convention."""
    namespace = ".".join(draw(st.lists(SEGMENT, min_size=1, max_size=3)))
    separator = draw(st.sampled_from([".", ":", "_", "/"]))
    word_in, word_out = draw(st.sampled_from(WORDS))
    if draw(st.booleans()):  # camelCase: `<vendor>.spanInputs`
        middle = draw(SEGMENT)
        return (f"{namespace}.{middle}{word_in.capitalize()}",
                f"{namespace}.{middle}{word_out.capitalize()}", namespace, separator)
    return (f"{namespace}{separator}{word_in}", f"{namespace}{separator}{word_out}", namespace,
            separator)


def _serialised(value: Any, as_json: bool) -> str:
    return value if isinstance(value, str) else json.dumps(value) if as_json else repr(value)


@st.composite
def question(draw: st.DrawFn) -> tuple[str, Any]:
    """The user's text, and it in 0-2 nested encodings (innermost maybe a conversation)."""
    text = draw(TEXT)
    value: Any = text
    if draw(st.booleans()):
        style = draw(_STYLES)
        history = [_message(style, "system", draw(SYSTEM))]
        if draw(st.booleans()):
            history += [_message(style, "user", draw(TEXT)),
                        _message(style, "tool", draw(TOOL)),
                        _message(style, "assistant", draw(TEXT))]
        value = _listed([*history, _message(style, "user", text)], draw(st.booleans()))
    for _ in range(draw(st.integers(0, 2))):
        wrap = draw(st.sampled_from(["json", "repr", "tuple", "args_kwargs", "kwargs"]))
        if wrap == "json":
            value = json.dumps(value)
        elif wrap == "repr":
            value = repr(value)
        elif wrap == "tuple":
            value = (value, *draw(st.lists(st.sampled_from([3, None, True, "gpt-4o"]),
                                           max_size=2)))
        elif wrap == "args_kwargs":
            value = {"args": [value], "kwargs": FLAGS}
        else:
            key = draw(st.sampled_from(["task", "question", "query", "input", "prompt",
                                        "user_text", "request_text"]))
            items = [*FLAGS.items(), (key, value)]
            value = dict(draw(st.permutations(items)))
    return text, _serialised(value, draw(st.booleans()))


@st.composite
def answer(draw: st.DrawFn) -> tuple[str, Any]:
    """The agent's answer, and it in 0-2 nested encodings."""
    text = draw(TEXT)
    value: Any = text
    kind = draw(st.sampled_from(["text", "message", "history", "response"]))
    style = draw(_STYLES)
    if kind == "message":
        value = _message(style, "assistant", text)
    elif kind == "history":
        value = _listed([_message(style, "system", draw(SYSTEM)),
                         _message(style, "user", draw(TEXT)), _message(style, "tool", draw(TOOL)),
                         _message(style, "assistant", text)], draw(st.booleans()))
    elif kind == "response" and style == "agent_framework":
        value = f"AgentResponse(messages=[{_message(style, 'assistant', text)}])"
    value = _serialised(value, draw(st.booleans()))
    for _ in range(draw(st.integers(0, 2))):
        value = json.dumps(value)
    return text, value


def _distractors(draw: st.DrawFn, namespace: str, separator: str) -> dict[str, Any]:
    """Keys beside the content: a system prompt, a tool's arguments and return, an object repr,
    token counts; none of them is content."""
    system, tool = draw(SYSTEM), draw(TOOL)
    found = {
        f"{namespace}{separator}system_prompt": system,
        f"{namespace}{separator}instructions": system,
        f"{namespace}{separator}tool{separator}output": tool,
        f"{namespace}.tool.input": json.dumps({"city": "Paris"}),
        "gen_ai.tool.call.result": tool,
        "gen_ai.tool.call.arguments": json.dumps({"q": "x"}),
        f"{namespace}.agent": "Agent(name='geo', model='gpt-4o', instructions='Be brief.')",
        f"{namespace}.metadata.input": system,
        "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 7,
        "input.mime_type": "text/plain", "function_call.arguments": json.dumps({"a": 1}),
    }
    chosen = draw(st.lists(st.sampled_from(sorted(found)), unique=True, max_size=len(found)))
    return {key: found[key] for key in chosen}


@st.composite
def spans(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    """(question, answer, attributes) of an agent span in an invented convention."""
    key_in, key_out, namespace, separator = draw(keys())
    asked, question_value = draw(question())
    answered, answer_value = draw(answer())
    attributes = {**draw(st.sampled_from(MARKERS)),
                  **_distractors(draw, namespace, separator),
                  key_in: question_value, key_out: answer_value}
    order = draw(st.permutations(list(attributes)))
    return asked, answered, {key: attributes[key] for key in order}


@settings(max_examples=400, deadline=None)
@given(spans())
def test_an_invented_convention_is_judged_on_the_users_text(
        case: tuple[str, str, dict[str, Any]]) -> None:
    asked, answered, attributes = case
    found, _ = READER.read("some agent", attributes)
    assert isinstance(found, RecognisedCall)
    # what the scoring worker hands the scorers (both doors)
    assert question_text(unwrap_input(found.input)) == asked
    assert answer_text(unwrap_output(found.output)) == answered


@DOORS
@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(cases=st.lists(spans(), min_size=12, max_size=12, unique_by=lambda case: case[0]))
def test_invented_conventions_are_judged_the_same_through_both_doors(
        door: Door, cases: list[tuple[str, str, dict[str, Any]]], tmp_path: Path,
        otlp_receiver: Any) -> None:
    """Through the span processor and the gateway: the user's text and the agent's answer, and
    a `reference:` table keyed by the question finds the answer (similarity 1.0)."""
    recording = Recording()
    folder = Path(tempfile.mkdtemp(dir=tmp_path))  # a journal of its own per example
    similarity = door(recording, cases, folder, otlp_receiver)
    assert sorted(recording.seen) == sorted((q, a) for q, a, _ in cases)
    assert similarity == [1.0] * len(cases)


@settings(max_examples=200, deadline=None)
@given(spans())
def test_a_distractor_key_is_never_content(case: tuple[str, str, dict[str, Any]]) -> None:
    _, _, attributes = case
    picked = generic_keys(attributes)
    assert picked is not None
    for key in picked:
        assert not any(word in key.lower() for word in ("system", "instructions", "tool",
                                                         "metadata", "tokens"))


@given(st.dictionaries(st.text(max_size=20), st.text(max_size=5), max_size=6))
def test_a_span_without_a_marker_is_never_read_from_generic_keys(attributes: dict[str, str]
                                                                 ) -> None:
    """Pass-through spans: generic keys alone never make an agent call."""
    attributes = {k: v for k, v in attributes.items() if k not in READER.watched}
    attributes.update({"acme.input": "What is the capital of France?", "acme.output": "Paris."})
    found, _ = READER.read("GET /", attributes)
    assert found is None


def test_the_key_rule() -> None:
    assert kind_of("langfuse.observation.input") == ("input", 0, 3, ("langfuse", "observation"))
    assert kind_of("mlflow.spanOutputs") == ("output", 1, 3, ("mlflow", "span"))
    assert kind_of("acme:input") is not None and kind_of("function.args") is not None
    for key in ("llm.token_count.prompt", "gen_ai.usage.input_tokens", "system_prompt",
                "gen_ai.tool.call.arguments", "function_call.arguments", "input.value",
                "gen_ai.input.messages", "input.mime_type"):
        assert kind_of(key) is None, key
    # the input's own namespace gives the output
    assert generic_keys({"a.output": "x", "b.input": "q", "b.output": "y"}) == ("b.input",
                                                                                 "b.output")
    assert generic_keys({"a.input": "[]", "a.output": "x"}) is None  # nothing recorded
    assert generic_keys({"a.input": 3, "a.output": "x"}) is None
