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
from pathlib import Path

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
