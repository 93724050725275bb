"""Parent/child nesting across nested calls, asyncio (gather, tasks) and threads/executors."""

from __future__ import annotations

import asyncio
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from opentelemetry import trace
from test_decorators_support import (  # noqa: F401 - autouse fixtures
    clean_content_settings,
    is_child,
    no_context_errors,
    spans_by_name,
)

import tracescore
from tracescore.instrument._calls import (
    AgentCall,
    add_agent_call_listener,
    remove_agent_call_listener,
    set_ground_truth,
)
from tracescore.instrument._context import ContextThreadPoolExecutor, propagate_context
from tracescore.instrument._decorators import agent, span, tool


@tool
def work(tag: str) -> str:
    return tag


@tool
async def awork(tag: str) -> str:
    await asyncio.sleep(0)
    return tag


def _children_of(exporter: Any, parent_name: str, child_name: str) -> tuple[Any, list[Any]]:
    spans = exporter.get_finished_spans()
    parent = next(s for s in spans if s.name == parent_name)
    children = [s for s in spans if s.name == child_name]
    return parent, children


def test_public_names() -> None:
    assert tracescore.propagate_context is propagate_context
    assert tracescore.ContextThreadPoolExecutor is ContextThreadPoolExecutor


def test_deeply_nested_calls(span_exporter: Any) -> None:
    @span(name="inner")
    def inner() -> str:
        return work("leaf")

    @span(name="middle")
    def middle() -> str:
        return inner()

    @agent
    def outer(q: str) -> str:
        return middle()

    assert outer("q") == "leaf"
    s = spans_by_name(span_exporter)
    assert is_child(s["middle"], s["invoke_agent outer"])
    assert is_child(s["inner"], s["middle"])
    assert is_child(s["execute_tool work"], s["inner"])
    assert s["invoke_agent outer"].parent is None
    assert trace.get_current_span() is trace.INVALID_SPAN


async def test_asyncio_gather_children_are_siblings(span_exporter: Any) -> None:
    @agent
    async def fan_out(q: str) -> list[str]:
        return list(await asyncio.gather(awork("a"), awork("b"), awork("c")))

    assert await fan_out("q") == ["a", "b", "c"]
    parent, children = _children_of(span_exporter, "invoke_agent fan_out", "execute_tool awork")
    assert len(children) == 3 and all(is_child(c, parent) for c in children)


async def test_tasks_created_inside_a_span_nest_under_it(span_exporter: Any) -> None:
    @agent
    async def spawner(q: str) -> str:
        task = asyncio.create_task(awork("task"))
        return await task

    await spawner("q")
    parent, children = _children_of(span_exporter, "invoke_agent spawner", "execute_tool awork")
    assert len(children) == 1 and is_child(children[0], parent)


async def test_concurrent_agents_do_not_mix_traces(span_exporter: Any) -> None:
    @agent
    async def bot(q: str) -> str:
        await asyncio.sleep(0)
        await awork(q)
        await asyncio.sleep(0)
        return await awork(q + "!")

    await asyncio.gather(*(bot(str(i)) for i in range(5)))
    spans = span_exporter.get_finished_spans()
    agents = {s.context.span_id: s for s in spans if s.name == "invoke_agent bot"}
    tools = [s for s in spans if s.name == "execute_tool awork"]
    assert len(agents) == 5 and len(tools) == 10
    for t in tools:
        parent = agents[t.parent.span_id]
        assert t.context.trace_id == parent.context.trace_id
    assert len({s.context.trace_id for s in agents.values()}) == 5


def test_context_thread_pool_submit_and_map(span_exporter: Any) -> None:
    @agent
    def bot(q: str) -> list[str]:
        with ContextThreadPoolExecutor(max_workers=2) as pool:
            first = pool.submit(work, "submitted").result()
            rest = list(pool.map(work, ["m1", "m2", "m3"]))
        return [first, *rest]

    assert bot("q") == ["submitted", "m1", "m2", "m3"]
    parent, children = _children_of(span_exporter, "invoke_agent bot", "execute_tool work")
    assert len(children) == 4 and all(is_child(c, parent) for c in children)


