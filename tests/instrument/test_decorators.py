"""Decorators on plain/async functions and methods: semconv spans, content, errors, hand-off."""

from __future__ import annotations

import asyncio
import gc
import inspect
import logging
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, StatusCode, TraceFlags
from test_decorators_support import (  # noqa: F401 - autouse fixtures
    attr_json,
    clean_content_settings,
    is_child,
    no_context_errors,
    only_span,
    spans_by_name,
    text_messages,
)

import tracescore
from tracescore import _semconv as sc
from tracescore._config import set_content_capture
from tracescore._exceptions import ConfigurationError
from tracescore._suppress import suppressed
from tracescore.instrument._calls import (
    AgentCall,
    add_agent_call_listener,
    ground_truth,
    remove_agent_call_listener,
    set_ground_truth,
)
from tracescore.instrument._decorators import agent, llm, span, tool

pytestmark = pytest.mark.usefixtures("span_exporter")


class QuotaError(Exception):
    """A user exception with its own module/qualname."""


@pytest.fixture
def calls() -> Iterator[list[AgentCall]]:
    received: list[AgentCall] = []

    def listener(call: AgentCall) -> None:
        assert call.span.is_recording(), "notified after the span ended"
        received.append(call)

    add_agent_call_listener(listener)
    try:
        yield received
    finally:
        remove_agent_call_listener(listener)


# --- names, kinds, attributes ------------------------------------------------------------------


def test_public_names_resolve_to_the_decorators() -> None:
    assert (tracescore.agent, tracescore.tool, tracescore.llm, tracescore.span) == (
        agent,
        tool,
        llm,
        span,
    )


def test_bare_decorators_semconv(span_exporter: Any) -> None:
    @agent
    def planner(question: str) -> str:
        return "plan"

    @tool
    def search(query: str) -> list[str]:
        return ["hit"]

    @llm
    def complete(prompt: str) -> str:
        return "text"

    @span
    def pipeline(x: int) -> int:
        return x + 1

    assert (planner("q"), search("s"), complete("p"), pipeline(1)) == ("plan", ["hit"], "text", 2)
    spans = spans_by_name(span_exporter)
    a, t, c, w = (
        spans["invoke_agent planner"],
        spans["execute_tool search"],
        spans["chat"],
        spans["pipeline"],
    )
    assert (a.kind, t.kind, c.kind, w.kind) == (
        SpanKind.INTERNAL,
        SpanKind.INTERNAL,
        SpanKind.CLIENT,
        SpanKind.INTERNAL,
    )
    assert a.attributes[sc.GEN_AI_OPERATION_NAME] == sc.OP_INVOKE_AGENT
    assert a.attributes[sc.GEN_AI_AGENT_NAME] == "planner"
    assert t.attributes[sc.GEN_AI_OPERATION_NAME] == sc.OP_EXECUTE_TOOL
    assert t.attributes[sc.GEN_AI_TOOL_NAME] == "search"
    assert c.attributes[sc.GEN_AI_OPERATION_NAME] == sc.OP_CHAT
    assert w.attributes[sc.GEN_AI_OPERATION_NAME] == sc.OP_WORKFLOW
    for s in (a, t, c, w):
        assert s.status.status_code is StatusCode.UNSET
        assert s.parent is None


