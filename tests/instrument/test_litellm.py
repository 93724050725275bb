"""litellm middleware through real litellm to the local stub server: spans, streaming, errors, suppression."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import tracescore
from tracescore import _semconv as sc
from tracescore._config import reset_content_settings, set_content_capture
from tracescore._suppress import suppressed
from tracescore.testing import StubLLMServer

ORIGINAL_COMPLETION = litellm.completion
ORIGINAL_ACOMPLETION = litellm.acompletion


@pytest.fixture(autouse=True)
def _instrumented() -> Iterator[None]:
    tracescore.instrument_litellm()
    yield
    tracescore.uninstrument_litellm()
    reset_content_settings()


def _kwargs(stub: StubLLMServer, **extra: Any) -> dict[str, Any]:
    return {"model": "openai/gpt-4o-mini", "api_base": stub.base_url, "api_key": "sk-test",
            "messages": [{"role": "system", "content": "Be brief."},
                         {"role": "user", "content": "What is the capital of France?"}],
            "max_retries": 0, **extra}


def _chat_spans(exporter: InMemorySpanExporter) -> list[Any]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]


def _assert_request_attributes(span: Any, stub: StubLLMServer) -> None:
    attrs = span.attributes
    assert span.name == "chat gpt-4o-mini"
    assert span.kind is SpanKind.CLIENT
    assert attrs[sc.GEN_AI_OPERATION_NAME] == "chat"
    assert attrs[sc.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"
    assert attrs[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert attrs[sc.SERVER_ADDRESS] == "127.0.0.1"
    assert json.loads(attrs[sc.GEN_AI_INPUT_MESSAGES]) == [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {"role": "user", "parts": [{"type": "text", "content": "What is the capital of France?"}]},
    ]


def _assert_response_attributes(span: Any, text: str) -> None:
    attrs = span.attributes
    assert attrs[sc.GEN_AI_RESPONSE_MODEL] == "gpt-4o-mini"
    assert attrs[sc.GEN_AI_RESPONSE_ID].startswith("chatcmpl")
    assert attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] == 11
    assert attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 7
    assert attrs[sc.TS_COST_USD] > 0  # gpt-4o-mini is in litellm's local price map
    assert json.loads(attrs[sc.GEN_AI_OUTPUT_MESSAGES]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}]
    assert span.status.status_code is StatusCode.UNSET


def test_completion_span(span_exporter: InMemorySpanExporter, stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue("Paris is the capital.", usage={"prompt_tokens": 11, "completion_tokens": 7})
    response = litellm.completion(**_kwargs(stub_llm, temperature=0.2, max_tokens=50, top_p=0.9))
    assert response.choices[0].message.content == "Paris is the capital."
    (span,) = _chat_spans(span_exporter)
    _assert_request_attributes(span, stub_llm)
    _assert_response_attributes(span, "Paris is the capital.")
    assert span.attributes[sc.GEN_AI_REQUEST_TEMPERATURE] == 0.2
    assert span.attributes[sc.GEN_AI_REQUEST_MAX_TOKENS] == 50
    assert span.attributes[sc.GEN_AI_REQUEST_TOP_P] == 0.9


async def test_acompletion_span(span_exporter: InMemorySpanExporter, stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue("Paris.", usage={"prompt_tokens": 11, "completion_tokens": 7})
    response = await litellm.acompletion(**_kwargs(stub_llm))
    assert response.choices[0].message.content == "Paris."
    (span,) = _chat_spans(span_exporter)
    _assert_request_attributes(span, stub_llm)
    _assert_response_attributes(span, "Paris.")


def test_span_is_a_child_of_the_current_span(span_exporter: InMemorySpanExporter,
                                             stub_llm: StubLLMServer) -> None:
    with trace.get_tracer("test").start_as_current_span("agent") as parent:
        litellm.completion(**_kwargs(stub_llm))
    (span,) = _chat_spans(span_exporter)
    assert span.parent is not None and span.parent.span_id == parent.get_span_context().span_id
    assert span.context.trace_id == parent.get_span_context().trace_id


def test_streaming_span_covers_the_iteration(span_exporter: InMemorySpanExporter,
                                             stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue("Paris is lovely", stream=["Paris", " is", " lovely"],
                     usage={"prompt_tokens": 11, "completion_tokens": 7})
    stream = litellm.completion(**_kwargs(stub_llm, stream=True))
    first = next(stream)
    assert _chat_spans(span_exporter) == []  # still streaming: the span is open
    pieces = [first.choices[0].delta.content] + [c.choices[0].delta.content for c in stream]
    assert "".join(p for p in pieces if p) == "Paris is lovely"
    (span,) = _chat_spans(span_exporter)
    _assert_request_attributes(span, stub_llm)
    _assert_response_attributes(span, "Paris is lovely")


async def test_async_streaming_span(span_exporter: InMemorySpanExporter, stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue("Paris is lovely", stream=["Paris", " is", " lovely"],
                     usage={"prompt_tokens": 11, "completion_tokens": 7})
    stream = await litellm.acompletion(**_kwargs(stub_llm, stream=True))
    pieces = [chunk.choices[0].delta.content async for chunk in stream]
    assert "".join(p for p in pieces if p) == "Paris is lovely"
    (span,) = _chat_spans(span_exporter)
    _assert_request_attributes(span, stub_llm)
    _assert_response_attributes(span, "Paris is lovely")


def test_stream_closed_early_ends_the_span(span_exporter: InMemorySpanExporter,
                                          stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue("a b c", stream=["a", " b", " c"])
    stream = litellm.completion(**_kwargs(stub_llm, stream=True))
    next(stream)
    stream.close()
    (span,) = _chat_spans(span_exporter)
    assert span.end_time is not None
    assert span.status.status_code is StatusCode.UNSET


def test_abandoned_stream_ends_its_span_when_collected(span_exporter: InMemorySpanExporter,
                                                      stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue("a b c", stream=["a", " b", " c"])
    stream = litellm.completion(**_kwargs(stub_llm, stream=True))
    next(stream)
    del stream
    gc.collect()
    assert len(_chat_spans(span_exporter)) == 1


def test_stream_used_as_context_manager(span_exporter: InMemorySpanExporter,
                                        stub_llm: StubLLMServer) -> None:
    with litellm.completion(**_kwargs(stub_llm, stream=True)) as stream:
        next(stream)
    assert len(_chat_spans(span_exporter)) == 1


@pytest.mark.parametrize("status", [500, 401])
def test_error_marks_the_span_and_reraises_unchanged(span_exporter: InMemorySpanExporter,
                                                     stub_llm: StubLLMServer, status: int) -> None:
    stub_llm.enqueue_error(status, "nope")
    tracescore.uninstrument_litellm()
    with pytest.raises(Exception) as plain:
        litellm.completion(**_kwargs(stub_llm))
    tracescore.instrument_litellm()
    stub_llm.enqueue_error(status, "nope")
    with pytest.raises(Exception) as traced:
        litellm.completion(**_kwargs(stub_llm))
    assert type(traced.value) is type(plain.value)
    assert str(traced.value) == str(plain.value)
    (span,) = _chat_spans(span_exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes[sc.ERROR_TYPE] == type(traced.value).__qualname__
    assert [e.name for e in span.events] == ["exception"]


async def test_async_error(span_exporter: InMemorySpanExporter, stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue_error(401, "bad key")
    with pytest.raises(litellm.AuthenticationError):
        await litellm.acompletion(**_kwargs(stub_llm))
    (span,) = _chat_spans(span_exporter)
    assert span.attributes[sc.ERROR_TYPE] == "AuthenticationError"


def test_suppressed_context_creates_no_span(span_exporter: InMemorySpanExporter,
                                            stub_llm: StubLLMServer) -> None:
    with suppressed():
        response = litellm.completion(**_kwargs(stub_llm))
        stream = litellm.completion(**_kwargs(stub_llm, stream=True))
        list(stream)
    assert response.choices[0].message.content == "ok"
    assert len(stub_llm.requests) == 2
    assert _chat_spans(span_exporter) == []


def test_content_capture_off_keeps_usage_but_no_messages(span_exporter: InMemorySpanExporter,
                                                         stub_llm: StubLLMServer) -> None:
    set_content_capture(False)
    stub_llm.enqueue("secret answer", usage={"prompt_tokens": 11, "completion_tokens": 7})
    litellm.completion(**_kwargs(stub_llm))
    (span,) = _chat_spans(span_exporter)
    assert sc.GEN_AI_INPUT_MESSAGES not in span.attributes
    assert sc.GEN_AI_OUTPUT_MESSAGES not in span.attributes
    assert span.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 7


def test_messages_are_redacted(span_exporter: InMemorySpanExporter, stub_llm: StubLLMServer) -> None:
    kwargs = _kwargs(stub_llm)
    kwargs["messages"] = [{"role": "user", "content": "mail me at jane.doe@example.com"}]
    litellm.completion(**kwargs)
    (span,) = _chat_spans(span_exporter)
    assert "jane.doe@example.com" not in span.attributes[sc.GEN_AI_INPUT_MESSAGES]


def test_tool_calls_are_captured(span_exporter: InMemorySpanExporter, stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue(None, finish_reason="tool_calls", tool_calls=[
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}])
    litellm.completion(**_kwargs(stub_llm))
    (span,) = _chat_spans(span_exporter)
    (message,) = json.loads(span.attributes[sc.GEN_AI_OUTPUT_MESSAGES])
    assert message["finish_reason"] == "tool_calls"
    assert {"type": "tool_call", "id": "call_1", "name": "get_weather",
            "arguments": '{"city": "Paris"}'} in message["parts"]


def test_instrument_is_idempotent_and_undoable(span_exporter: InMemorySpanExporter,
                                               stub_llm: StubLLMServer) -> None:
    tracescore.instrument_litellm()
    litellm.completion(**_kwargs(stub_llm))
    assert len(_chat_spans(span_exporter)) == 1
    tracescore.uninstrument_litellm()
    tracescore.uninstrument_litellm()
    assert litellm.completion is ORIGINAL_COMPLETION
    assert litellm.acompletion is ORIGINAL_ACOMPLETION
    litellm.completion(**_kwargs(stub_llm))
    assert len(_chat_spans(span_exporter)) == 1


def test_telemetry_failure_never_breaks_the_call(span_exporter: InMemorySpanExporter,
                                                 stub_llm: StubLLMServer,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from tracescore.instrument import _litellm

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("bug in telemetry")

    monkeypatch.setattr(_litellm, "_output_message", broken)
    monkeypatch.setattr(_litellm, "_input_messages", broken)
    response = litellm.completion(**_kwargs(stub_llm))
    assert response.choices[0].message.content == "ok"
    stream = litellm.completion(**_kwargs(stub_llm, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in stream) == "ok"
    assert len(stub_llm.requests) == 2
    spans = _chat_spans(span_exporter)
    assert len(spans) == 2  # both still traced and ended, just without messages
    assert all(sc.GEN_AI_INPUT_MESSAGES not in s.attributes for s in spans)
    assert all(s.attributes[sc.GEN_AI_RESPONSE_MODEL] == "gpt-4o-mini" for s in spans)


async def test_concurrent_calls_nest_under_their_own_agent(span_exporter: InMemorySpanExporter,
                                                           stub_llm: StubLLMServer) -> None:
    import asyncio

    tracer = trace.get_tracer("test")

    async def agent(i: int) -> str:
        with tracer.start_as_current_span(f"agent {i}"):
            reply = await litellm.acompletion(**_kwargs(stub_llm))
            return reply.choices[0].message.content

    assert await asyncio.gather(*(agent(i) for i in range(4))) == ["ok"] * 4
    spans = span_exporter.get_finished_spans()
    agents = {s.context.span_id: s for s in spans if s.name.startswith("agent ")}
    chats = _chat_spans(span_exporter)
    assert len(chats) == 4
    assert sorted(agents[c.parent.span_id].name for c in chats) == [f"agent {i}" for i in range(4)]


async def test_cancelled_call_ends_the_span(span_exporter: InMemorySpanExporter,
                                            stub_llm: StubLLMServer) -> None:
    import asyncio

    stub_llm.enqueue("slow", delay=2.0)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(litellm.acompletion(**_kwargs(stub_llm)), timeout=0.2)
    (span,) = _chat_spans(span_exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes[sc.ERROR_TYPE] == "CancelledError"


async def test_async_stream_closed_early(span_exporter: InMemorySpanExporter,
                                         stub_llm: StubLLMServer) -> None:
    stub_llm.enqueue("a b c", stream=["a", " b", " c"])
    stream = await litellm.acompletion(**_kwargs(stub_llm, stream=True))
    async for _chunk in stream:
        break
    assert _chat_spans(span_exporter) == []
    await stream.aclose()
    (span,) = _chat_spans(span_exporter)
    assert span.status.status_code is StatusCode.UNSET


def test_sampled_out_call_returns_the_plain_stream(stub_llm: StubLLMServer) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    from tracescore.instrument import _litellm

    provider = TracerProvider(sampler=ALWAYS_OFF)
    original = _litellm._tracer
    _litellm._tracer = lambda: provider.get_tracer("test")
    try:
        stream = litellm.completion(**_kwargs(stub_llm, stream=True))
    finally:
        _litellm._tracer = original
    assert type(stream).__name__ == "CustomStreamWrapper"  # not wrapped: no span work per chunk
    assert "".join(c.choices[0].delta.content or "" for c in stream) == "ok"