def test_plain_thread_with_propagate_context(span_exporter: Any) -> None:
    @agent
    def bot(q: str) -> None:
        thread = threading.Thread(target=propagate_context(work), args=("threaded",))
        thread.start()
        thread.join()

    bot("q")
    parent, children = _children_of(span_exporter, "invoke_agent bot", "execute_tool work")
    assert len(children) == 1 and is_child(children[0], parent)


def test_propagate_context_works_with_a_standard_executor(span_exporter: Any) -> None:
    @agent
    def bot(q: str) -> str:
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(propagate_context(work), "x").result()

    bot("q")
    parent, children = _children_of(span_exporter, "invoke_agent bot", "execute_tool work")
    assert len(children) == 1 and is_child(children[0], parent)


async def test_run_in_executor_carries_context(span_exporter: Any) -> None:
    @agent
    async def bot(q: str) -> str:
        loop = asyncio.get_running_loop()
        with ContextThreadPoolExecutor(max_workers=1) as pool:
            return await loop.run_in_executor(pool, work, "in-executor")

    assert await bot("q") == "in-executor"
    parent, children = _children_of(span_exporter, "invoke_agent bot", "execute_tool work")
    assert len(children) == 1 and is_child(children[0], parent)


def test_context_is_captured_when_wrapped(span_exporter: Any) -> None:
    holder: list[Any] = []

    @span(name="origin")
    def origin() -> None:
        holder.append(propagate_context(work))

    origin()
    holder[0]("later")  # called after `origin` ended, outside any span
    s = spans_by_name(span_exporter)
    assert is_child(s["execute_tool work"], s["origin"])
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_wrapped_callable_runs_concurrently_and_keeps_metadata(span_exporter: Any) -> None:
    def job(i: int) -> int:
        """Job docs."""
        work(str(i))
        return i * i

    @span(name="batch")
    def batch() -> list[int]:
        wrapped = propagate_context(job)
        assert wrapped.__name__ == "job" and wrapped.__doc__ == "Job docs."
        with ThreadPoolExecutor(max_workers=4) as pool:
            return list(pool.map(wrapped, range(8)))

    assert batch() == [i * i for i in range(8)]
    parent, children = _children_of(span_exporter, "batch", "execute_tool work")
    assert len(children) == 8 and all(is_child(c, parent) for c in children)


def test_ground_truth_set_in_a_worker_reaches_the_agent_call(span_exporter: Any) -> None:
    calls: list[AgentCall] = []
    listener = calls.append  # one bound-method object, so removal finds it
    add_agent_call_listener(listener)

    def label() -> None:
        set_ground_truth("from worker")

    @agent
    def bot(q: str) -> str:
        with ContextThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(label).result()
        return "a"

    try:
        bot("q")
    finally:
        remove_agent_call_listener(listener)
    assert calls[0].ground_truth == "from worker"


def test_listeners_added_and_removed_from_many_threads_at_once_are_all_kept_track_of() -> None:
    from tracescore.instrument import _calls

    def register(batch: int) -> list[Any]:
        mine = [(lambda call, n=n: None) for n in range(200)]
        for listener in mine:
            add_agent_call_listener(listener, lambda span: True)
        return mine

    before, added = _calls._listeners, []
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # interleave the threads as often as possible
    try:
        with ThreadPoolExecutor(8) as pool:
            added = [x for batch in pool.map(register, range(8)) for x in batch]
            assert set(added) <= set(_calls._listeners)  # no registration lost
            list(pool.map(remove_agent_call_listener, added))
    finally:
        sys.setswitchinterval(switch)
        for listener in added:
            remove_agent_call_listener(listener)
    assert _calls._listeners == before  # and no removal either