def test_decorator_arguments(span_exporter: Any) -> None:
    @agent(
        name="support-bot",
        description="answers",
        conversation_id="conv-1",
        attributes={"team": "a"},
    )
    def bot(q: str) -> str:
        return "ok"

    @tool(name="lookup", description="finds things")
    def find(x: int) -> int:
        return x

    @llm(model="gpt-4o-mini", provider="openai", conversation_id=lambda q: f"c-{q}")
    def chat_call(q: str) -> str:
        return "r"

    @span(name="stage", attributes={"n": 3})
    def stage() -> None:
        return None

    bot("hi"), find(1), chat_call("7"), stage()
    spans = spans_by_name(span_exporter)
    a = spans["invoke_agent support-bot"].attributes
    assert a[sc.GEN_AI_AGENT_NAME] == "support-bot"
    assert a[sc.GEN_AI_AGENT_DESCRIPTION] == "answers"
    assert a[sc.GEN_AI_CONVERSATION_ID] == "conv-1"
    assert a["team"] == "a"
    t = spans["execute_tool lookup"].attributes
    assert t[sc.GEN_AI_TOOL_DESCRIPTION] == "finds things"
    c = spans["chat gpt-4o-mini"].attributes
    assert c[sc.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"
    assert c[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert c[sc.GEN_AI_CONVERSATION_ID] == "c-7"
    assert spans["stage"].attributes["n"] == 3


def test_llm_model_from_call_argument(span_exporter: Any) -> None:
    @llm
    def complete(messages: list[dict[str, str]], *, model: str = "default") -> str:
        return "x"

    complete([{"role": "user", "content": "hi"}], model="claude-3")
    s = only_span(span_exporter)
    assert s.name == "chat claude-3"
    assert s.attributes[sc.GEN_AI_REQUEST_MODEL] == "claude-3"
    assert attr_json(s, sc.GEN_AI_INPUT_MESSAGES) == text_messages("user", "hi")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": ""},
        {"name": 3},
        {"capture_content": "yes"},
        {"attributes": ["a"]},
        {"attributes": {1: "x"}},
        {"conversation_id": 5},
    ],
)
def test_bad_decorator_arguments_fail_at_decoration(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        agent(**kwargs)
    with pytest.raises(ConfigurationError):
        llm(model=3)  # type: ignore[call-overload]


def test_unknown_options_fail_at_decoration_like_unknown_keyword_arguments() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'ground_truth'"):
        tool(ground_truth="x")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="unexpected keyword argument 'descripton'"):
        agent(lambda q: q, descripton="typo")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="unexpected keyword argument 'model'"):
        span(model="m")  # type: ignore[call-overload]
    assert llm(model="m", provider="p")(lambda q: q)("x") == "x"


# --- behaviour unchanged -----------------------------------------------------------------------


def test_introspection_is_preserved() -> None:
    def original(a: int, b: str = "x") -> str:
        """Docs."""
        return b * a

    async def acoro(q: str) -> str:
        return q

    async def agen(q: str) -> Any:
        yield q

    def gen(q: str) -> Any:
        yield q

    wrapped = agent(original)
    assert wrapped.__wrapped__ is original  # type: ignore[attr-defined]
    assert wrapped.__name__ == "original" and wrapped.__doc__ == "Docs."
    assert inspect.signature(wrapped) == inspect.signature(original)
    assert inspect.iscoroutinefunction(tool(acoro))
    assert inspect.isasyncgenfunction(llm(agen))
    assert inspect.isgeneratorfunction(span(gen))
    assert not inspect.iscoroutinefunction(wrapped)


def test_same_exception_reraised_and_recorded(span_exporter: Any) -> None:
    error = QuotaError("over quota")

    @agent
    def failing(q: str) -> str:
        raise error

    with pytest.raises(QuotaError) as info:
        failing("q")
    assert info.value is error
    assert info.value.__traceback__ is not None
    s = only_span(span_exporter)
    assert s.status.status_code is StatusCode.ERROR
    assert s.status.description == "over quota"
    assert s.attributes[sc.ERROR_TYPE] == f"{QuotaError.__module__}.QuotaError"
    assert [e.name for e in s.events] == ["exception"]
    assert s.events[0].attributes["exception.message"] == "over quota"


async def test_async_exception_builtin_error_type(span_exporter: Any) -> None:
    @tool
    async def broken(x: int) -> int:
        await asyncio.sleep(0)
        raise ValueError("bad x")

    with pytest.raises(ValueError, match="bad x"):
        await broken(1)
    s = only_span(span_exporter)
    assert s.attributes[sc.ERROR_TYPE] == "ValueError"
    assert s.status.status_code is StatusCode.ERROR


