"""What a person sees after `make demo-phoenix`: the demo's traffic goes to a real Phoenix, its
project page is rendered by headless Chromium (Debian's `chromium`, `make chromium`), and every
agent call's row must show its input, its output and its answer-relevancy score at a glance (the
annotation itself in the column, not a `+N` badge to click).

The screenshot is saved in the test's temporary directory; with TRACESCORE_UPDATE_SCREENSHOT=1 it
replaces docs/images/phoenix-annotations.png, the picture the README shows (so `make test` leaves
the checkout clean).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from rigs import phoenix as _phoenix
from rigs.browser import Chromium
from rigs.phoenix import PhoenixServer

from tracescore import _semconv as sc
from tracescore.cli import _demo_agent as demo
from tracescore.cli._demo import PHOENIX_ANNOTATION
from tracescore.cli._otlp import read_spans

DOCS_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "images" / "phoenix-annotations.png"
ROWS_JS = """[...document.querySelectorAll('tbody tr')].map(row => row.innerText)
  .filter(text => text.includes('invoke_agent trivia-agent'))"""
# every row's score is on screen: inside the window and not covered (by the stats panel, say)
SCORES_VISIBLE_JS = """[...document.querySelectorAll('tbody tr')]
  .filter(row => row.innerText.includes('invoke_agent trivia-agent'))
  .every(row => [...row.querySelectorAll('*')]
    .filter(el => el.children.length === 0 && el.textContent.includes('μ'))
    .some(el => {
      const box = el.getBoundingClientRect();
      const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
      return box.right <= window.innerWidth && hit !== null && (el.contains(hit) || hit.contains(el));
    }))"""


def _demo_scores(spans_file: Path) -> dict[str, tuple[str, float, str]]:
    """span id -> (question, answer-relevancy score, answer) of each agent call the demo exported."""
    questions = [item["input"] for item in demo.QUESTIONS]
    found = {}
    for span in read_spans(spans_file):
        if span.name != "invoke_agent trivia-agent":
            continue
        (question,) = [q for q in questions if q in span.attributes[sc.GEN_AI_INPUT_MESSAGES]]
        (score,) = [event[sc.GEN_AI_EVALUATION_SCORE_VALUE] for name, event in span.events
                    if name == sc.GEN_AI_EVALUATION_RESULT
                    and event[sc.TS_SCORER_ID] == PHOENIX_ANNOTATION]
        answer = json.loads(span.attributes[sc.GEN_AI_OUTPUT_MESSAGES])[0]["parts"][0]["content"]
        found[span.span_id] = (question, score, answer)
    return found


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the first run installs Phoenix into the cache
def test_demo_phoenix_shows_input_output_and_score_of_each_agent_call(
        phoenix: PhoenixServer, tmp_path: Path) -> None:
    spans_file = tmp_path / "demo-spans.jsonl"
    assert _phoenix.run_demo(phoenix.base_url, spans_file) == 0  # what `make demo-phoenix` runs
    calls = _demo_scores(spans_file)
    assert len(calls) == len(demo.QUESTIONS)
    assert {score for _, score, _ in calls.values()} > {0.0, 1.0}  # good and poor answers
    phoenix.wait_for_span_annotations(list(calls), expected=len(calls),
                                      project=_phoenix.DEMO_PROJECT)
    (project,) = [p for p in phoenix.get_json("/v1/projects")["data"]
                  if p["name"] == _phoenix.DEMO_PROJECT]

    with Chromium(width=2560, height=820) as browser:  # wide: every column in the picture
        browser.navigate(f"{phoenix.base_url}/projects/{project['id']}")
        rows = browser.wait_for(f"(rows => rows.length === {len(calls)} "
                                f"&& rows.every(r => r.includes('μ')) && rows)({ROWS_JS})",
                                timeout=90)
        rows = [" ".join(row.replace("\xa0", " ").split()) for row in rows]
        for question, score, answer in calls.values():
            (row,) = [row for row in rows if question in row]
            assert "agent" in row and answer in row, row  # kind, input and output columns
            assert f"{PHOENIX_ANNOTATION} μ {score:.2f}" in row, row  # the score, at a glance
            assert not re.search(r"(^| )\+\d+( |$)", row), row  # no badge hiding annotations
        browser.wait_for("document.body.innerText.includes('Total Traces')")  # stats panel drawn
        assert browser.evaluate(SCORES_VISIBLE_JS), "a row's score is off screen or covered"
        screenshot = (DOCS_SCREENSHOT if os.environ.get("TRACESCORE_UPDATE_SCREENSHOT") == "1"
                      else tmp_path / "phoenix-annotations.png")
        browser.screenshot(screenshot)
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    _assert_the_report_reads_phoenix_as_the_file(phoenix, spans_file, tmp_path)


def _assert_the_report_reads_phoenix_as_the_file(phoenix: PhoenixServer, spans_file: Path,
                                                 tmp_path: Path) -> None:
    """`tracescore report --phoenix` shows the same figures as the report of the demo's file,
    and the people's annotations in Phoenix correct the pass rate as the same labels in a file
    do (here: the Phoenix is up and has the demo's spans already)."""
    agents = {s.span_id: s for s in read_spans(spans_file) if s.name == "invoke_agent trivia-agent"}
    labels = {span_id: _reviewer_label(json.loads(span.attributes[sc.GEN_AI_OUTPUT_MESSAGES]))
              for span_id, span in agents.items()}
    request = urllib.request.Request(
        f"{phoenix.base_url}/v1/span_annotations?sync=true", method="POST",
        data=json.dumps({"data": [
            {"span_id": span_id, "name": "correctness", "annotator_kind": "HUMAN",
             "result": {"label": label}} for span_id, label in labels.items()]}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
    labels_file = tmp_path / "labels.jsonl"
    labels_file.write_text("".join(
        json.dumps({"trace_id": agents[span_id].trace_id, "span_id": span_id, "label": label})
        + "\n" for span_id, label in labels.items()))
    tracescore = Path(sys.executable).parent / "tracescore"
    pages = {"phoenix": tmp_path / "phoenix.html", "file": tmp_path / "file.html"}
    for source, args in (
            ("phoenix", ["--phoenix", phoenix.base_url, "--project", _phoenix.DEMO_PROJECT,
                         "--labels", "answer-relevancy=phoenix:correctness"]),
            ("file", [str(spans_file), "--labels", f"answer-relevancy={labels_file}"])):
        done = subprocess.run([str(tracescore), "report", *args, "-o", str(pages[source])],
                              check=False, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and not done.stderr, done.stderr
    with Chromium() as browser:
        rows = {}
        for source, page in pages.items():
            browser.navigate(page.as_uri())
            rows[source] = browser.evaluate(
                "[...document.querySelectorAll('table.overview tr, table.corrected-table tr')]"
                ".map(r => [...r.cells].map(c => c.innerText))")
    assert rows["phoenix"] == rows["file"]
    assert len(rows["file"]) == 5  # the demo's two scorers, one corrected pass rate
    assert rows["file"][-1][-2:] == [str(len(agents))] * 2  # every call judged and labelled


def _reviewer_label(messages: list[dict[str, Any]]) -> str:
    """A reviewer's category for the demo's answer (the demo agent's notes say what is right)."""
    answer = messages[0]["parts"][0]["content"]
    if answer.startswith(("Paris", "William Shakespeare", "Water boils")):
        return "relevant"
    return "partial" if answer.startswith("Mars") else "irrelevant"
