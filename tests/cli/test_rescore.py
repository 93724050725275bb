"""`tracescore rescore`: stored OTLP JSON traces (written by tracescore's file exporter) scored
again with the gateway's engine, to a file or an OTLP endpoint; filters by agent, time and rate."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from _gateway_helpers import agent_trace, sender
from click.testing import CliRunner

from tracescore._exporters import OTLPJsonFileExporter
from tracescore.cli import main
from tracescore.testing import OTLPReceiver, ReceivedSpan, spans_from_otlp_json

EVAL = "gen_ai.evaluation.result"


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    """6 traces (an agent span and 2 child spans each) in tracescore's OTLP JSON-lines format;
    the first 3 agents are "geo", the others "weather"."""
    path = tmp_path / "traces.jsonl"
    with sender(OTLPJsonFileExporter(path)) as tracer:
        for index in range(6):
            agent_trace(tracer, plain_children=2, name="geo" if index < 3 else "weather")
    return path


def _spans(path: Path) -> list[ReceivedSpan]:
    return [span for line in path.read_text().splitlines() if line.strip()
            for span in spans_from_otlp_json(line)]


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, ["rescore", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_agent_spans_get_new_scores_in_the_output_file(traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "rescored.jsonl"
    summary = _run(str(traces), "-s", "similarity", "-o", str(out))
    spans = _spans(out)
    assert len(spans) == 6 and all(s.name == "invoke_agent geo" for s in spans)
    for span in spans:
        (result,) = span.events_named(EVAL)
        assert result.attributes["tracescore.scorer.id"] == "content-similarity"
    assert "read 18 spans" in summary and "6 scores" in summary


def test_all_spans_keeps_every_span_unchanged_but_for_the_scores(traces: Path,
                                                                 tmp_path: Path) -> None:
    out = tmp_path / "rescored.jsonl"
    _run(str(traces), "-s", "similarity", "-o", str(out), "--all-spans")
    before = {(s.trace_id, s.span_id): s for s in _spans(traces)}
    after = {(s.trace_id, s.span_id): s for s in _spans(out)}
    assert after.keys() == before.keys()
    for key, span in after.items():
        old = before[key]
        assert (span.name, span.attributes, span.resource) == (old.name, old.attributes,
                                                               old.resource)
        added = span.events[len(old.events):]
        assert span.events[:len(old.events)] == old.events
        assert bool(added) == (span.name == "invoke_agent geo")


@pytest.mark.parametrize(("options", "scored"), [
    (["--agent", "weather"], 3),
    (["--agent", "geo", "--agent", "weather"], 6),
    (["--rate", "0"], 0),
    (["--until", "2000-01-01"], 0),
    (["--since", "2000-01-01"], 6),
])
def test_filters(options: list[str], scored: int, traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "rescored.jsonl"
    _run(str(traces), "-s", "similarity", "-o", str(out), *options)
    spans = _spans(out)
    assert sum(1 for s in spans if s.events_named(EVAL)) == scored


def test_rate_selects_the_same_traces_as_online_sampling(traces: Path, tmp_path: Path) -> None:
    from tracescore.online._sampling import is_sampled

    out = tmp_path / "rescored.jsonl"
    _run(str(traces), "-s", "similarity", "-o", str(out), "--rate", "0.5")
    for span in _spans(out):
        expected = is_sampled(int(span.trace_id, 16), 0.5)
        assert bool(span.events_named(EVAL)) == expected


def test_to_an_otlp_endpoint(traces: Path, otlp_receiver: OTLPReceiver) -> None:
    _run(str(traces), "-s", "similarity", "--endpoint", otlp_receiver.grpc_endpoint)
    spans = otlp_receiver.wait_for_spans(6, timeout=10)
    assert all(s.events_named(EVAL) for s in spans)


def test_a_bad_line_exits_2_naming_file_and_line(traces: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(traces.read_text() + "{not json\n")
    result = CliRunner().invoke(main, ["rescore", str(bad), "-s", "similarity",
                                       "-o", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 2
    assert f"{bad}:{len(traces.read_text().splitlines()) + 1}:" in result.output


def test_scores_are_fresh_runs(traces: Path, tmp_path: Path) -> None:
    out1, out2 = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _run(str(traces), "-s", "similarity", "-o", str(out1))
    time.sleep(0.01)
    _run(str(out1), "-s", "similarity", "-o", str(out2), "--force")  # the same version again
    runs = [e.attributes["tracescore.evaluation.run_id"]
            for s in _spans(out2) for e in s.events_named(EVAL)]
    assert len(runs) == 12 and len(set(runs)) == 12  # the old score stays, a new one is added
    assert json.loads(out2.read_text().splitlines()[0])["resourceSpans"]