def test_argument_errors_raise_at_call_time_like_the_original() -> None:
    @agent
    async def needs_one(q: str) -> str:
        return q

    with pytest.raises(TypeError):
        needs_one()  # type: ignore[call-arg, unused-coroutine]


def test_return_value_identity_is_kept() -> None:
    payload = object()

    @span
    def give() -> object:
        return payload

    assert give() is payload


# --- methods -----------------------------------------------------------------------------------


class Assistant:
    prefix = "A:"

    def __init__(self, tag: str) -> None:
        self.tag = tag

    @agent
    def answer(self, question: str) -> str:
        return f"{self.tag} {question}"

    @agent(name="cls-above")
    @classmethod
    def above(cls, question: str) -> str:
        return cls.prefix + question

    @classmethod
    @agent(name="cls-below")
    def below(cls, question: str) -> str:
        return cls.prefix + question

    @tool(name="static-above")
    @staticmethod
    def s_above(a: int, b: int) -> int:
        return a + b

    @staticmethod
    @tool(name="static-below")
    def s_below(a: int, b: int) -> int:
        return a * b

    @agent
    async def aanswer(self, question: str) -> str:
        return question.upper()


async def test_methods_classmethods_staticmethods(span_exporter: Any) -> None:
    bot = Assistant("t1")
    assert bot.answer("q1") == "t1 q1"
    assert Assistant.answer(bot, "q2") == "t1 q2"
    assert Assistant.above("x") == "A:x" and bot.above("y") == "A:y"
    assert Assistant.below("x") == "A:x" and bot.below("y") == "A:y"
    assert Assistant.s_above(2, 3) == 5 and bot.s_above(2, 3) == 5
    assert Assistant.s_below(2, 3) == 6 and bot.s_below(2, 3) == 6
    assert await bot.aanswer("q") == "Q"
    spans = span_exporter.get_finished_spans()
    names = [s.name for s in spans]
    assert names.count("invoke_agent answer") == 2
    assert names.count("invoke_agent cls-above") == 2
    assert names.count("invoke_agent cls-below") == 2
    assert names.count("execute_tool static-above") == 2
    assert names.count("execute_tool static-below") == 2
    assert names.count("invoke_agent aanswer") == 1
    # the receiver (self / cls) is not part of the captured input
    answer = [s for s in spans if s.name == "invoke_agent answer"]
    assert [attr_json(s, sc.GEN_AI_INPUT_MESSAGES) for s in answer] == [
        text_messages("user", "q1"),
        text_messages("user", "q2"),
    ]
    for s in spans:
        if s.name.startswith("invoke_agent cls-"):
            assert attr_json(s, sc.GEN_AI_INPUT_MESSAGES) in (
                text_messages("user", "x"),
                text_messages("user", "y"),
            )
        if s.name.startswith("execute_tool static-"):
            assert attr_json(s, sc.GEN_AI_TOOL_CALL_ARGUMENTS) == {"a": 2, "b": 3}


# --- content -----------------------------------------------------------------------------------


def test_agent_content_string_in_string_out(span_exporter: Any) -> None:
    @agent
    def bot(question: str) -> str:
        return "Paris"

    bot("Capital of France?")
    s = only_span(span_exporter)
    assert attr_json(s, sc.GEN_AI_INPUT_MESSAGES) == text_messages("user", "Capital of France?")
    assert attr_json(s, sc.GEN_AI_OUTPUT_MESSAGES) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Paris"}],
            "finish_reason": "stop",
        }
    ]


