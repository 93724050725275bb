"""The run a run-scope scorer sees in process: every LLM call, tool call (arguments, result,
error) and sub-agent of the run, in start order, with when each started and how long it took;
the tool calls alone as its steps. A sub-agent never takes a run-scope scorer's rate limit."""

from __future__ import annotations

import time
from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import _semconv as sc
from tracescore.scoring import Scorer, ScoreResult, ScorerInput
from tracescore.scoring._runs import AGENT, LLM_CALL, TOOL_CALL, Run, Step


class _Recorder(Scorer):
    """A run-scope scorer that keeps the runs it was given."""

    id = "run-recorder"
    name = "run recorder"
    uses_judge = False
    scope = "run"

    def __init__(self) -> None:
        self.runs: list[Run] = []

    async def evaluate(self, call: ScorerInput) -> ScoreResult:
        self.runs.append(call.trajectory)
        return ScoreResult(score=1.0, run_id=call.run_id or "", scorer_id=self.id,
                           scorer_name=self.name)


@tracescore.llm(model="stub-model")
def chat(prompt: str, model: str = "stub-model") -> dict[str, Any]:
    time.sleep(0.002)
    return {"model": "stub-model", "usage": {"prompt_tokens": 7, "completion_tokens": 3},
            "choices": [{"message": {"role": "assistant", "content": f"ok: {prompt}"}}]}


@tracescore.tool
def search(query: str) -> list[str]:
    time.sleep(0.002)
    return ["doc-1", "doc-2"]


@tracescore.tool
def fetch(doc: str) -> str:
    raise TimeoutError("the store did not answer")


@tracescore.agent(name="researcher")
def researcher(question: str) -> str:
    chat(question)
    found = search(question)
    try:
        fetch(found[0])
    except TimeoutError:
        pass
    return found[0]


@tracescore.agent(name="assistant")
def assistant(question: str) -> str:
    chat(question)
    found = researcher(question)
    return chat(found)["choices"][0]["message"]["content"]


def _shape(steps: tuple[Step, ...]) -> list[Any]:
    return [(s.type, s.name, _shape(s.children)) if s.children else (s.type, s.name)
            for s in steps]


def test_a_run_scorer_sees_every_llm_call_tool_call_and_sub_agent_in_order_with_timings() -> None:
    recorder = _Recorder()
    exporter = InMemorySpanExporter()
    handle = tracescore.configure(exporter=exporter, batch=False, scorers=[recorder],
                                  capture_content=True)
    try:
        assistant("Where is doc 1?")
        assert handle.flush(30)
    finally:
        handle.shutdown(30)
    [run] = recorder.runs  # once per run, at its root
    assert _shape(run.timeline) == [
        (LLM_CALL, "stub-model"),
        (AGENT, "researcher", [(LLM_CALL, "stub-model"), (TOOL_CALL, "search"),
                               (TOOL_CALL, "fetch")]),
        (LLM_CALL, "stub-model"),
    ]
    assert [s.name for s in run.steps] == ["search", "fetch"]  # what trajectories compare
    search_step, fetch_step = run.steps
    assert search_step.arguments == {"query": "Where is doc 1?"}
    assert search_step.result == ["doc-1", "doc-2"] and search_step.error is None
    assert fetch_step.error is not None and "did not answer" in fetch_step.error
    llm = run.timeline[0]
    assert (llm.model, llm.input_tokens, llm.output_tokens) == ("stub-model", 7, 3)
    starts = [s.start_ms or -1.0 for s in run.timeline]
    assert all(s >= 0 for s in starts) and starts == sorted(starts)
    sub = run.timeline[1]
    assert sub.duration_ms is not None and sub.duration_ms >= 4  # its two sleeps
    assert all(c.start_ms is not None and c.start_ms >= sub.start_ms for c in sub.children)
    assert run.duration_ms is not None and run.duration_ms >= sub.duration_ms
    assert run.error is None


def test_sub_agents_take_no_rate_limit_of_a_run_scorer() -> None:
    """Three runs, each with a sub-agent, under a limit of three a minute: all three scored."""
    recorder = _Recorder()
    exporter = InMemorySpanExporter()
    limited = tracescore.OnlineScorer(recorder, rate_limit_per_minute=3)
    handle = tracescore.configure(exporter=exporter, batch=False, scorers=[limited])
    try:
        for n in range(3):
            assistant(f"question {n}")
        assert handle.flush(30)
        stats = handle.stats()
    finally:
        handle.shutdown(30)
    assert len(recorder.runs) == 3
    assert stats.get("dropped", 0) == 0, stats
    roots = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent assistant"]
    assert all(any(e.name == sc.GEN_AI_EVALUATION_RESULT for e in s.events) for s in roots)
