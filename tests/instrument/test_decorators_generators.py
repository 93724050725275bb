"""Generator and async-generator spans: whole-iteration coverage and every way iteration ends.

Each test also checks (autouse fixture) that no 'Failed to detach context' error was logged.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import StatusCode
from test_decorators_support import (  # noqa: F401 - autouse fixtures
    attr_json,
    clean_content_settings,
    is_child,
    no_context_errors,
    only_span,
    spans_by_name,
    text_messages,
)

from tracescore import _semconv as sc
from tracescore.instrument._calls import (
    AgentCall,
    add_agent_call_listener,
    remove_agent_call_listener,
)
from tracescore.instrument._decorators import agent, span, tool


class StreamError(Exception):
    pass


@tool
def probe(tag: str) -> str:
    """A child span made from inside generator bodies."""
    return tag


def _current_name() -> str | None:
    current = trace.get_current_span()
    return getattr(current, "name", None)


# --- sync generators ---------------------------------------------------------------------------


def test_exhaustion_covers_the_whole_iteration(span_exporter: Any) -> None:
    seen_inside: list[str | None] = []
    seen_outside: list[str | None] = []

    @agent
    def stream(q: str) -> Iterator[str]:
        for word in ("Par", "is"):
            seen_inside.append(_current_name())
            probe(word)
            yield word

    gen = stream("capital?")
    assert span_exporter.get_finished_spans() == ()  # not started before the first step
    for item in gen:
        seen_outside.append(_current_name())
        assert span_exporter.get_finished_spans()[-1].name == "execute_tool probe"
    spans = span_exporter.get_finished_spans()
    agent_span = next(s for s in spans if s.name == "invoke_agent stream")
    probes = [s for s in spans if s.name == "execute_tool probe"]
    assert len(probes) == 2 and all(is_child(p, agent_span) for p in probes)
    assert seen_inside == ["invoke_agent stream"] * 2
    assert seen_outside == [None, None]  # the span is not current in the consumer between steps
    assert agent_span.end_time >= max(p.end_time for p in probes)
    assert attr_json(agent_span, sc.GEN_AI_INPUT_MESSAGES) == text_messages("user", "capital?")
    assert attr_json(agent_span, sc.GEN_AI_OUTPUT_MESSAGES)[0]["parts"][0]["content"] == "Paris"
    assert agent_span.status.status_code is StatusCode.UNSET


def test_early_close_ends_span_and_runs_cleanup_in_span(span_exporter: Any) -> None:
    cleanup: list[str | None] = []

    @span
    def numbers() -> Generator[int, None, None]:
        try:
            yield from range(10)
        finally:
            cleanup.append(_current_name())

    gen = numbers()
    assert [next(gen), next(gen)] == [0, 1]
    gen.close()
    s = only_span(span_exporter)
    assert s.name == "numbers" and s.end_time is not None
    assert s.status.status_code is StatusCode.UNSET
    assert cleanup == ["numbers"]
    assert attr_json(s, sc.TS_OUTPUT) == [0, 1]


def test_break_and_garbage_collection_end_the_span(span_exporter: Any) -> None:
    @span
    def numbers() -> Iterator[int]:
        yield from range(10)

    for n in numbers():
        if n == 3:
            break
    gc.collect()
    s = only_span(span_exporter)
    assert s.end_time is not None


def test_exception_inside_generator(span_exporter: Any) -> None:
    error = StreamError("broken stream")

    @agent
    def stream(q: str) -> Iterator[str]:
        yield "partial"
        raise error

    gen = stream("q")
    assert next(gen) == "partial"
    with pytest.raises(StreamError) as info:
        next(gen)
    assert info.value is error
    s = only_span(span_exporter)
    assert s.status.status_code is StatusCode.ERROR
    assert s.attributes[sc.ERROR_TYPE].endswith("StreamError")
    assert [e.name for e in s.events] == ["exception"]


def test_send_throw_and_return_value_are_forwarded(span_exporter: Any) -> None:
    @span
    def echo() -> Generator[str, Any, str]:
        received = yield "ready"
        while received != "stop":
            try:
                received = yield f"got {received}"
            except KeyError as exc:
                received = yield f"caught {exc.args[0]}"
        return "done"

    @span
    def with_result() -> Generator[int, None, str]:
        yield 1
        return "done"

    def consumer() -> Iterator[Any]:
        result = yield from with_result()
        yield result

    gen = echo()
    assert next(gen) == "ready"
    assert gen.send("a") == "got a"
    assert gen.throw(KeyError("k")) == "caught k"
    with pytest.raises(StopIteration) as stop:
        gen.send("stop")
    assert stop.value.value == "done"
    assert list(consumer()) == [1, "done"]
    spans = span_exporter.get_finished_spans()
    assert len(spans) == 2 and all(s.status.status_code is StatusCode.UNSET for s in spans)


def test_unhandled_throw_is_recorded_and_propagates(span_exporter: Any) -> None:
    @span
    def numbers() -> Generator[int, None, None]:
        yield 1
        yield 2

    gen = numbers()
    next(gen)
    with pytest.raises(StreamError):
        gen.throw(StreamError("from consumer"))
    s = only_span(span_exporter)
    assert s.status.status_code is StatusCode.ERROR


def test_never_iterated_generator_makes_no_span(span_exporter: Any) -> None:
    @span
    def numbers() -> Iterator[int]:
        yield 1

    gen = numbers()
    del gen
    gc.collect()
    assert span_exporter.get_finished_spans() == ()


def test_interleaved_generators_keep_their_own_spans(span_exporter: Any) -> None:
    seen: list[tuple[str, str | None]] = []

    @span
    def left() -> Iterator[int]:
        for i in range(3):
            seen.append(("left", _current_name()))
            yield i

    @span
    def right() -> Iterator[int]:
        for i in range(3):
            seen.append(("right", _current_name()))
            yield i

    @agent
    def driver(q: str) -> list[tuple[int, int]]:
        return list(zip(left(), right()))

    assert driver("q") == [(0, 0), (1, 1), (2, 2)]
    assert all(tag == name for tag, name in seen)
    spans = spans_by_name(span_exporter)
    assert is_child(spans["left"], spans["invoke_agent driver"])
    assert is_child(spans["right"], spans["invoke_agent driver"])


def test_generator_agent_hand_off_joins_string_items(span_exporter: Any) -> None:
    calls: list[AgentCall] = []
    listener = calls.append  # one bound-method object, so removal finds it
    add_agent_call_listener(listener)
    try:

        @agent
        def stream(q: str) -> Iterator[str]:
            yield "Hello, "
            yield "world"

        assert "".join(stream("hi")) == "Hello, world"
    finally:
        remove_agent_call_listener(listener)
    (call,) = calls
    assert (call.input, call.output, call.error) == ("hi", "Hello, world", None)


# --- async generators --------------------------------------------------------------------------


async def test_async_generator_exhaustion(span_exporter: Any) -> None:
    inside: list[str | None] = []

    @agent
    async def stream(q: str) -> AsyncIterator[str]:
        for word in ("a", "b"):
            await asyncio.sleep(0)
            inside.append(_current_name())
            await aprobe(word)
            yield word

    outside = []
    async for item in stream("q"):
        outside.append(_current_name())
    spans = span_exporter.get_finished_spans()
    agent_span = next(s for s in spans if s.name == "invoke_agent stream")
    assert all(is_child(s, agent_span) for s in spans if s.name == "execute_tool aprobe")
    assert inside == ["invoke_agent stream"] * 2
    assert outside == [None, None]
    assert attr_json(agent_span, sc.GEN_AI_OUTPUT_MESSAGES)[0]["parts"][0]["content"] == "ab"


@tool
async def aprobe(tag: str) -> str:
    await asyncio.sleep(0)
    return tag


async def test_async_generator_aclose(span_exporter: Any) -> None:
    cleanup: list[str | None] = []

    @span
    async def numbers() -> AsyncGenerator[int, None]:
        try:
            for i in range(10):
                yield i
        finally:
            await asyncio.sleep(0)
            cleanup.append(_current_name())

    agen = numbers()
    assert await agen.__anext__() == 0
    await agen.aclose()
    s = only_span(span_exporter)
    assert s.end_time is not None and s.status.status_code is StatusCode.UNSET
    assert cleanup == ["numbers"]


async def test_async_generator_exception(span_exporter: Any) -> None:
    @span
    async def numbers() -> AsyncIterator[int]:
        yield 1
        raise StreamError("async broken")

    with pytest.raises(StreamError, match="async broken"):
        async for _ in numbers():
            pass
    s = only_span(span_exporter)
    assert s.status.status_code is StatusCode.ERROR
    assert s.attributes[sc.ERROR_TYPE].endswith("StreamError")


async def test_async_generator_cancellation(span_exporter: Any) -> None:
    started = asyncio.Event()

    @agent
    async def slow(q: str) -> AsyncIterator[str]:
        yield "first"
        started.set()
        await asyncio.sleep(3600)
        yield "never"

    async def consume() -> list[str]:
        return [item async for item in slow("q")]

    task = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    s = only_span(span_exporter)
    assert s.end_time is not None
    assert s.status.status_code is StatusCode.ERROR
    assert s.attributes[sc.ERROR_TYPE] == "asyncio.exceptions.CancelledError"


async def test_async_generator_garbage_collected(span_exporter: Any) -> None:
    @span
    async def numbers() -> AsyncIterator[int]:
        for i in range(10):
            yield i

    agen = numbers()
    assert await agen.__anext__() == 0
    del agen
    gc.collect()
    for _ in range(20):  # the loop's async-generator finalizer schedules aclose()
        await asyncio.sleep(0)
        if span_exporter.get_finished_spans():
            break
    s = only_span(span_exporter)
    assert s.end_time is not None


async def test_async_generator_asend_athrow(span_exporter: Any) -> None:
    @span
    async def echo() -> AsyncGenerator[str, Any]:
        received = yield "ready"
        while True:
            try:
                received = yield f"got {received}"
            except KeyError:
                received = yield "caught"

    agen = echo()
    assert await agen.asend(None) == "ready"
    assert await agen.asend("x") == "got x"
    assert await agen.athrow(KeyError("k")) == "caught"
    await agen.aclose()
    assert only_span(span_exporter).status.status_code is StatusCode.UNSET


async def test_async_generators_consumed_concurrently(span_exporter: Any) -> None:
    @span(name="producer")
    async def producer(tag: str) -> AsyncIterator[str]:
        for i in range(3):
            await asyncio.sleep(0)
            assert _current_name() == "producer"
            await aprobe(f"{tag}{i}")
            yield f"{tag}{i}"

    @agent
    async def driver(q: str) -> list[list[str]]:
        async def drain(tag: str) -> list[str]:
            return [x async for x in producer(tag)]

        return list(await asyncio.gather(drain("a"), drain("b")))

    assert await driver("q") == [["a0", "a1", "a2"], ["b0", "b1", "b2"]]
    spans = span_exporter.get_finished_spans()
    agent_span = next(s for s in spans if s.name == "invoke_agent driver")
    producers = [s for s in spans if s.name == "producer"]
    assert len(producers) == 2 and all(is_child(p, agent_span) for p in producers)
    probes = [s for s in spans if s.name == "execute_tool aprobe"]
    assert len(probes) == 6
    assert {p.parent.span_id for p in probes} == {p.context.span_id for p in producers}