def test_chat_messages_pass_through_in_semconv_shape(span_exporter: Any) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "rain"},
    ]

    @llm(model="m")
    def complete(messages: list[dict[str, Any]], temperature: float = 0.0) -> dict[str, Any]:
        return {
            "id": "resp-1",
            "model": "m-2024",
            "choices": [
                {"message": {"role": "assistant", "content": "It rains."}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
        }

    complete(messages, temperature=0.2)
    s = only_span(span_exporter)
    assert attr_json(s, sc.GEN_AI_INPUT_MESSAGES) == [
        {"role": "system", "parts": [{"type": "text", "content": "be brief"}]},
        {"role": "user", "parts": [{"type": "text", "content": "weather?"}]},
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "c1", "name": "weather", "arguments": '{"city":"Oslo"}'}
            ],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "rain"}]},
    ]
    assert attr_json(s, sc.GEN_AI_OUTPUT_MESSAGES) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "It rains."}],
            "finish_reason": "stop",
        }
    ]
    attrs = s.attributes
    assert attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] == 11
    assert attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 3
    assert attrs[sc.GEN_AI_RESPONSE_MODEL] == "m-2024"
    assert attrs[sc.GEN_AI_RESPONSE_ID] == "resp-1"
    assert attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)


@dataclass
class _Usage:
    input_tokens: int
    output_tokens: int


@dataclass
class _Msg:
    role: str
    content: str


@dataclass
class _Choice:
    message: _Msg
    finish_reason: str


@dataclass
class _Response:
    choices: list[_Choice]
    usage: _Usage
    model: str = "obj-model"


def test_llm_response_object_usage_and_output(span_exporter: Any) -> None:
    @llm(model="m")
    def complete(prompt: str) -> _Response:
        return _Response([_Choice(_Msg("assistant", "hello"), "length")], _Usage(5, 7))

    complete("p")
    s = only_span(span_exporter)
    assert s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 5
    assert s.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 7
    assert attr_json(s, sc.GEN_AI_OUTPUT_MESSAGES) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "hello"}],
            "finish_reason": "length",
        }
    ]


def test_usage_recorded_even_when_content_capture_is_off(span_exporter: Any) -> None:
    set_content_capture(False)

    @llm(model="m")
    def complete(prompt: str) -> dict[str, Any]:
        return {"usage": {"input_tokens": 1, "output_tokens": 2}}

    complete("secret prompt")
    s = only_span(span_exporter)
    assert s.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 1
    assert sc.GEN_AI_INPUT_MESSAGES not in s.attributes
    assert sc.GEN_AI_OUTPUT_MESSAGES not in s.attributes


def test_multi_argument_agent_input_is_a_dict(span_exporter: Any) -> None:
    @agent
    def bot(question: str, user_id: int, *, lang: str = "en") -> dict[str, Any]:
        return {"answer": "x"}

    bot("hello?", 42, lang="fr")
    s = only_span(span_exporter)
    messages = attr_json(s, sc.GEN_AI_INPUT_MESSAGES)
    assert messages[0]["role"] == "user"
    import json

    assert json.loads(messages[0]["parts"][0]["content"]) == {
        "question": "hello?",
        "user_id": 42,
        "lang": "fr",
    }
    out = attr_json(s, sc.GEN_AI_OUTPUT_MESSAGES)
    assert json.loads(out[0]["parts"][0]["content"]) == {"answer": "x"}


def test_tool_and_span_content(span_exporter: Any) -> None:
    @tool
    def weather(city: str, days: int = 1) -> dict[str, Any]:
        return {"city": city, "forecast": ["rain"] * days}

    @span
    def step(data: dict[str, int]) -> list[int]:
        return sorted(data.values())

    weather("Oslo", days=2)
    step({"b": 2, "a": 1})
    spans = spans_by_name(span_exporter)
    t = spans["execute_tool weather"]
    assert attr_json(t, sc.GEN_AI_TOOL_CALL_ARGUMENTS) == {"city": "Oslo", "days": 2}
    assert attr_json(t, sc.GEN_AI_TOOL_CALL_RESULT) == {
        "city": "Oslo",
        "forecast": ["rain", "rain"],
    }
    w = spans["step"]
    assert attr_json(w, sc.TS_INPUT) == {"b": 2, "a": 1}
    assert attr_json(w, sc.TS_OUTPUT) == [1, 2]


