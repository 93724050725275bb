"""The intake's bounded wait for LLM calls (`LlmWait`): an agent span without content waits
until the LLM calls below it are in the trace collection, its content is read another way, or
its time runs out; never longer, never more of them than allowed, and each is handed back to
its door exactly once whatever order spans, content and deadlines come in."""

from __future__ import annotations

import json
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from tracescore.online.intake import (
    ContentlessAgent,
    LlmWait,
    RecognisedCall,
    Waiting,
    collector_from,
    read_llm_call,
)

_AGENT = ContentlessAgent("genai", "bot")
_AGENT_ID, _LLM_ID = 1, 2  # in every trace: an agent span and one LLM call below it


def _llm_call(trace_id: int) -> object:
    call = read_llm_call({
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": f"question {trace_id}"}]}]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": "answer"}]}]),
    }, trace_id)
    assert call is not None
    return call


def _wait(llm_wait_s: float = 60.0, max_waiting: int = 100,
          expired: list[Waiting[str]] | None = None) -> LlmWait[str]:
    traces = collector_from({"llm_wait_s": llm_wait_s})
    gone = expired if expired is not None else []
    return LlmWait(traces, max_waiting=max_waiting, expired=gone.append)


def _arrive(wait: LlmWait[str], trace_id: int) -> None:
    wait.traces.add(trace_id, _LLM_ID, _AGENT_ID, None, _llm_call(trace_id))  # type: ignore[arg-type]


_READ = RecognisedCall("genai", "bot", "q", "a")
_STEPS = st.lists(st.tuples(st.sampled_from(["wait", "llm", "arrived", "take", "drain"]),
                            st.integers(1, 6)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(steps=_STEPS, max_waiting=st.integers(1, 6))
def test_each_waiting_span_is_handed_back_once_and_read_only_from_its_own_calls(
        steps: list[tuple[str, int]], max_waiting: int) -> None:
    wait = _wait(max_waiting=max_waiting)
    waited: dict[int, int] = {}  # trace id -> times it went in
    handed: dict[int, int] = {}  # trace id -> times it came back
    arrived: set[int] = set()
    for step, trace_id in steps:
        key = (trace_id, _AGENT_ID)
        if step == "wait":
            before = len(wait)
            answer = wait.wait(key, f"span {trace_id}", _AGENT)
            if waited.get(trace_id, 0) > handed.get(trace_id, 0):
                assert answer == LlmWait.DUPLICATE
            elif before >= max_waiting:
                assert answer == LlmWait.FULL
            else:
                assert answer == LlmWait.WAITING
                waited[trace_id] = waited.get(trace_id, 0) + 1
            assert len(wait) <= max_waiting
        elif step == "llm":
            _arrive(wait, trace_id)
            arrived.add(trace_id)
        elif step == "arrived":
            for entry, call in wait.arrived(range(1, 7)):
                assert entry.key[0] in arrived  # read from its own LLM calls only
                assert call.input == [{"role": "user", "content": f"question {entry.key[0]}"}]
                assert entry.item == f"span {entry.key[0]}"
                handed[entry.key[0]] = handed.get(entry.key[0], 0) + 1
        elif step == "take":  # its content read some other way (log records)
            for entry, call in wait.take([key], lambda _: _READ):
                assert call is _READ
                handed[entry.key[0]] = handed.get(entry.key[0], 0) + 1
        else:
            for entry in wait.drain():
                handed[entry.key[0]] = handed.get(entry.key[0], 0) + 1
    for entry in wait.close():
        handed[entry.key[0]] = handed.get(entry.key[0], 0) + 1
    assert handed == waited
    assert wait.wait((9, _AGENT_ID), "late", _AGENT) == LlmWait.CLOSED


def test_a_wait_that_runs_out_goes_back_once_on_the_timer_thread() -> None:
    expired: list[Waiting[str]] = []
    done = threading.Event()

    def gone(entry: Waiting[str]) -> None:
        expired.append(entry)
        done.set()

    wait: LlmWait[str] = LlmWait(collector_from({"llm_wait_s": 0.05}), max_waiting=10,
                                 expired=gone)
    assert wait.wait((5, _AGENT_ID), "span 5", _AGENT) == LlmWait.WAITING
    assert done.wait(5.0)
    _arrive(wait, 5)
    assert wait.arrived([5]) == []  # its wait is over: not handed back twice
    assert [(e.key, e.item) for e in expired] == [((5, _AGENT_ID), "span 5")]
    assert wait.read(expired[0]) is not None and not wait.only_agents_below(expired[0])
    assert len(wait) == 0
    wait.close()


def test_a_failing_door_does_not_stop_the_timer() -> None:
    seen: list[int] = []
    done = threading.Event()

    def expired(entry: Waiting[str]) -> None:
        seen.append(entry.key[0])
        if entry.key[0] == 1:
            raise RuntimeError("the door failed")
        done.set()

    wait: LlmWait[str] = LlmWait(collector_from({"llm_wait_s": 0.05}), max_waiting=10,
                                 expired=expired)
    wait.wait((1, _AGENT_ID), "span 1", _AGENT)
    wait.wait((2, _AGENT_ID), "span 2", _AGENT)
    assert done.wait(5.0)
    assert seen == [1, 2]
    wait.close()


def test_no_wait_when_the_wait_is_zero() -> None:
    wait = _wait(llm_wait_s=0)
    assert wait.wait((1, _AGENT_ID), "span 1", _AGENT) == LlmWait.NO_WAIT
    assert len(wait) == 0
