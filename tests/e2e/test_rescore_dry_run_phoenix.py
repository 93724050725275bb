"""`tracescore rescore --dry-run --force` leaves a real Phoenix as it was: with the spans of calls,
runs and conversations in Phoenix and real `answer-relevancy` annotations on the calls, a dry
run of call, run and conversation scorers with every sink (Phoenix included) adds, replaces or
zeroes no span, trace or session annotation."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from _reach import judge
from click.testing import CliRunner
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from rigs.phoenix import PhoenixServer
from test_rescore_dry_run_sinks import _scorer, calls  # noqa: F401 (fixture)
from test_rescore_scopes import runs, talks  # noqa: F401 (fixtures)

from tracescore._otlp_json import parse_otlp_json
from tracescore.cli import main
from tracescore.online._phoenix_sink import ENV_COLLECTOR_ENDPOINT
from tracescore.testing import StubLLMServer

pytestmark = pytest.mark.slow


def _requests(path: Path) -> list[ExportTraceServiceRequest]:
    return [parse_otlp_json(line, ExportTraceServiceRequest())
            for line in path.read_text().splitlines() if line.strip()]


def _ids(path: Path) -> tuple[set[str], set[str]]:
    """(span ids, trace ids) of a file, in hex."""
    spans = [s for r in _requests(path) for rs in r.resource_spans for ss in rs.scope_spans
             for s in ss.spans]
    return {s.span_id.hex() for s in spans}, {s.trace_id.hex() for s in spans}


def _send(phoenix: PhoenixServer, path: Path) -> None:
    for request in _requests(path):
        post = urllib.request.Request(phoenix.traces_url, data=request.SerializeToString(),
                                      headers={"Content-Type": "application/x-protobuf"})
        with urllib.request.urlopen(post, timeout=30) as answer:
            assert answer.status == 200


def _annotations(phoenix: PhoenixServer, kind: str, key: str, ids: set[str]) -> list[Any]:
    query = "&".join([*(f"{key}={i}" for i in sorted(ids)), "limit=1000"])
    data = phoenix.get_json(f"/v1/projects/default/{kind}_annotations?{query}")["data"]
    return sorted(json.dumps(a, sort_keys=True) for a in data)


@pytest.mark.timeout(1200)  # the first run installs Phoenix into the cache
def test_a_dry_run_leaves_a_real_phoenix_unchanged(
        phoenix: PhoenixServer, calls: Path, runs: Path, talks: Path,  # noqa: F811
        tmp_path: Path, stub_llm: StubLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_COLLECTOR_ENDPOINT, phoenix.base_url)
    stub_llm.responder = judge  # every answer relevant
    for path in (calls, runs, talks):
        _send(phoenix, path)
    call_spans, _ = _ids(calls)
    run_spans, run_traces = _ids(runs)
    talk_spans, _ = _ids(talks)
    real = tmp_path / "real.yaml"
    real.write_text("scoring:\n  scorers:\n    - " + _scorer("call", stub_llm.base_url)
                    .replace("[span, carrier, log, phoenix]", "[span, phoenix]") + "\n")
    done = CliRunner().invoke(main, ["rescore", str(calls), "-c", str(real),
                                     "-o", str(tmp_path / "scored.jsonl")])
    assert done.exit_code == 0, done.output
    before = phoenix.wait_for_span_annotations(sorted(call_spans), 3)
    assert {a["result"]["score"] for a in before} == {1.0}  # the stub judge's relevant answers
    span_ids = call_spans | run_spans | talk_spans
    snapshot = (_annotations(phoenix, "span", "span_ids", span_ids),
                _annotations(phoenix, "trace", "trace_ids", run_traces),
                _annotations(phoenix, "session", "session_ids", {"alpha", "beta"}))
    assert len(snapshot[0]) == 3 and snapshot[1:] == ([], [])

    for scope, source in (("call", calls), ("run", runs), ("conversation", talks)):
        config = tmp_path / f"dry-{scope}.yaml"
        config.write_text(f"scoring:\n  scorers:\n    - {_scorer(scope, stub_llm.base_url)}\n")
        dry = CliRunner().invoke(main, ["rescore", str(source), "-c", str(config),
                                        "--dry-run", "--force"])
        assert dry.exit_code == 0, dry.output
        assert "nothing was scored, written or sent" in dry.output
    time.sleep(3)  # Phoenix inserts annotations asynchronously: give a wrong one time to land
    after = (_annotations(phoenix, "span", "span_ids", span_ids),
             _annotations(phoenix, "trace", "trace_ids", run_traces),
             _annotations(phoenix, "session", "session_ids", {"alpha", "beta"}))
    assert after == snapshot