def test_single_keyword_argument_and_default() -> None:
    received: list[Any] = []

    def listener(call: AgentCall) -> None:
        received.append(call.input)

    @agent
    def bot(question: str = "default q") -> str:
        return question

    add_agent_call_listener(listener)
    try:
        bot(question="kw")
        bot()
    finally:
        remove_agent_call_listener(listener)
    assert received == ["kw", "default q"]


@pytest.mark.parametrize(
    ("global_capture", "override", "captured"),
    [(True, None, True), (False, None, False), (False, True, True), (True, False, False)],
)
def test_capture_global_and_per_decorator(
    span_exporter: Any, global_capture: bool, override: bool | None, captured: bool
) -> None:
    set_content_capture(global_capture)

    @agent(capture_content=override)
    def bot(q: str) -> str:
        return "a"

    @tool(capture_content=override)
    def t(q: str) -> str:
        return "a"

    @span(capture_content=override)
    def s(q: str) -> str:
        return "a"

    bot("q"), t("q"), s("q")
    keys = {
        sc.GEN_AI_INPUT_MESSAGES,
        sc.GEN_AI_OUTPUT_MESSAGES,
        sc.GEN_AI_TOOL_CALL_ARGUMENTS,
        sc.GEN_AI_TOOL_CALL_RESULT,
        sc.TS_INPUT,
        sc.TS_OUTPUT,
    }
    found = {k for sp in span_exporter.get_finished_spans() for k in sp.attributes if k in keys}
    assert found == (keys if captured else set())


def test_env_var_turns_capture_off(span_exporter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracescore import _config

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "NO_CONTENT")
    _config.reset_content_settings()

    @agent
    def bot(q: str) -> str:
        return "a"

    bot("q")
    assert sc.GEN_AI_INPUT_MESSAGES not in only_span(span_exporter).attributes


def test_redaction_and_truncation_apply_to_spans(span_exporter: Any) -> None:
    set_content_capture(max_length=200)

    @agent
    def bot(q: str) -> str:
        return "x" * 1000

    bot("mail me: jane@example.com, key sk-proj-abcdefghijklmnop123456")
    s = only_span(span_exporter)
    inp = str(s.attributes[sc.GEN_AI_INPUT_MESSAGES])
    assert "jane@example.com" not in inp and "[REDACTED:email]" in inp
    assert "sk-proj" not in inp and "[REDACTED:api_key]" in inp
    out = str(s.attributes[sc.GEN_AI_OUTPUT_MESSAGES])
    assert out.endswith("chars]") and "…[truncated " in out
    assert len(out.split("…[truncated ")[0]) == 200


def test_unserializable_values_do_not_break_the_call(span_exporter: Any) -> None:
    class Weird:
        def __repr__(self) -> str:
            raise RuntimeError("nope")

    loop: list[Any] = []
    loop.append(loop)

    @tool
    def use(a: Any, b: Any) -> Any:
        return Weird()

    result = use(Weird(), loop)
    assert isinstance(result, Weird)
    s = only_span(span_exporter)
    assert "repr failed" in str(s.attributes[sc.GEN_AI_TOOL_CALL_RESULT])
    assert "<cycle: list>" in str(s.attributes[sc.GEN_AI_TOOL_CALL_ARGUMENTS])


