"""Recorded content in the encodings frameworks write: the judged question and answer are the
user's text (generated encodings, `tracescore.online.intake._unwrap`), and the `reference:` lookup
uses the unwrapped question."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracescore.online import OnlineScorer, ScoringSpanProcessor
from tracescore.online.intake._unwrap import member, unwrap_input, unwrap_output
from tracescore.scoring._base import Scorer, ScoreResult
from tracescore.scoring._inputs import answer_text, question_text

_WORD = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                "éü字"), min_size=1, max_size=8)
_TAIL = st.sampled_from(["?", ".", "!", "", "'s", ' "quoted"', " it's", " a\\b", " (maybe)"])
# prose: words with spaces (the user's text is what a person typed)
TEXT = st.builds(lambda words, tail: " ".join(words) + tail,
                 st.lists(_WORD, min_size=2, max_size=6), _TAIL)
SYSTEM = TEXT.map(lambda t: "You are a system prompt: " + t)
TOOL = TEXT.map(lambda t: "tool returned " + t)
_ENUM = {"user": "<ChatRole.USER: 'user'>", "assistant": "<ChatRole.ASSISTANT: 'assistant'>",
         "system": "<ChatRole.SYSTEM: 'system'>", "tool": "<ChatRole.TOOL: 'tool'>"}
_LANGCHAIN = {"user": "HumanMessage", "assistant": "AIMessage", "system": "SystemMessage",
              "tool": "ToolMessage"}


def _message(style: str, role: str, text: str) -> str | dict[str, Any]:
    """One chat message in one serialisation (a repr as text, a serialisation as a dict)."""
    if style == "agent_framework":
        return (f"ChatMessage(_role={_ENUM[role]}, _content=[TextContent(text={text!r})], "
                f"author_name=None)")
    if style == "langchain":
        return f"{_LANGCHAIN[role]}(content={text!r}, additional_kwargs={{}})"
    if style == "kwargs_repr":
        return f"Message(role={role!r}, content={text!r})"
    if style == "parts":
        return {"role": role, "parts": [{"type": "text", "content": text}]}
    if style == "blocks":
        return {"role": "human" if role == "user" else role, "content": [{"type": "text",
                                                                           "text": text}]}
    return {"role": role, "content": text}


_STYLES = st.sampled_from(["agent_framework", "langchain", "kwargs_repr", "parts", "blocks",
                           "plain"])


def _listed(items: list[str | dict[str, Any]], as_json: bool) -> str:
    if all(isinstance(i, dict) for i in items) and as_json:
        return json.dumps(items)
    return "[" + ", ".join(i if isinstance(i, str) else repr(i) for i in items) + "]"


@st.composite
def encoded_question(draw: st.DrawFn) -> tuple[str, Any]:
    """The user's question and one encoding of it, layered."""
    text = draw(TEXT)
    kind = draw(st.sampled_from(["json_string", "tuple", "args_kwargs", "kwargs", "messages",
                                 "nested"]))
    flags = {"stream": draw(st.booleans()), "reset": True, "images": None,
             "session_id": "a1b2c3d4", "max_steps": draw(st.integers(1, 20))}
    if kind == "json_string":
        value: Any = json.dumps(text)
    elif kind == "tuple":
        value = repr((text,) + tuple(draw(st.lists(st.sampled_from([1, None, True, "gpt-4o"]),
                                                   max_size=2))))
    elif kind == "args_kwargs":
        value = json.dumps({"args": [text], "kwargs": flags})
    elif kind == "kwargs":
        key = draw(st.sampled_from(["task", "question", "query", "prompt", "input", "message",
                                    "user_input"]))
        value = json.dumps({**flags, key: text}) if draw(st.booleans()) else {key: text, **flags}
    elif kind == "messages":
        style = draw(_STYLES)
        before = [_message(style, "system", draw(SYSTEM))]
        if draw(st.booleans()):
            before += [_message(style, "user", draw(TEXT)), _message(style, "assistant",
                                                                     draw(TEXT))]
        value = _listed(before + [_message(style, "user", text)], draw(st.booleans()))
    else:  # kwargs whose question is itself a JSON string literal, all of it JSON-encoded again
        value = json.dumps(json.dumps({"task": json.dumps(text), **flags}))
    return text, value


@st.composite
def encoded_answer(draw: st.DrawFn) -> tuple[str, Any]:
    text = draw(TEXT)
    kind = draw(st.sampled_from(["json_string", "double_json", "messages", "one_message"]))
    if kind == "json_string":
        return text, json.dumps(text)
    if kind == "double_json":
        return text, json.dumps(json.dumps(text))
    style = draw(_STYLES)
    if kind == "one_message":
        item = _message(style, "assistant", text)
        return text, item if isinstance(item, str) else json.dumps(item)
    history = [_message(style, "system", draw(SYSTEM)), _message(style, "user", draw(TEXT)),
               _message(style, "tool", draw(TOOL)), _message(style, "assistant", text)]
    return text, _listed(history, draw(st.booleans()))


@settings(max_examples=300, deadline=None)
@given(encoded_question())
def test_the_question_is_the_users_text_in_any_encoding(case: tuple[str, Any]) -> None:
    text, value = case
    assert question_text(unwrap_input(value)) == text


