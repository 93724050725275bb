"""The general reading rules, for conversations generated in every shape the conventions record:
the question is the last user text (never a tool return or the system prompt), the answer the
final text (never a tool call), and the system prompt and earlier turns stay as context."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import tracescore
from tracescore import _semconv as sc
from tracescore.online.intake import _messages
from tracescore.scoring._inputs import answer_text, question_text

_text = st.text(st.characters(codec="utf-8"), min_size=1, max_size=20)


@dataclass(frozen=True)
class Conversation:
    system: str | None
    earlier: list[tuple[str, str]]  # (user, assistant) turns before this one
    question: str
    tool_rounds: list[tuple[str, str]]  # (tool name, what it returned), after the question
    answer: str

    def context(self) -> list[dict[str, str]]:
        """The conversation the scorers get: up to and including the question."""
        messages = [{"role": "system", "content": self.system}] if self.system else []
        for user, assistant in self.earlier:
            messages += [{"role": "user", "content": user},
                         {"role": "assistant", "content": assistant}]
        return [*messages, {"role": "user", "content": self.question}]


conversations = st.builds(
    Conversation, st.none() | _text.map("sys:".__add__),
    st.lists(st.tuples(_text.map("u:".__add__), _text.map("a:".__add__)), max_size=3),
    _text.map("q:".__add__),
    st.lists(st.tuples(st.sampled_from(["lookup", "weather"]), _text.map("tool:".__add__)),
             max_size=3),
    _text.map("ans:".__add__))


def _genai(c: Conversation, *, tool_return_role: str = "tool") -> tuple[list[Any], list[Any]]:
    """GenAI semconv parts (`tool_return_role="user"`: as pydantic-ai records tool returns)."""
    def text(role: str, content: str) -> dict[str, Any]:
        return {"role": role, "parts": [{"type": "text", "content": content}]}

    messages = [text("system", c.system)] if c.system else []
    for user, assistant in c.earlier:
        messages += [text("user", user), text("assistant", assistant)]
    messages.append(text("user", c.question))
    for index, (name, result) in enumerate(c.tool_rounds):
        messages.append({"role": "assistant", "parts": [
            {"type": "tool_call", "id": f"c{index}", "name": name, "arguments": {"q": 1}}]})
        messages.append({"role": tool_return_role, "parts": [
            {"type": "tool_call_response", "id": f"c{index}", "response": result}]})
    output = [{"role": "assistant", "parts": [{"type": "reasoning", "content": "thinking"},
                                              {"type": "text", "content": c.answer}]}]
    return messages, output


def _openai(c: Conversation, *, parts: bool = False) -> tuple[list[Any], list[Any]]:
    def text(role: str, content: str) -> dict[str, Any]:
        return {"role": role, "content": [{"type": "text", "text": content}] if parts else content}

    messages = [text("system", c.system)] if c.system else []
    for user, assistant in c.earlier:
        messages += [text("user", user), text("assistant", assistant)]
    messages.append(text("user", c.question))
    for index, (name, result) in enumerate(c.tool_rounds):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{index}", "type": "function",
             "function": {"name": name, "arguments": "{}"}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{index}", "content": result})
    return messages, [text("assistant", c.answer)]


def _flattened(messages: list[dict[str, Any]], prefix: str, *, parts: bool) -> dict[str, Any]:
    """OpenInference's flattened attributes of OpenAI-style messages."""
    attributes: dict[str, Any] = {}
    for index, message in enumerate(messages):
        key = f"{prefix}.{index}.message."
        attributes[key + "role"] = message["role"]
        if message.get("tool_call_id"):
            attributes[key + "tool_call_id"] = message["tool_call_id"]
        for number, call in enumerate(message.get("tool_calls") or ()):
            attributes[f"{key}tool_calls.{number}.tool_call.function.name"] = \
                call["function"]["name"]
        content = message.get("content")
        if isinstance(content, str) and parts:
            attributes[key + "contents.0.message_content.type"] = "text"
            attributes[key + "contents.0.message_content.text"] = content
        elif isinstance(content, str):
            attributes[key + "content"] = content
    return attributes


SHAPES = {
    "genai": lambda c: _genai(c),
    "pydantic_ai": lambda c: _genai(c, tool_return_role="user"),
    "openai": lambda c: _openai(c),
    "openai_parts": lambda c: _openai(c, parts=True),
}