def test_failing_callbacks_never_break_the_call(span_exporter: Any, calls: list[AgentCall]) -> None:
    def bad_conv(value: Any) -> str:
        raise RuntimeError("conv")

    def bad_truth(value: Any) -> Any:
        raise RuntimeError("truth")

    @agent(conversation_id=bad_conv, ground_truth=bad_truth)
    def bot(q: str) -> str:
        return "fine"

    assert bot("q") == "fine"
    s = only_span(span_exporter)
    assert sc.GEN_AI_CONVERSATION_ID not in s.attributes
    assert calls[0].ground_truth is None and calls[0].output == "fine"


def test_listener_failure_is_logged_not_raised(
    span_exporter: Any, caplog: pytest.LogCaptureFixture
) -> None:
    def listener(call: AgentCall) -> None:
        raise RuntimeError("listener broke")

    @agent
    def bot(q: str) -> str:
        return "ok"

    add_agent_call_listener(listener)
    try:
        assert bot("q") == "ok"
    finally:
        remove_agent_call_listener(listener)
    assert only_span(span_exporter).end_time is not None
    assert any("listener" in r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)


# --- suppression and sampling ------------------------------------------------------------------


async def test_suppressed_instrumentation_makes_no_spans(
    span_exporter: Any, calls: list[AgentCall]
) -> None:
    @agent
    def bot(q: str) -> str:
        return q + "!"

    @tool
    async def atool(q: str) -> str:
        return q * 2

    @span
    def gen(n: int) -> Iterator[int]:
        yield from range(n)

    with suppressed():
        assert bot("a") == "a!"
        assert await atool("b") == "bb"
        assert list(gen(3)) == [0, 1, 2]
    assert span_exporter.get_finished_spans() == ()
    assert calls == []


def test_unsampled_parent_skips_content_work(span_exporter: Any, calls: list[AgentCall]) -> None:
    reprs: list[int] = []

    class Counted:
        def __repr__(self) -> str:
            reprs.append(1)
            return "Counted()"

    @tool
    def t(x: Any) -> Any:
        return x

    @agent
    def bot(x: Any) -> Any:
        return t(x)

    parent = NonRecordingSpan(
        SpanContext(trace_id=0x1234, span_id=0x5678, is_remote=True, trace_flags=TraceFlags(0))
    )
    token = otel_context.attach(trace.set_span_in_context(parent))
    try:
        value = Counted()
        assert bot(value) is value
    finally:
        otel_context.detach(token)
    assert span_exporter.get_finished_spans() == ()
    assert reprs == []
    assert calls == []  # unsampled calls are not handed to scoring


# --- nesting and the agent-call hand-off -------------------------------------------------------


def test_nesting_agent_tool_llm(span_exporter: Any) -> None:
    @llm(model="m")
    def complete(prompt: str) -> str:
        return "r"

    @tool
    def search(q: str) -> str:
        return complete(q)

    @agent
    def bot(q: str) -> str:
        return search(q) + search(q + "2")

    bot("q")
    spans = span_exporter.get_finished_spans()
    agent_span = next(s for s in spans if s.name == "invoke_agent bot")
    tools = [s for s in spans if s.name == "execute_tool search"]
    chats = [s for s in spans if s.name == "chat m"]
    assert len(tools) == 2 and len(chats) == 2
    assert all(is_child(t, agent_span) for t in tools)
    assert sorted(c.parent.span_id for c in chats) == sorted(t.context.span_id for t in tools)
    assert otel_context.get_current() == {} or trace.get_current_span() is trace.INVALID_SPAN


