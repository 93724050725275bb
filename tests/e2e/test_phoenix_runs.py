"""A run-scope scorer's results reach a real Phoenix as trace annotations (its REST API's
`/v1/trace_annotations`): one per run, on the run's trace, naming the root span it was scored
at; call-scope scorers' stay span annotations."""

from __future__ import annotations

import time
import urllib.error
from typing import Any

import pytest
from opentelemetry import trace
from rigs.phoenix import PhoenixServer

import tracescore
from tracescore.online._phoenix_sink import PhoenixSink

pytestmark = pytest.mark.slow


@tracescore.tool
def search(query: str) -> str:
    return "doc-1"


@tracescore.tool
def fetch(doc: str) -> str:
    raise TimeoutError("the store did not answer")


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
    return researcher(question).upper()


def _trace_annotations(phoenix: PhoenixServer, trace_ids: list[str], expected: int,
                       timeout: float = 120.0) -> list[dict[str, Any]]:
    query = "&".join([*(f"trace_ids={t}" for t in trace_ids), "limit=1000"])
    deadline = time.monotonic() + timeout
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            found = phoenix.get_json(f"/v1/projects/default/trace_annotations?{query}")["data"]
        except urllib.error.HTTPError as exc:
            if exc.code != 404:  # the project exists from its first span on
                raise
        if len(found) >= expected:
            return found
        time.sleep(0.5)  # an external server: nothing to wait on but its API
    raise TimeoutError(f"Phoenix has {len(found)} of {expected} trace annotations")


@pytest.mark.timeout(1200)  # the first run installs Phoenix into the cache
def test_run_results_are_trace_annotations_in_phoenix(phoenix: PhoenixServer) -> None:
    on_track = tracescore.create_trajectory_accuracy_scorer(
        expected_trajectory=["search", "fetch"], ordering="strict")
    handle = tracescore.configure(
        exporter="otlp-http", endpoint=phoenix.base_url,
        scorers=[tracescore.OnlineScorer(on_track, sinks=("span", "phoenix"))],
        online={"sinks": {"phoenix": PhoenixSink(phoenix.base_url, flush_interval_s=0.1)}},
    )
    traces = []
    for n in range(2):
        with trace.get_tracer("test").start_as_current_span("request") as request:
            assistant(f"Where is doc {n}?")
            traces.append(f"{request.get_span_context().trace_id:032x}")
    assert handle.flush(60)
    found = _trace_annotations(phoenix, traces, expected=2)
    assert sorted(a["trace_id"] for a in found) == sorted(traces)  # one per run
    for note in found:
        assert note["name"] == "trajectory-accuracy" and note["annotator_kind"] == "CODE"
        assert note["result"]["score"] == 1.0
        assert len(note["metadata"]["root_span_id"]) == 16
    spans = phoenix.get_json("/v1/projects/default/span_annotations",
                             span_ids=found[0]["metadata"]["root_span_id"])["data"]
    assert spans == []  # a run's result is the trace's, not a span's
