"""Errors on spans: type always; message and stack trace redacted and capped, with content capture
on or off; an exception whose `__str__` raises is still an error. Checked in exported telemetry
(real OTLP receiver) for decorators, the litellm middleware and run_evals."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from _helpers import litellm_instrumented, shut_down_pipelines
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.trace import StatusCode

import tracescore
from tracescore import _semconv as sc
from tracescore._config import ContentSettings, reset_content_settings
from tracescore.instrument._errors import error_message, record_error, stack_trace
from tracescore.testing import OTLPReceiver, StubLLMServer
from tracescore.testing._decode import ReceivedSpan

_SECRETS = ("S3cretPw", "sk-proj-AbC123dEf456gHi789", "alice@example.com", "hunter2hunter")
_MESSAGE = ("could not reach postgres://app:S3cretPw@db:5432/orders; key=sk-proj-AbC123dEf456gHi789 "
            "for alice@example.com (DB_PASSWORD=hunter2hunter)")


@pytest.fixture(autouse=True)
def _clean(span_exporter: Any) -> Iterator[None]:
    shut_down_pipelines()
    yield
    shut_down_pipelines()


def _configure(receiver: OTLPReceiver, protocol: str, **options: Any) -> Any:
    endpoint = receiver.http_endpoint if protocol == "http" else receiver.grpc_endpoint
    return tracescore.configure(exporter=f"otlp-{protocol}", endpoint=endpoint, **options)


def _exported_text(span: ReceivedSpan) -> str:
    parts = [span.status_message, *map(str, span.attributes.values())]
    for event in span.events:
        parts.extend(map(str, event.attributes.values()))
    return "\n".join(parts)


def _assert_no_secret(text: str) -> None:
    for secret in _SECRETS:
        assert secret not in text


def _exception_event(span: ReceivedSpan) -> dict[str, Any]:
    (event,) = span.events_named("exception")
    return event.attributes


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("capture", [True, False])
def test_decorated_call_error_is_exported_redacted(otlp_receiver: OTLPReceiver, protocol: str,
                                                   capture: bool) -> None:
    handle = _configure(otlp_receiver, protocol, capture_content=capture)

    def connect() -> None:
        raise ConnectionError(_MESSAGE)

    @tracescore.agent
    def failing(question: str) -> str:
        try:
            connect()
        except ConnectionError as exc:
            raise RuntimeError(f"lookup failed: {exc}") from exc
        return "unreachable"

    with pytest.raises(RuntimeError):
        failing("where is my order?")
    assert handle.flush(10)
    (span,) = otlp_receiver.wait_for_spans(1)
    _assert_no_secret(_exported_text(span))
    assert span.status_code == "ERROR"
    assert span.attributes[sc.ERROR_TYPE] == "RuntimeError"
    event = _exception_event(span)
    assert event[sc.EXCEPTION_TYPE] == "RuntimeError"
    assert "postgres://app:[REDACTED:password]@db" in event[sc.EXCEPTION_MESSAGE]
    assert span.status_message == event[sc.EXCEPTION_MESSAGE]
    trace_text = event[sc.EXCEPTION_STACKTRACE]
    assert trace_text.startswith("Traceback (most recent call last):")
    assert ", in connect" in trace_text and ", in failing" in trace_text  # frames, both links
    assert "direct cause" in trace_text and "ConnectionError: could not reach" in trace_text
    assert "[REDACTED:password]" in trace_text and "[REDACTED:email]" in trace_text


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_provider_error_echoing_the_key_is_redacted_on_chat_spans(
    otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer, protocol: str
) -> None:
    handle = _configure(otlp_receiver, protocol)
    key = "sk-proj-AbC123dEf456gHi789"
    stub_llm.enqueue_error(401, f"Incorrect API key provided: {key}. Contact alice@example.com")
    with litellm_instrumented(), pytest.raises(litellm.AuthenticationError):
        litellm.completion(model="openai/gpt-4o-mini", api_base=stub_llm.base_url, api_key=key,
                           messages=[{"role": "user", "content": "hi"}], max_retries=0)
    assert handle.flush(10)
    (span,) = otlp_receiver.wait_for_spans(1)
    _assert_no_secret(_exported_text(span))
    assert span.attributes[sc.ERROR_TYPE] == "AuthenticationError"
    assert "[REDACTED:api_key]" in _exception_event(span)[sc.EXCEPTION_MESSAGE]


def test_eval_item_error_is_redacted(otlp_receiver: OTLPReceiver) -> None:
    handle = _configure(otlp_receiver, "http")

    def target(question: str) -> str:
        raise ConnectionError(_MESSAGE)

    result = tracescore.run_evals([{"input": "q"}], [tracescore.ContentSimilarityScorer()], target)
    assert result.failures  # the user's own result keeps the raw text
    assert handle.flush(10)
    spans = otlp_receiver.wait_for_spans(1)
    (span,) = [s for s in spans if s.status_code == "ERROR"]
    _assert_no_secret(_exported_text(span))
    assert span.attributes[sc.ERROR_TYPE] == "ConnectionError"


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class _NonStringStr(Exception):
    def __str__(self) -> Any:
        return 42  # noqa: PLE0307 - the broken exception under test


@pytest.mark.parametrize("error_class", [_Unprintable, _NonStringStr])
def test_an_error_whose_text_cannot_be_read_is_still_an_error(span_exporter: Any,
                                                              error_class: type) -> None:
    @tracescore.tool
    def broken() -> None:
        raise error_class("ignored")

    with pytest.raises(error_class):
        broken()
    (span,) = span_exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes[sc.ERROR_TYPE].endswith(error_class.__qualname__)
    (event,) = [e for e in span.events if e.name == "exception"]
    assert event.attributes[sc.EXCEPTION_MESSAGE] == (
        f"<{error_class.__name__}: message could not be read>")
    assert ", in broken" in event.attributes[sc.EXCEPTION_STACKTRACE]


def test_unprintable_error_in_an_eval_target_is_a_failed_item(span_exporter: Any) -> None:
    def target(question: str) -> str:
        raise _Unprintable()

    result = tracescore.run_evals([{"input": "q"}], [tracescore.ContentSimilarityScorer()], target)
    assert [f.error_type for f in result.failures] == ["_Unprintable"]
    (span,) = [s for s in span_exporter.get_finished_spans() if s.status.status_code
               is StatusCode.ERROR]
    assert span.attributes[sc.ERROR_TYPE] == "_Unprintable"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_huge_error_makes_a_bounded_span(otlp_receiver: OTLPReceiver, protocol: str) -> None:
    handle = _configure(otlp_receiver, protocol, max_content_length=1000)

    @tracescore.agent
    def failing(question: str) -> str:
        raise ValueError("x" * 20_000_000 + " password=tail-secret")

    with pytest.raises(ValueError):
        failing("q")
    assert handle.flush(30)
    (span,) = otlp_receiver.wait_for_spans(1)
    event = _exception_event(span)
    message, trace_text = event[sc.EXCEPTION_MESSAGE], event[sc.EXCEPTION_STACKTRACE]
    assert len(message) < 1100 and "[truncated " in message
    assert len(trace_text) < 1100 and ", in failing" in trace_text
    assert len(span.status_message) < 1100
    assert "tail-secret" not in _exported_text(span)


@settings(max_examples=60, deadline=None)
@given(length=st.integers(1, 3000), limit=st.integers(20, 2000), depth=st.integers(0, 12),
       chained=st.booleans())
def test_stack_trace_and_message_never_exceed_the_cap(length: int, limit: int, depth: int,
                                                      chained: bool) -> None:
    s = ContentSettings(max_length=limit)

    def nest(level: int) -> None:
        if level:
            nest(level - 1)
        raise KeyError("k" * length)

    try:
        try:
            nest(depth)
        except KeyError as inner:
            if chained:
                raise OSError("outer " + "o" * length) from inner
            raise
    except Exception as exc:  # noqa: BLE001 - the exception under test
        error = exc
    text = stack_trace(error, s)
    assert len(text) <= limit + len("…[truncated 1000000 chars]")
    if limit >= 200:  # the innermost exception's line is kept
        assert f"{type(error).__name__}: " in text


def test_record_error_never_raises() -> None:
    class Broken:
        def is_recording(self) -> bool:
            return True

        def set_attribute(self, *args: Any) -> None:
            raise RuntimeError("broken span")

    record_error(Broken(), ValueError("x"))  # logged, not raised
    reset_content_settings()


def test_decorator_attributes_must_be_attribute_values() -> None:
    for bad in ({"k": {"nested": 1}}, {"k": None}, {"k": [1, "a"]}, {"k": object()},
                {"k": [[1]]}):
        with pytest.raises(tracescore.ConfigurationError, match="attributes\\['k'\\]"):
            tracescore.agent(attributes=bad)
    for good in ({"k": "v"}, {"k": 1}, {"k": 1.5}, {"k": True}, {"k": ["a", "b"]}, {"k": ()}):
        tracescore.agent(attributes=good)


# --- every exported string is bounded ----------------------------------------------------------

_HUGE = 200_000


def _all_strings(attributes: Any) -> list[str]:
    out: list[str] = []
    for value in (attributes or {}).values():
        out.extend([value] if isinstance(value, str) else
                   [v for v in value if isinstance(v, str)] if isinstance(value, tuple) else [])
    return out


def test_identifiers_from_calls_and_responses_are_capped(span_exporter: Any) -> None:
    @tracescore.agent(conversation_id=lambda q: "c" * _HUGE)
    def ask(question: str) -> str:
        return "ok"

    @tracescore.llm
    def chat(question: str, model: str) -> dict[str, Any]:
        return {"id": "i" * _HUGE, "model": "m" * _HUGE,
                "choices": [{"message": {"role": "assistant", "content": "ok"},
                             "finish_reason": "f" * _HUGE}]}

    ask("q")
    chat("q", model="x" * _HUGE)
    spans = span_exporter.get_finished_spans()
    assert len(spans) == 2
    for span in spans:
        assert len(span.name) < 400
        for text in _all_strings(span.attributes):
            assert len(text) <= 8192 + 64


def test_evaluation_event_strings_are_capped() -> None:
    from tracescore.online import evaluation_events
    from tracescore.scoring import JudgeUsage, ScoreResult

    result = ScoreResult(run_id="r" * _HUGE, scorer_id="s", scorer_name="n", score=0.5,
                         label="l" * _HUGE, reason="why " * _HUGE,
                         usage=JudgeUsage(model="m" * _HUGE))
    events = evaluation_events(result, scorer_id="s", scorer_name="n")
    for _name, attributes in events:
        for text in _all_strings(attributes):
            assert len(text) <= 8192 + 64


@settings(max_examples=80, deadline=None)
@given(offset=st.integers(0, 50), limit=st.integers(64, 1500),
       cut=st.sampled_from(["message", "message in the stack trace"]),
       form=st.sampled_from(["postgres://app:{p}@db/x", "password={p}", "key=sk-proj-{p}"]))
def test_a_secret_across_any_cut_never_leaks_a_piece(offset: int, limit: int, cut: str,
                                                      form: str) -> None:
    password = "Zq8vRt5mWx2Kp9Ls"
    s = ContentSettings(max_length=limit)
    # the secret straddles where the message is cut (`max_length`, or a quarter of it inside
    # the stack trace)
    prefix = max((limit if cut == "message" else max(limit // 4, 64)) - offset, 0)
    try:
        raise ValueError("x" * prefix + " " + form.format(p=password) + " tail")
    except ValueError as exc:
        error = exc
    pieces = {password[i:i + 5] for i in range(len(password) - 4)}
    for text in (error_message(error, s), stack_trace(error, s)):
        assert not any(piece in text for piece in pieces), text[-300:]
