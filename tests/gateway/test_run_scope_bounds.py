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
        assert engine.run_stats() == {"runs_scored.overflow": 1, "runs_waiting": 2,
                                      "runs_late_spans": 0}
        assert engine.flush(30)
        assert engine.run_stats() == {"runs_scored.overflow": 1, "runs_scored.flush": 2,
                                      "runs_waiting": 0, "runs_late_spans": 0}
    finally:
        engine.shutdown(10)
    assert len(out.spans) == len(requests)  # each span once
    assert Counter(s.name for s in out.spans)["invoke_agent assistant"] == 3
    partial = []
    for span in out.spans:
        results = [e for e in span.events if e.name == sc.GEN_AI_EVALUATION_RESULT]
        if span.name == "invoke_agent assistant":
            [result] = results  # the root, once
            attributes = {kv.key: kv.value for kv in result.attributes}
            assert attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE].double_value == 1.0  # its
            # sub-agent's tool call is in the run
            partial.append(attributes[sc.TS_RUN_PARTIAL].string_value
                           if sc.TS_RUN_PARTIAL in attributes else None)
        else:
            assert results == []
    assert sorted(partial, key=str) == [None, None, "overflow"]  # let go by a bound: may lack spans


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


def _engine(out: _Out) -> Engine:
    return Engine(scorers=[create_trajectory_accuracy_scorer(expected_trajectory=["search"])],
                  recognisers=tracescore.build_recognisers(), output=out,
                  metrics=GatewayMetrics(), processor_options={"isolation": "thread"},
                  run_options={"quiet_s": 600})


def _run_results(out: _Out) -> list[dict[str, Any]]:
    return [{kv.key: kv.value for kv in e.attributes} for s in out.spans
            if s.name == "invoke_agent assistant" for e in s.events
            if e.name == sc.GEN_AI_EVALUATION_RESULT]


def test_a_run_that_straddles_a_restart_says_it_may_lack_spans_and_late_spans_are_counted(
        ) -> None:
    """The run's tool span reached the gateway before its restart, the rest after: the run is
    judged without the tool call (trajectory 0) and its result says why it may be partial. A
    span re-sent after the run was scored is counted as late."""
    requests = _requests(1)  # the run ended (its spans exist) before either gateway started
    tool = [r for r in requests if r.resource_spans[0].scope_spans[0].spans[0].name
            == "execute_tool search"]
    rest = [r for r in requests if r not in tool]
    assert len(tool) == 1 and rest
    retry = rest[0].SerializeToString()  # (the engine takes held spans out of a request)
    before, after = _Out(), _Out()
    first = _engine(before)
    try:
        first.accept(tool[0])
    finally:
        first.shutdown(10)
    second = _engine(after)
    try:
        for request in rest:
            second.accept(request)
        assert second.flush(30)
        [result] = _run_results(after)
        assert result[sc.GEN_AI_EVALUATION_SCORE_VALUE].double_value == 0.0
        assert result[sc.TS_RUN_PARTIAL].string_value == "before_start"
        second.accept(ExportTraceServiceRequest.FromString(retry))  # a sender's late retry
        assert second.run_stats()["runs_late_spans"] == 1
    finally:
        second.shutdown(10)


def test_a_run_that_began_after_the_gateway_started_is_not_marked() -> None:
    out = _Out()
    engine = _engine(out)
    try:
        for request in _requests(1):
            engine.accept(request)
        assert engine.flush(30)
        [result] = _run_results(out)
        assert sc.TS_RUN_PARTIAL not in result
        assert engine.run_stats()["runs_late_spans"] == 0
    finally:
        engine.shutdown(10)
