"""The context scorers by name where users run them: live agent calls scored in the background
(`configure(scorers=[...])`, the context read from the call's tool spans), `run_evals` (the
context given per item) and `tracescore score --context`, with the offline judge, all equal to a
direct run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import _semconv as sc
from tracescore import run_evals
from tracescore.scoring._registry import create_scorer

NAMES = ("faithfulness", "hallucination", "context-relevance")
QUESTION = "How long do refunds take?"
FOUND = "Refunds take 5 days. Refunds above 100 EUR need a manager."
ANSWER = "Refunds take 5 days. Refunds above 100 EUR need a manager. Refunds are free on Mondays."


@tracescore.tool
def search(query: str) -> str:
    return FOUND


@tracescore.agent(name="support")
def support(question: str) -> str:
    search(question)
    return ANSWER


def _direct(name: str) -> float:
    return create_scorer(name).run(input=QUESTION, output=ANSWER, context=[FOUND]).score


def test_live_calls_are_scored_against_their_tool_results() -> None:
    exporter = InMemorySpanExporter()
    handle = tracescore.configure(exporter=exporter, batch=False, scorers=list(NAMES))
    try:
        support(QUESTION)
        assert handle.flush(30)
    finally:
        handle.shutdown(30)
    [span] = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent support"]
    events = {e.attributes[sc.TS_SCORER_ID]: e.attributes for e in span.events
              if e.name == sc.GEN_AI_EVALUATION_RESULT}
    scores = {sid: attrs[sc.GEN_AI_EVALUATION_SCORE_VALUE] for sid, attrs in events.items()}
    assert scores == {name: _direct(name) for name in NAMES}
    # two of three claims are in the tool's result: not 0 (no context) and not 1
    assert scores["faithfulness"] == pytest.approx(0.67)
    assert scores["hallucination"] == pytest.approx(0.33)
    assert events["faithfulness"][sc.GEN_AI_EVALUATION_SCORE_LABEL] == "partially_faithful"


def test_run_evals_scores_against_each_items_context() -> None:
    data: list[dict[str, Any]] = [{"input": QUESTION, "context": [FOUND]}, {"input": QUESTION}]
    result = run_evals(data, list(NAMES), lambda question: ANSWER)
    assert not result.failures
    by_item = [{sid: r.score for sid, r in item.scores.items()} for item in result.items]
    assert by_item[0] == {name: _direct(name) for name in NAMES}
    # without context: faithfulness 0, hallucination 1, context relevance 1 (not penalised)
    assert by_item[1] == {"faithfulness": 0.0, "hallucination": 1.0, "context-relevance": 1.0}


def test_the_score_command_takes_the_context() -> None:
    command = [str(Path(sys.executable).parent / "tracescore"), "score", "-i", QUESTION,
               "-o", ANSWER, "--context", FOUND, "--json", *(f"-s{name}" for name in NAMES)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    scores = {r["scorer_id"]: r["score"] for r in json.loads(done.stdout)}
    assert scores == {name: _direct(name) for name in NAMES}
