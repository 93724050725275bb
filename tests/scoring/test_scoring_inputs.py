"""What scorers accept as input and output, and the errors for what they cannot read."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tracescore.scoring._inputs import InputError, answer_text, question_text

CHAT = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "first question"},
    {"role": "assistant", "content": "first answer"},
    {"role": "user", "content": [{"type": "text", "text": "second"},
                                 {"type": "image_url", "image_url": {"url": "x"}},
                                 {"type": "text", "text": "question"}]},
    {"role": "assistant", "content": [{"type": "output_text", "text": "second answer"}]},
]


@pytest.mark.parametrize(("value", "question", "answer"), [
    ("plain", "plain", "plain"),
    (None, "", ""),
    (42, "42", "42"),
    (CHAT, "second\nquestion", "second answer"),
    ({"messages": CHAT}, "second\nquestion", "second answer"),
    ({"role": "assistant", "content": "one message"}, "one message", "one message"),
    ({"prompt": "p"}, "p", "p"),
    ({"text": "t"}, "t", "t"),
    ({"content": "c"}, "c", "c"),
    ({"question": "q", "answer": "a"}, "q", "a"),
    ({"query": "find it", "top_k": 3}, "find it", "find it"),  # the single string value
    ({"choices": [{"message": {"role": "assistant", "content": "from a completion"}}]},
     "from a completion", "from a completion"),
    (["part one", {"type": "text", "text": "part two"}], "part one\npart two",
     "part one\npart two"),
    ([], "", ""),
])
def test_accepted_shapes(value, question: str, answer: str) -> None:
    assert question_text(value) == question
    assert answer_text(value) == answer


def test_pydantic_and_dataclass_values() -> None:
    import litellm

    response = litellm.ModelResponse(choices=[{"message": {"role": "assistant", "content": "hi"}}])
    assert answer_text(response) == "hi"

    @dataclass
    class Turn:
        prompt: str

    assert question_text(Turn(prompt="why?")) == "why?"


@pytest.mark.parametrize(("value", "message"), [
    (object(), "output of type object has no text"),
    (b"bytes", "output of type bytes has no text"),
    ({"a": "x", "b": "y"}, "cannot tell which value of the output dict is the text"),
    ({"n": 1}, "cannot tell which value"),
    ([{"role": "user", "content": "q"}], "none with role 'assistant'"),
    ([1, 2], "neither chat messages"),
    ([{"role": "assistant", "content": 3}], "content of type int has no text"),
])
def test_clear_errors(value, message: str) -> None:
    with pytest.raises(InputError, match=message):
        answer_text(value)