@settings(max_examples=300, deadline=None)
@given(encoded_answer())
def test_the_answer_is_the_agents_text_in_any_encoding(case: tuple[str, Any]) -> None:
    text, value = case
    assert answer_text(unwrap_output(value)) == text


@settings(max_examples=100, deadline=None)
@given(_STYLES, SYSTEM, TEXT)
def test_a_system_message_is_never_the_answer(style: str, system: str, question: str) -> None:
    value = _listed([_message(style, "system", system), _message(style, "user", question)],
                    as_json=True)
    assert system not in answer_text(unwrap_output(value))


@settings(max_examples=100, deadline=None)
@given(TEXT, st.sampled_from([1, 2, 3]))
def test_plain_text_and_unknown_values_pass_unchanged(text: str, n: int) -> None:
    for value in (text, {"q": n}, {"user": "ann@example.com"}, [n, n], "[1, 2]", "(a b)",
                  "print(x)"):
        assert unwrap_input(value) == value
    assert unwrap_output(text) == text and unwrap_output('{"city": "Paris"}') == '{"city": "Paris"}'


@pytest.mark.parametrize("raw, path, expected", [
    ('{"args": ["What is up?", 3], "kwargs": {}}', "args.0", "What is up?"),
    ("{'args': ('Q here?',), 'kwargs': {'task': 'T?'}}", "kwargs.task", "T?"),
    (json.dumps(json.dumps({"input": {"messages": ["m"]}})), "input.messages.0", "m"),
    ('{"args": []}', "args.0", None),
    # a call's arguments read with one path in every encoding
    ("('Q here?', 'gpt-4o', True)", "args.0", "Q here?"),
    ("('Q here?', 'gpt-4o', True)", "args.1", "gpt-4o"),
    ('{"task": "T?", "stream": false}', "kwargs.task", "T?"),
    ('{"task": "T?", "stream": false}', "task", "T?"),
    ('{"args": ["a b"], "kwargs": {"task": "T?"}}', "task", "T?"),
    (json.dumps(json.dumps({"args": ["a b"], "kwargs": json.dumps({"task": "T?"})})), "task",
     "T?"),
    ('{"a": 1}', "a.b", None),
])
def test_a_mapping_picks_a_member_through_any_encoding(raw: str, path: str, expected: Any) -> None:
    assert member(raw, path) == expected


class _Recorder(Scorer):
    id = "recorder"
    name = "recorder"

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None) -> ScoreResult:
        self.calls.append({"input": input, "output": output, "ground_truth": ground_truth})
        return ScoreResult(run_id=run_id or "x", scorer_id=self.id, scorer_name=self.name,
                           score=1.0, label="ok", reason="recorded")


def test_a_recorded_span_is_scored_and_looked_up_by_its_unwrapped_question() -> None:
    scorer = _Recorder()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    mapping = {"name": "decorated", "input": "function.args", "output": "function.result"}
    provider.add_span_processor(ScoringSpanProcessor(
        SimpleSpanProcessor(exporter),
        [OnlineScorer(scorer, reference={"What is the capital of France?": "Paris"})],
        recognise=[mapping], isolation="thread"))
    tracer = provider.get_tracer("some.generic.tracing.decorator")
    with tracer.start_as_current_span("answer", attributes={
            "function.args": json.dumps({"task": "What is the capital of France?",
                                         "stream": False, "reset": True, "images": None}),
            "function.result": json.dumps(json.dumps("Paris is the capital of France."))}):
        pass
    assert provider.force_flush(30_000)
    assert scorer.calls == [{"input": "What is the capital of France?",
                             "output": "Paris is the capital of France.", "ground_truth": "Paris"}]
    provider.shutdown()


@pytest.mark.parametrize("recorded_input", ["[]", " [] ", None])
def test_an_agent_span_with_an_empty_input_is_read_from_its_llm_calls(
        recorded_input: str | None) -> None:
    """`gen_ai.input.messages="[]"` (the question passed by keyword): the question comes from the
    model call below the agent span, the answer from the span itself or that call."""
    scorer = _Recorder()
    provider = TracerProvider()
    provider.add_span_processor(ScoringSpanProcessor(
        SimpleSpanProcessor(InMemorySpanExporter()), [scorer], recognise=["genai"],
        isolation="thread"))
    tracer = provider.get_tracer("some.agent.library")
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "geo",
             "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                 {"type": "text", "content": "Paris."}]}])}
    if recorded_input is not None:
        agent["gen_ai.input.messages"] = recorded_input
    chat = {"gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([
                {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
                {"role": "user", "parts": [{"type": "text", "content": "Capital of France?"}]}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                {"type": "text", "content": "Paris."}]}])}
    with tracer.start_as_current_span("invoke_agent geo", attributes=agent), \
            tracer.start_as_current_span("chat m", attributes=chat):
        pass
    assert provider.force_flush(30_000)
    assert len(scorer.calls) == 1
    assert question_text(scorer.calls[0]["input"]) == "Capital of France?"
    assert answer_text(scorer.calls[0]["output"]) == "Paris."
    provider.shutdown()
