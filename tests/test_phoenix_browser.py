"""What a person sees in Phoenix: scored agent traffic goes to a real Phoenix, its project page is
rendered by headless Chromium (Debian's `chromium`, `make chromium`), and the rendered rows must
show each agent call's input, output and its `answer-relevancy` annotation with the score.

The screenshot is saved in the test's temporary directory; with TRACESCORE_UPDATE_SCREENSHOT=1 it
replaces docs/images/phoenix-annotations.png, the picture the docs show (so `make test` leaves the
checkout clean).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _helpers import GEO_ANSWER, geo_agent, geo_llm_and_judge, shut_down_pipelines

import tracescore
from tracescore.online import OnlineScorer
from tracescore.online._phoenix_sink import PhoenixSink
from tracescore.testing import StubLLMServer
from tracescore.testing._browser import Chromium
from tracescore.testing._phoenix import PhoenixServer

DOCS_SCREENSHOT = Path(__file__).resolve().parent.parent / "docs" / "images" / "phoenix-annotations.png"
ON_TOPIC = "What is the capital of France?"
OFF_TOPIC = "Will it rain in Lyon tomorrow?"  # the stub judge finds the answer off topic
ROWS_JS = """[...document.querySelectorAll('tbody tr')].map(row => row.innerText)
  .filter(text => text.includes('invoke_agent geo'))"""


@pytest.fixture
def phoenix(span_exporter) -> Iterator[PhoenixServer]:
    with PhoenixServer(startup_timeout=300) as server:
        yield server
    shut_down_pipelines()


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the first run installs Phoenix into the cache
def test_phoenix_shows_input_output_and_score_of_each_agent_call(
        phoenix: PhoenixServer, stub_llm: StubLLMServer, span_exporter, tmp_path: Path) -> None:
    stub_llm.responder = geo_llm_and_judge
    geo = geo_agent(stub_llm)
    relevancy = tracescore.create_answer_relevancy_scorer(
        model="openai/judge", api_base=stub_llm.base_url, api_key="sk-test")
    handle = tracescore.configure(
        exporter="otlp-http", endpoint=phoenix.base_url, openinference=True,
        scorers=[OnlineScorer(relevancy, sinks=("span", "phoenix"))],
        online={"sinks": {"phoenix": PhoenixSink(phoenix.base_url)}},
    )
    for question in (ON_TOPIC, OFF_TOPIC):
        with tracescore.ground_truth(GEO_ANSWER):
            assert geo(question) == GEO_ANSWER
    assert handle.flush(60)
    span_ids = [f"{s.context.span_id:016x}" for s in span_exporter.get_finished_spans()
                if s.name == "invoke_agent geo"]
    phoenix.wait_for_span_annotations(span_ids, expected=2)  # stored: the page can show them
    (project,) = [p for p in phoenix.get_json("/v1/projects")["data"] if p["name"] == "default"]

    with Chromium(width=2560, height=900) as browser:  # wide: every column in the picture
        browser.navigate(f"{phoenix.base_url}/projects/{project['id']}")
        rows = browser.wait_for(f"(rows => rows.length === 2 && rows.every(r => r.includes('μ')) "
                                f"&& rows)({ROWS_JS})", timeout=90)
        rows = [" ".join(row.replace("\xa0", " ").split()) for row in rows]
        by_question = {q: row for row in rows for q in (ON_TOPIC, OFF_TOPIC) if q in row}
        assert set(by_question) == {ON_TOPIC, OFF_TOPIC}, rows
        for question, mean in ((ON_TOPIC, "μ 1.00"), (OFF_TOPIC, "μ 0.00")):
            row = by_question[question]
            assert "agent" in row and GEO_ANSWER in row  # kind, input and output columns
            assert "answer-relevancy" in row and mean in row, row  # the annotation and its score
        browser.wait_for("document.body.innerText.includes('Total Traces')")  # stats panel drawn
        screenshot = (DOCS_SCREENSHOT if os.environ.get("TRACESCORE_UPDATE_SCREENSHOT") == "1"
                      else tmp_path / "phoenix-annotations.png")
        browser.screenshot(screenshot)
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
