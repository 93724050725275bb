"""`@llm` around real litellm responses (mock_response: no network), plain and streamed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from test_decorators_support import (  # noqa: F401 - autouse fixtures
    attr_json,
    clean_content_settings,
    no_context_errors,
    only_span,
)

from tracescore import _semconv as sc
from tracescore._config import set_content_capture
from tracescore.instrument._calls import (
    AgentCall,
    add_agent_call_listener,
    remove_agent_call_listener,
)
from tracescore.instrument._decorators import agent, llm

MESSAGES = [{"role": "user", "content": "Capital of France?"}]


@llm(provider="openai")
def complete(messages: list[dict[str, Any]], *, model: str) -> Any:
    return litellm.completion(
        model=model, messages=messages, mock_response="Paris.", api_key="sk-x"
    )


@llm(model="openai/gpt-4o-mini", provider="openai")
def stream(messages: list[dict[str, Any]]) -> Iterator[Any]:
    yield from litellm.completion(
        model="openai/gpt-4o-mini",
        messages=messages,
        mock_response="Paris is the capital.",
        stream=True,
        stream_options={"include_usage": True},
        api_key="sk-x",
    )


def test_litellm_response_usage_and_messages(span_exporter: Any) -> None:
    response = complete(MESSAGES, model="openai/gpt-4o-mini")
    assert response.choices[0].message.content == "Paris."
    s = only_span(span_exporter)
    assert s.name == "chat openai/gpt-4o-mini"
    attrs = s.attributes
    assert attrs[sc.GEN_AI_REQUEST_MODEL] == "openai/gpt-4o-mini"
    assert attrs[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] == response.usage.prompt_tokens
    assert attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == response.usage.completion_tokens
    assert attrs[sc.GEN_AI_RESPONSE_ID] == response.id
    assert attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert attr_json(s, sc.GEN_AI_INPUT_MESSAGES) == [
        {"role": "user", "parts": [{"type": "text", "content": "Capital of France?"}]}
    ]
    assert attr_json(s, sc.GEN_AI_OUTPUT_MESSAGES) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Paris."}],
            "finish_reason": "stop",
        }
    ]


@pytest.mark.parametrize("capture", [True, False])
def test_streamed_chunks_are_assembled(span_exporter: Any, capture: bool) -> None:
    set_content_capture(capture)
    chunks = list(stream(MESSAGES))
    assert (
        "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        == "Paris is the capital."
    )
    s = only_span(span_exporter)
    assert s.name == "chat openai/gpt-4o-mini"
    assert s.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] > 0
    assert s.attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    if capture:
        assert attr_json(s, sc.GEN_AI_OUTPUT_MESSAGES) == [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "Paris is the capital."}],
                "finish_reason": "stop",
            }
        ]
    else:
        assert sc.GEN_AI_OUTPUT_MESSAGES not in s.attributes


def test_streaming_agent_hands_off_the_assembled_text(span_exporter: Any) -> None:
    calls: list[AgentCall] = []

    @agent
    def streaming_agent(question: str) -> Iterator[Any]:
        yield from stream([{"role": "user", "content": question}])

    listener = calls.append  # one bound-method object, so removal finds it

    add_agent_call_listener(listener)
    try:
        list(streaming_agent("Capital of France?"))
    finally:
        remove_agent_call_listener(listener)
    assert calls[0].output == "Paris is the capital."
    assert calls[0].input == "Capital of France?"
