"""instrument_agent / uninstrument_agent: trace an existing object's or class's method without editing it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import tracescore
from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError
from tracescore.instrument._calls import (
    AgentCall,
    add_agent_call_listener,
    has_agent_call_listeners,
    remove_agent_call_listener,
)


class Helper:
    """An agent class from some library we cannot edit."""

    def __init__(self, prefix: str = "A:") -> None:
        self.prefix = prefix

    def run(self, question: str) -> str:
        if question == "boom":
            raise KeyError("boom")
        return f"{self.prefix} {question}"

    async def arun(self, question: str) -> str:
        await asyncio.sleep(0)
        return f"{self.prefix} async {question}"

    def stream(self, question: str) -> Iterator[str]:
        yield "part1 "
        yield "part2"

    async def astream(self, question: str) -> AsyncIterator[str]:
        yield "x"
        yield "y"

    @classmethod
    def create(cls, prefix: str) -> Helper:
        return cls(prefix)

    @staticmethod
    def version() -> str:
        return "1.0"


class SubHelper(Helper):
    pass


def _agent_spans(exporter: InMemorySpanExporter) -> list:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]


def test_instance_method_is_traced_only_for_that_instance(span_exporter: InMemorySpanExporter) -> None:
    traced, other = Helper(), Helper()
    assert tracescore.instrument_agent(traced) is traced
    assert traced.run("hi") == "A: hi"
    assert other.run("hi") == "A: hi"
    (span,) = _agent_spans(span_exporter)
    assert span.name == "invoke_agent Helper"
    assert span.attributes[sc.GEN_AI_AGENT_NAME] == "Helper"
    assert "hi" in span.attributes[sc.GEN_AI_INPUT_MESSAGES]
    assert "A: hi" in span.attributes[sc.GEN_AI_OUTPUT_MESSAGES]
    tracescore.uninstrument_agent(traced)
    assert "run" not in vars(traced)
    traced.run("again")
    assert len(_agent_spans(span_exporter)) == 1


def test_class_instrumentation_covers_all_instances_and_is_undoable(
        span_exporter: InMemorySpanExporter) -> None:
    original = Helper.__dict__["run"]
    tracescore.instrument_agent(Helper, name="support", conversation_id="conv-1")
    try:
        assert Helper().run("a") == "A: a"
        assert Helper("B:").run("b") == "B: b"
    finally:
        tracescore.uninstrument_agent(Helper)
    assert Helper.__dict__["run"] is original
    Helper().run("c")
    spans = _agent_spans(span_exporter)
    assert [s.name for s in spans] == ["invoke_agent support"] * 2
    assert {s.attributes[sc.GEN_AI_CONVERSATION_ID] for s in spans} == {"conv-1"}


def test_agent_call_gets_the_argument_not_self(span_exporter: InMemorySpanExporter) -> None:
    calls: list[AgentCall] = []
    listener = calls.append
    add_agent_call_listener(listener)
    try:
        tracescore.instrument_agent(Helper)
        Helper().run("what?")
    finally:
        tracescore.uninstrument_agent(Helper)
        remove_agent_call_listener(listener)
    assert not has_agent_call_listeners()
    (call,) = calls
    assert (call.name, call.input, call.output) == ("Helper", "what?", "A: what?")


def test_idempotent(span_exporter: InMemorySpanExporter) -> None:
    helper = Helper()
    tracescore.instrument_agent(helper)
    tracescore.instrument_agent(helper)
    helper.run("once")
    assert len(_agent_spans(span_exporter)) == 1
    tracescore.uninstrument_agent(helper)
    tracescore.uninstrument_agent(helper)  # no-op
    tracescore.uninstrument_agent(Helper(), "run")  # never instrumented: no-op


def test_exception_is_recorded_and_reraised_unchanged(span_exporter: InMemorySpanExporter) -> None:
    helper = tracescore.instrument_agent(Helper())
    with pytest.raises(KeyError) as info:
        helper.run("boom")
    assert info.value.args == ("boom",)
    (span,) = _agent_spans(span_exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes[sc.ERROR_TYPE] == "KeyError"


async def test_async_method(span_exporter: InMemorySpanExporter) -> None:
    helper = tracescore.instrument_agent(Helper(), "arun")
    assert await helper.arun("q") == "A: async q"
    (span,) = _agent_spans(span_exporter)
    assert "A: async q" in span.attributes[sc.GEN_AI_OUTPUT_MESSAGES]


async def test_generator_methods(span_exporter: InMemorySpanExporter) -> None:
    tracescore.instrument_agent(Helper, "stream")
    tracescore.instrument_agent(Helper, "astream")
    try:
        helper = Helper()
        assert list(helper.stream("q")) == ["part1 ", "part2"]
        assert [x async for x in helper.astream("q")] == ["x", "y"]
    finally:
        tracescore.uninstrument_agent(Helper, "stream")
        tracescore.uninstrument_agent(Helper, "astream")
    spans = _agent_spans(span_exporter)
    assert len(spans) == 2
    assert "part1 part2" in spans[0].attributes[sc.GEN_AI_OUTPUT_MESSAGES]


def test_classmethod_and_staticmethod(span_exporter: InMemorySpanExporter) -> None:
    tracescore.instrument_agent(Helper, "create")
    tracescore.instrument_agent(Helper, "version")
    try:
        made = Helper.create("Z:")
        assert isinstance(made, Helper) and made.prefix == "Z:"
        assert Helper.version() == "1.0"
        assert Helper().version() == "1.0"
    finally:
        tracescore.uninstrument_agent(Helper, "create")
        tracescore.uninstrument_agent(Helper, "version")
    assert isinstance(Helper.__dict__["create"], classmethod)
    assert isinstance(Helper.__dict__["version"], staticmethod)
    assert len(_agent_spans(span_exporter)) == 3


def test_inherited_method_on_subclass_leaves_the_base_alone(span_exporter: InMemorySpanExporter) -> None:
    tracescore.instrument_agent(SubHelper)
    try:
        assert SubHelper().run("s") == "A: s"
        assert Helper().run("h") == "A: h"
    finally:
        tracescore.uninstrument_agent(SubHelper)
    assert "run" not in SubHelper.__dict__
    assert [s.name for s in _agent_spans(span_exporter)] == ["invoke_agent SubHelper"]


def test_frozen_dataclass_instance(span_exporter: InMemorySpanExporter) -> None:
    @dataclass(frozen=True)
    class Frozen:
        greeting: str

        def run(self, name: str) -> str:
            return f"{self.greeting} {name}"

    agent = tracescore.instrument_agent(Frozen("hello"))
    assert agent.run("you") == "hello you"
    assert json.loads(_agent_spans(span_exporter)[0].attributes[sc.GEN_AI_OUTPUT_MESSAGES])


def test_bad_targets_raise_configuration_error() -> None:
    class Slotted:
        __slots__ = ()

        def run(self) -> None:
            pass

    class NotCallable:
        run = 3

    with pytest.raises(ConfigurationError, match="no method 'missing'"):
        tracescore.instrument_agent(Helper, "missing")
    with pytest.raises(ConfigurationError, match="no callable method"):
        tracescore.instrument_agent(Helper(), "prefix")
    with pytest.raises(ConfigurationError, match="not callable"):
        tracescore.instrument_agent(NotCallable, "run")
    with pytest.raises(ConfigurationError, match="no __dict__"):
        tracescore.instrument_agent(Slotted())
    with pytest.raises(ConfigurationError, match="method name"):
        tracescore.instrument_agent(Helper, "not a name")


def test_an_instance_of_an_instrumented_class_gets_one_span_with_its_own_options(
        span_exporter: InMemorySpanExporter) -> None:
    tracescore.instrument_agent(SubHelper, name="every-helper")  # inherited run, patched here
    tracescore.instrument_agent(Helper, "create")
    special, plain = SubHelper("S:"), SubHelper()
    try:
        tracescore.instrument_agent(special, name="special-helper")
        tracescore.instrument_agent(special, "create", name="special-create")
        assert special.run("a") == "S: a"
        assert plain.run("b") == "A: b"
        assert isinstance(special.create("Z:"), Helper)
        tracescore.uninstrument_agent(special)
        special.run("c")  # back to the class's instrumentation
    finally:
        tracescore.uninstrument_agent(special, "create")
        tracescore.uninstrument_agent(SubHelper)
        tracescore.uninstrument_agent(Helper, "create")
    assert [s.name for s in _agent_spans(span_exporter)] == [
        "invoke_agent special-helper", "invoke_agent every-helper",
        "invoke_agent special-create", "invoke_agent every-helper"]