@settings(max_examples=60, deadline=None)
@given(conversations, st.sampled_from(sorted(SHAPES)), st.booleans())
def test_the_question_is_the_last_user_text_and_the_context_is_kept(
        c: Conversation, shape: str, as_json: bool) -> None:
    messages, output = SHAPES[shape](c)
    raw = json.dumps(messages) if as_json else messages
    read = _messages.as_input(raw)
    assert question_text(read) == c.question
    assert read == c.context()  # system prompt and earlier turns before it, no tool round
    assert _messages.final_text(json.dumps(output) if as_json else output) == c.answer


@settings(max_examples=40, deadline=None)
@given(conversations, st.booleans())
def test_openinference_flattened_messages_follow_the_same_rules(
        c: Conversation, parts: bool) -> None:
    messages, output = _openai(c)
    attributes = {**_flattened(messages, "llm.input_messages", parts=parts),
                  **_flattened(output, "llm.output_messages", parts=parts)}
    read = _messages.flattened_messages(attributes, "llm.input_messages")
    assert read is not None
    assert _messages.conversation(read) == c.context()
    output_messages = _messages.flattened_messages(attributes, "llm.output_messages")
    assert _messages.final_text(output_messages) == c.answer
    assert _messages.flattened_messages(attributes, "llm.other") is None


@settings(max_examples=40, deadline=None)
@given(conversations, st.sampled_from(sorted(SHAPES)))
def test_every_built_in_reader_applies_the_rules(c: Conversation, shape: str) -> None:
    """The same conversation recorded by each convention's agent span: the recognised call's
    question and answer are the rules' (a tool call as the output's last message is no answer)."""
    messages, output = SHAPES[shape](c)
    output = [*output[:-1], {"role": "assistant", "content": "", "tool_calls": []}, *output[-1:]]
    spans = {
        "genai": {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
                  sc.GEN_AI_INPUT_MESSAGES: json.dumps(messages),
                  sc.GEN_AI_OUTPUT_MESSAGES: json.dumps(output)},
        "pydantic_ai": {sc.PAI_ALL_MESSAGES: json.dumps([*messages, *output]),
                        sc.PAI_FINAL_RESULT: c.answer},
        "openinference": {sc.OI_SPAN_KIND: "AGENT", sc.OI_INPUT_VALUE: json.dumps(messages),
                          sc.OI_INPUT_MIME_TYPE: sc.OI_MIME_JSON,
                          sc.OI_OUTPUT_VALUE: json.dumps(output),
                          sc.OI_OUTPUT_MIME_TYPE: sc.OI_MIME_JSON},
        "mapping": {"app.in": json.dumps(messages), "app.out": json.dumps(output)},
    }
    recognisers = tracescore.build_recognisers(
        [tracescore.AgentMapping(input="app.in", output="app.out")])
    for convention, attributes in spans.items():
        call = tracescore.recognise("invoke_agent geo", attributes, recognisers)
        assert call is not None, convention
        assert call.convention == convention
        assert question_text(call.input) == c.question, convention
        assert call.input == c.context(), convention
        assert answer_text(call.output) == c.answer, convention


def test_a_conversation_without_user_text_has_no_question_and_other_inputs_stay() -> None:
    only_tools = [{"role": "user", "parts": [{"type": "tool_call_response", "response": "r"}]}]
    assert _messages.as_input(only_tools) == []  # nothing with text: no question
    assert question_text(_messages.as_input(only_tools)) == ""
    assert _messages.as_input("plain question") == "plain question"
    assert _messages.as_input({"system": "s", "prompt": "p"}) == {"system": "s", "prompt": "p"}
    assert _messages.final_text([{"role": "assistant", "parts": [
        {"type": "tool_call", "name": "lookup"}]}]) == ""


def test_a_code_scorer_given_messages_without_a_question_reports_no_score_with_a_reason() -> None:
    """Chat messages whose only user message is a tool return: no 0.00 "similarity with the
    input", but a failure at the preprocess step that says why."""
    only_tools = _messages.as_input([
        {"role": "user", "parts": [{"type": "tool_call_response", "response": "r"}]}])
    for scorer in (tracescore.ContentSimilarityScorer(), tracescore.create_completeness_scorer(),
                   tracescore.create_keyword_coverage_scorer()):
        try:
            result = scorer.run(input=only_tools, output="Paris")
        except tracescore.ScorerError as error:
            assert error.step == "preprocess"
            assert "no question text" in str(error)
        else:
            raise AssertionError(f"{scorer.id} scored {result.score} without a question")
    # with a ground truth there is something to compare with
    assert tracescore.ContentSimilarityScorer().run(
        input=only_tools, output="Paris", ground_truth="Paris").score == 1.0
