"""The gateway's run scope within its bounds: runs past `runs.max_runs` are scored at once with
what arrived (counted), flush scores the waiting ones, each run once at its root, every span
going on once; the `runs:` settings are checked."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import _semconv as sc
from tracescore._exceptions import ConfigurationError
from tracescore.gateway import load_gateway_config
from tracescore.gateway._engine import Engine
from tracescore.gateway._metrics import GatewayMetrics
from tracescore.scoring.trajectory import create_trajectory_accuracy_scorer


@tracescore.tool
def search(query: str) -> str:
    return "doc-1"


@tracescore.agent(name="researcher")
def researcher(question: str) -> str:
    return search(question)


@tracescore.agent(name="assistant")
def assistant(question: str) -> str:
    return researcher(question).upper()


class _Out:
    def __init__(self) -> None:
        self.spans: list[Any] = []

    def put(self, ids: tuple[int, ...], body: bytes, count: int) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        self.spans.extend(s for rs in request.resource_spans for ss in rs.scope_spans
                          for s in ss.spans)


def _requests(runs: int) -> list[ExportTraceServiceRequest]:
    """Each span of `runs` runs in a request of its own, in the order they ended."""
    exporter = InMemorySpanExporter()
    handle = tracescore.configure(exporter=exporter, batch=False)
    try:
        for n in range(runs):
            assistant(f"question {n}")
    finally:
        handle.shutdown(10)
    return [encode_spans([span]) for span in exporter.get_finished_spans()]


def test_runs_past_max_runs_are_scored_at_once_and_flush_scores_the_rest() -> None:
    out = _Out()
    engine = Engine(scorers=[create_trajectory_accuracy_scorer(expected_trajectory=["search"])],
                    recognisers=tracescore.build_recognisers(), output=out,
                    metrics=GatewayMetrics(), processor_options={"isolation": "thread"},
                    run_options={"quiet_s": 600, "max_runs": 2})
    requests = _requests(3)
    try:
        for request in requests:
            engine.accept(request)
        assert engine.run_stats() == {"runs_scored.overflow": 1, "runs_waiting": 2}
        assert engine.flush(30)
        assert engine.run_stats() == {"runs_scored.overflow": 1, "runs_scored.flush": 2,
                                      "runs_waiting": 0}
    finally:
        engine.shutdown(10)
    assert len(out.spans) == len(requests)  # each span once
    assert Counter(s.name for s in out.spans)["invoke_agent assistant"] == 3
    for span in out.spans:
        results = [e for e in span.events if e.name == sc.GEN_AI_EVALUATION_RESULT]
        if span.name == "invoke_agent assistant":
            [result] = results  # the root, once
            score = {kv.key: kv.value for kv in result.attributes}[
                sc.GEN_AI_EVALUATION_SCORE_VALUE]
            assert score.double_value == 1.0  # its sub-agent's tool call is in the run
        else:
            assert results == []


@pytest.mark.parametrize("runs, message", [
    ("runs: {quiet_s: -1}", "runs.quiet_s"),
    ("runs: {max_runs: 0}", "runs.max_runs"),
    ("runs: {wait: 3}", "runs.wait"),
])
def test_bad_run_settings_name_their_key(tmp_path: Path, runs: str, message: str) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(runs + "\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match=message.replace(".", r"\.")):
        load_gateway_config(config, environ={})
