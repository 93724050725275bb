"""Run scope in process: a scorer whose scope is "run" is scored once per run, at its root agent
span, with every tool call of the run (its sub-agents' too) in order; the sub-agents' spans carry
no run-scope result, and every span is exported exactly once."""

from __future__ import annotations

from collections import Counter

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import _semconv as sc
from tracescore.scoring.trajectory import create_trajectory_accuracy_scorer

STEPS = ["plan", "search", "fetch", "answer"]


@tracescore.tool
def plan(question: str) -> str:
    return "search, then fetch"


@tracescore.tool
def search(query: str) -> str:
    return "doc-1"


@tracescore.tool
def fetch(doc: str) -> str:
    raise TimeoutError("the store did not answer")


@tracescore.tool
def answer(text: str) -> str:
    return text.upper()


@tracescore.agent(name="researcher")
def researcher(question: str) -> str:
    found = search(question)
    try:
        fetch(found)
    except TimeoutError:
        pass
    return found


@tracescore.agent(name="assistant")
def assistant(question: str) -> str:
    plan(question)
    found = researcher(question)
    return answer(found)


def _events(span: object, scorer_id: str) -> list[dict[str, object]]:
    return [dict(e.attributes) for e in span.events  # type: ignore[attr-defined]
            if e.name == sc.GEN_AI_EVALUATION_RESULT
            and e.attributes[sc.TS_SCORER_ID] == scorer_id]


def test_a_run_scorer_scores_each_run_once_at_its_root_with_all_its_steps() -> None:
    exporter = InMemorySpanExporter()
    strict = create_trajectory_accuracy_scorer(expected_trajectory=STEPS, ordering="strict")
    handle = tracescore.configure(exporter=exporter, batch=False, scorers=[strict])
    try:
        for n in range(3):
            assistant(f"question {n}")
        assert handle.flush(30)
    finally:
        handle.shutdown(30)
    spans = exporter.get_finished_spans()
    # no span lost, none exported twice
    assert Counter(s.name for s in spans)["invoke_agent assistant"] == 3
    assert Counter(s.name for s in spans)["invoke_agent researcher"] == 3
    assert len({(s.context.trace_id, s.context.span_id) for s in spans}) == len(spans) == 3 * 6
    for root in (s for s in spans if s.name == "invoke_agent assistant"):
        [event] = _events(root, "trajectory-accuracy")  # once per run
        # every step of the run, the sub-agent's failing one too, in order
        assert event[sc.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0, event
    for sub in (s for s in spans if s.name == "invoke_agent researcher"):
        assert _events(sub, "trajectory-accuracy") == []
    assert handle.stats()["held"] == 0