def test_agent_call_hand_off(span_exporter: Any, calls: list[AgentCall]) -> None:
    set_content_capture(False)  # the hand-off carries the real values even without capture

    @agent(name="qa", conversation_id="c9", ground_truth="Paris")
    def qa(question: str) -> str:
        return "Paris it is"

    @agent(ground_truth=lambda inp: inp["b"] * 2)
    def two(a: int, b: int) -> int:
        return a + b

    @agent(ground_truth="decorator")
    def setter(q: str) -> str:
        set_ground_truth("from inside")
        return "x"

    @agent
    def plain(q: str) -> str:
        return "y"

    qa("Capital?")
    two(1, b=5)
    setter("s")
    with ground_truth("outer"):
        plain("p")
    plain("no truth")
    assert [c.name for c in calls] == ["qa", "two", "setter", "plain", "plain"]
    first = calls[0]
    assert (first.input, first.output, first.ground_truth, first.conversation_id) == (
        "Capital?",
        "Paris it is",
        "Paris",
        "c9",
    )
    assert isinstance(first.span, ReadableSpan)
    assert first.span.name == "invoke_agent qa"
    assert first.attributes[sc.GEN_AI_AGENT_NAME] == "qa"
    assert first.error is None
    assert (calls[1].input, calls[1].output, calls[1].ground_truth) == ({"a": 1, "b": 5}, 6, 10)
    assert calls[2].ground_truth == "from inside"
    assert calls[3].ground_truth == "outer"
    assert calls[4].ground_truth is None


async def test_agent_call_hand_off_on_error_and_async(
    span_exporter: Any, calls: list[AgentCall]
) -> None:
    @agent
    async def aqa(q: str) -> str:
        set_ground_truth("gt")
        await asyncio.sleep(0)
        raise QuotaError("x")

    with pytest.raises(QuotaError):
        await aqa("q")
    (call,) = calls
    assert isinstance(call.error, QuotaError)
    assert call.output is None and call.ground_truth == "gt" and call.input == "q"


