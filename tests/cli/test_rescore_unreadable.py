"""`tracescore rescore` reads agent-like spans as `serve` does: the generated agent spans of every
convention (some without input, output or both) are counted in the summary, each unreadable kind
is logged once, and an agent span without content whose LLM calls are not in the input leaves
with reason `no_llm_calls` (as after `serve`'s `trace.llm_wait_s`), never `shutdown`."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from click.testing import CliRunner
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from test_unscored_reasons import CASES, SECRET, USER_MAPPING, _send

from tracescore import _semconv as sc
from tracescore._exporters import OTLPJsonFileExporter
from tracescore.cli import main
from tracescore.online.intake import _diagnose
from tracescore.testing import spans_from_otlp_json


def test_rescore_counts_logs_and_marks_unreadable_agent_spans_as_serve_does(
        tmp_path: Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_diagnose, "_warned", set())  # a fresh process's log-once state
    stored = tmp_path / "traces.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPJsonFileExporter(stored)))
    _send(provider, CASES.spans)
    provider.shutdown()
    config = tmp_path / "gateway.yaml"
    config.write_text("scoring:\n  scorers: [{scorer: similarity}]\n"
                      f"recognise:\n  mappings: [{json.dumps(USER_MAPPING)}]\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    with caplog.at_level(logging.WARNING, logger="tracescore"):
        result = CliRunner().invoke(main, ["rescore", str(stored), "-c", str(config),
                                           "-o", str(out)])
    assert result.exit_code == 0, result.output
    unreadable = sum(CASES.unreadable.values())
    assert (f"{CASES.readable + unreadable} agent spans ({unreadable} unreadable: see the "
            f"warning), {CASES.readable} offered, {CASES.readable} scores") in result.output
    warnings = [r.getMessage() for r in caplog.records
                if r.getMessage().startswith("tracescore: agent span not scored")]
    assert len(warnings) == len(CASES.unreadable)  # once per (framework, reason)
    assert not [r for r in caplog.records if SECRET in r.getMessage()]
    spans = [s for line in out.read_text().splitlines() for s in spans_from_otlp_json(line)]
    reasons = [event.attributes[sc.TS_UNSCORED_REASON] for span in spans
               for event in span.events_named(sc.TS_UNSCORED)]
    assert reasons and set(reasons) == {"no_llm_calls"}
    assert f"{len(reasons)} not scored ({len(reasons)} no_llm_calls)" in result.output
    scored = [s for s in spans if s.events_named(sc.GEN_AI_EVALUATION_RESULT)]
    assert len(scored) == CASES.readable
