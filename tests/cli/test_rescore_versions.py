"""`tracescore rescore` and scorer versions: a span that carries a result of the same scorer
version is skipped (unless --force), a new version's result is added beside the old one, and the
summary line counts what was skipped and re-scored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _gateway_helpers import agent_trace, sender
from click.testing import CliRunner

from tracescore import _semconv as sc
from tracescore._exporters import OTLPJsonFileExporter
from tracescore.cli import main
from tracescore.scoring import create_completeness_scorer, create_content_similarity_scorer
from tracescore.testing import ReceivedSpan, spans_from_otlp_json

EVAL = sc.GEN_AI_EVALUATION_RESULT
SIMILARITY = create_content_similarity_scorer().version


@pytest.fixture
def scored(tmp_path: Path) -> Path:
    """4 stored agent spans, each scored once by content similarity (rescore's output)."""
    traces = tmp_path / "traces.jsonl"
    with sender(OTLPJsonFileExporter(traces)) as tracer:
        for _ in range(4):
            agent_trace(tracer, plain_children=1)
    out = tmp_path / "scored.jsonl"
    assert "4 scores" in _run(str(traces), "-s", "similarity", "-o", str(out))
    return out


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, ["rescore", *args])
    assert result.exit_code == 0, result.output
    return result.output


def _spans(path: Path) -> list[ReceivedSpan]:
    return [span for line in path.read_text().splitlines() if line.strip()
            for span in spans_from_otlp_json(line)]


def _results(span: ReceivedSpan) -> list[tuple[str, str]]:
    return [(e.attributes[sc.TS_SCORER_ID], e.attributes[sc.TS_SCORER_VERSION])
            for e in span.events_named(EVAL)]


def test_results_name_the_version_of_the_scorer_that_made_them(scored: Path) -> None:
    assert all(_results(s) == [("content-similarity", SIMILARITY)] for s in _spans(scored))


def test_spans_scored_by_the_same_version_are_skipped(scored: Path, tmp_path: Path) -> None:
    out = tmp_path / "again.jsonl"
    line = _run(str(scored), "-s", "similarity", "-o", str(out))
    assert "0 scores" in line and "4 skipped (already scored by the same scorer version)" in line
    assert "0 re-scored" in line
    before = {s.span_id: s.events for s in _spans(scored)}
    assert {s.span_id: s.events for s in _spans(out)} == before  # written as they were


def test_force_scores_them_again_beside_the_old_results(scored: Path, tmp_path: Path) -> None:
    out = tmp_path / "forced.jsonl"
    line = _run(str(scored), "-s", "similarity", "-o", str(out), "--force")
    assert "4 scores" in line and "0 skipped" in line and "4 re-scored" in line
    for span in _spans(out):
        assert _results(span) == [("content-similarity", SIMILARITY)] * 2


def test_a_new_version_is_added_beside_the_old_one(scored: Path, tmp_path: Path) -> None:
    config = tmp_path / "new.yaml"
    config.write_text("scoring:\n  scorers:\n"
                      "    - {scorer: similarity, options: {algorithm: levenshtein}}\n")
    newer = create_content_similarity_scorer(algorithm="levenshtein").version
    out = tmp_path / "new.jsonl"
    line = _run(str(scored), "-c", str(config), "-o", str(out))
    assert "4 scores" in line and "0 skipped" in line and "4 re-scored" in line
    old = {s.span_id: s.events for s in _spans(scored)}
    for span in _spans(out):
        assert span.events[:len(old[span.span_id])] == old[span.span_id]  # kept, in place
        assert _results(span) == [("content-similarity", SIMILARITY),
                                  ("content-similarity", newer)]


def test_only_the_scorers_that_have_not_scored_a_span_run(scored: Path, tmp_path: Path) -> None:
    out = tmp_path / "two.jsonl"
    line = _run(str(scored), "-s", "similarity", "-s", "completeness", "-o", str(out))
    assert "4 scores" in line and "4 skipped" in line and "0 re-scored" in line
    for span in _spans(out):
        assert _results(span) == [("content-similarity", SIMILARITY),
                                  ("completeness", create_completeness_scorer().version)]


def test_failed_results_and_results_without_a_version_are_scored_again(
        scored: Path, tmp_path: Path) -> None:
    lines = []
    for index, line in enumerate(scored.read_text().splitlines()):
        request = json.loads(line)
        for rs in request["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    for event in span.get("events", []):
                        attributes = event["attributes"]
                        if index % 2:  # written before results named their version
                            event["attributes"] = [a for a in attributes
                                                   if a["key"] != sc.TS_SCORER_VERSION]
                        else:  # a failed run: no score, an error type
                            event["attributes"] = [a for a in attributes if a["key"]
                                                   != sc.GEN_AI_EVALUATION_SCORE_VALUE]
                            event["attributes"].append(
                                {"key": sc.ERROR_TYPE, "value": {"stringValue": "Timeout"}})
        lines.append(json.dumps(request))
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(lines) + "\n")
    line = _run(str(edited), "-s", "similarity", "-o", str(tmp_path / "out.jsonl"))
    assert "4 scores" in line and "0 skipped" in line
    assert "2 re-scored" in line  # the unversioned results; a failure is no result to re-score