def test_no_hand_off_without_listeners(span_exporter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracescore.instrument import _calls

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("should not be called without listeners")

    monkeypatch.setattr(_calls, "enter_call", fail)
    monkeypatch.setattr(_calls, "notify_agent_call", fail)

    @agent
    def bot(q: str) -> str:
        return "a"

    assert bot("q") == "a"


def test_listener_filters_decide_at_span_start_and_unwanted_calls_build_nothing(
    span_exporter: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from tracescore.instrument import _calls

    opened: list[str] = []
    picky: list[AgentCall] = []
    bored: list[AgentCall] = []
    slots = 0
    enter_call = _calls.enter_call

    def counting_enter_call() -> Any:
        nonlocal slots
        slots += 1
        return enter_call()

    monkeypatch.setattr(_calls, "enter_call", counting_enter_call)

    def wants(s: Any) -> bool:
        assert s.is_recording() and trace.get_current_span() is not s  # started, not yet current
        opened.append(s.name)
        return s.name == "invoke_agent wanted"

    @agent
    def wanted(q: str) -> str:
        set_ground_truth("truth")
        return q.upper()

    @agent
    def ignored(q: str) -> str:
        set_ground_truth("never read")
        return q

    add_agent_call_listener(picky.append, wants)
    add_agent_call_listener(bored.append, lambda s: False)
    try:
        assert ignored("a") == "a"
        assert slots == 0 and picky == [] and bored == []  # nobody wanted it: no hand-off at all
        assert wanted("b") == "B"
        assert _calls.wants_agent_call(trace.INVALID_SPAN) is False
    finally:
        remove_agent_call_listener(picky.append)
        remove_agent_call_listener(bored.append)
    assert opened == ["invoke_agent ignored", "invoke_agent wanted"]
    assert slots == 1 and bored == []
    (call,) = picky
    assert (call.name, call.input, call.output, call.ground_truth) == ("wanted", "b", "B", "truth")

    def broken(s: Any) -> bool:
        raise RuntimeError("filter bug")

    add_agent_call_listener(picky.append, broken)
    try:
        with caplog.at_level(logging.ERROR, logger="tracescore"):
            assert wanted("c") == "C"  # a broken filter skips the hand-off, never the call
    finally:
        remove_agent_call_listener(picky.append)
    assert len(picky) == 1 and "filter" in caplog.text
    assert len(span_exporter.get_finished_spans()) == 3


def test_ground_truth_set_in_a_call_nobody_follows_never_leaks_into_later_calls(
    span_exporter: Any,
) -> None:
    from tracescore.instrument._calls import current_ground_truth

    received: list[AgentCall] = []

    @agent
    def unwatched(q: str) -> str:
        set_ground_truth("stale")
        return q

    @agent
    def watched(q: str) -> str:
        return q

    unwatched("before any listener")
    set_ground_truth("outside any call")  # nothing to attach it to
    assert current_ground_truth() is None
    add_agent_call_listener(received.append, lambda s: getattr(s, "name", None) == "invoke_agent watched")
    try:
        unwatched("a")
        watched("b")
        with ground_truth("scope"):
            unwatched("c")
            watched("d")
    finally:
        remove_agent_call_listener(received.append)
    assert [(c.input, c.ground_truth) for c in received] == [("b", None), ("d", "scope")]


def test_registering_a_listener_again_replaces_its_filter(span_exporter: Any) -> None:
    received: list[AgentCall] = []

    @agent
    def bot(q: str) -> str:
        return q

    add_agent_call_listener(received.append, lambda s: False)
    add_agent_call_listener(received.append)  # now: every call
    try:
        bot("x")
    finally:
        remove_agent_call_listener(received.append)
    assert [c.input for c in received] == ["x"]


def test_empty_parentheses_and_never_awaited_coroutine(span_exporter: Any) -> None:
    @agent()
    async def bot(q: str) -> str:
        return q

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "never awaited", as without us
        coro = bot("q")
        del coro
        gc.collect()
    assert span_exporter.get_finished_spans() == ()  # nothing ran, so no span was started
    assert asyncio.run(bot("r")) == "r"
    assert only_span(span_exporter).name == "invoke_agent bot"


def test_llm_model_from_positional_argument_and_bound_methods(span_exporter: Any) -> None:
    received: list[Any] = []

    @llm
    def complete(model: str, prompt: str) -> str:
        return "x"

    class Bot:
        def run(self, question: str) -> str:
            return "a"

    complete("gpt-positional", "p")
    bot = Bot()
    bot.run = agent(name="bound")(bot.run)  # type: ignore[method-assign]  # a bound method

    def listener(call: AgentCall) -> None:
        received.append(call.input)

    add_agent_call_listener(listener)
    try:
        bot.run("q")
    finally:
        remove_agent_call_listener(listener)
    names = [s.name for s in span_exporter.get_finished_spans()]
    assert names == ["chat gpt-positional", "invoke_agent bound"]
    assert received == ["q"]


_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=5), children, max_size=4)
        | st.tuples(children, children)
    ),
    max_leaves=12,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(arg=_values, result=_values, max_length=st.integers(min_value=1, max_value=300))
def test_any_values_pass_through_unchanged(
    span_exporter: Any, arg: Any, result: Any, max_length: int
) -> None:
    span_exporter.clear()
    set_content_capture(max_length=max_length)

    @agent
    def bot(x: Any) -> Any:
        return result

    @tool
    def t(x: Any, y: Any = None) -> Any:
        return result

    assert bot(arg) is result
    assert t(arg, y=arg) is result
    spans = span_exporter.get_finished_spans()
    assert len(spans) == 2
    for s in spans:
        for key in (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_TOOL_CALL_ARGUMENTS):
            if key in s.attributes:
                assert len(str(s.attributes[key]).split("…[truncated ")[0]) <= max_length


async def test_callable_object_with_async_call(span_exporter: Any) -> None:
    class Runner:
        async def __call__(self, question: str) -> str:
            await asyncio.sleep(0)
            return question[::-1]

    traced = agent(name="runner")(Runner())
    assert await traced("abc") == "cba"
    s = only_span(span_exporter)
    assert s.name == "invoke_agent runner"
    assert attr_json(s, sc.GEN_AI_OUTPUT_MESSAGES)[0]["parts"][0]["content"] == "cba"
