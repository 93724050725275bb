"""`tracescore report` on traffic the product recorded itself: the demo's online scores (three
runs), a rescore of them with another scorer, and an eval run under a second agent name, with a
labelling file `tracescore sample` drew and a person filled in. The page is opened in headless
Chromium (`make chromium`) and checked for what a person sees: every agent and scorer, the
interval bands, the worst calls with their trace ids, the corrected pass rate beside the
judge-only one; no console error and no request beyond the page itself.

The screenshot is saved in the test's temporary directory; with TRACESCORE_UPDATE_SCREENSHOT=1 it
replaces docs/images/quality-report.png, the picture docs/watching-quality-report.md shows.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from _helpers import shut_down_pipelines
from _reach import judge
from hypothesis import given, settings
from hypothesis import strategies as st
from rigs.browser import Chromium

import tracescore
from tracescore import _semconv as sc
from tracescore.calibration import corrected_pass_rate
from tracescore.cli import _demo_agent as demo
from tracescore.cli._otlp import read_spans
from tracescore.cli._report_data import wilson
from tracescore.online import OnlineScorer
from tracescore.testing import StubLLMServer
from tracescore.testing._stub_llm import Reply

DOCS_SCREENSHOT = (Path(__file__).resolve().parents[2] / "docs" / "images"
                   / "quality-report.png")
_CLI = str(Path(sys.executable).parent / "tracescore")
# what a person labels: the answers a careful reader passes (ground truth in the demo agent)
_GOOD = ("Paris is the capital", "William Shakespeare wrote", "Water boils at 100")


def _run(*args: str, cwd: Path) -> str:
    done = subprocess.run([_CLI, *args], cwd=cwd, check=False, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(archive, labels): OTLP JSON lines the product wrote, and a labelled sample of them."""
    work = tmp_path_factory.mktemp("report")
    parts = []
    for run in range(3):
        _run("demo", "--spans-file", f"demo{run}.jsonl", cwd=work)
        parts.append(work / f"demo{run}.jsonl")
        time.sleep(1.0)  # the runs fall in different time buckets
    _run("rescore", "demo0.jsonl", "-s", "keyword-coverage", "-o", "rescored.jsonl", cwd=work)
    (work / "questions.jsonl").write_text(
        '{"input": "What is the capital of France?", "ground_truth": "Paris"}\n'
        '{"input": "What is the tallest mountain on Earth?", "ground_truth": "Mount Everest"}\n')
    _run("eval", "questions.jsonl", "--target", "tracescore.cli._demo_agent:answer",
         "--name", "support-bot", "--spans-file", "eval.jsonl", "--no-items", cwd=work)
    archive = work / "archive.jsonl"
    archive.write_text("".join(p.read_text() for p in
                               [*parts[1:], work / "rescored.jsonl", work / "eval.jsonl"]))
    # people label a sample of the offline judge's verdicts (one scorer version)
    _run("sample", "archive.jsonl", "-s", "answer-relevancy", "--n", "12", "-o", "labels.csv",
         cwd=work)
    _live_traffic(work / "live.jsonl")
    archive.write_text(archive.read_text() + (work / "live.jsonl").read_text())
    rows = list(csv.DictReader((work / "labels.csv").open()))
    for row in rows:
        row["label"] = "pass" if row["output"].startswith(_GOOD) else "fail"
    with (work / "labels.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return archive, work / "labels.csv"


def _live_traffic(path: Path) -> None:
    """Online scoring with a real judge (litellm to the stub) whose calls are traced: one
    question it answers too slowly (the span leaves unscored, reason timeout), one it refuses
    (a failed run), the others scored."""
    def judge_slowly(request: dict[str, Any]) -> Reply:
        reply = judge(request)
        slow = "mountain" in request["messages"][-1]["content"]
        return Reply(content=reply.content, delay=3.0 if slow else 0.0)

    @tracescore.agent(name="checkout-bot")
    def checkout(question: str) -> str:
        return demo.REPLIES[next(k for k in demo.NOTES if k in question.lower())]

    with StubLLMServer() as stub:
        stub.responder = judge_slowly
        scorer = tracescore.create_answer_relevancy_scorer(
            model="openai/judge-stub", api_base=stub.base_url, api_key="sk-test", timeout=10,
            max_retries=0)
        handle = tracescore.configure(
            exporter="file", file_path=str(path), service_name="checkout",
            scorers=[OnlineScorer(scorer, trace_judge=True)],
            online={"max_wait_s": 1.5, "isolation": "thread"})
        try:
            for item in demo.QUESTIONS:
                if "Hamlet" in item["input"]:
                    stub.enqueue_error(400, "the judge refuses")
                checkout(item["input"])
                handle.flush(10)
        finally:
            shut_down_pipelines()


def _results(archive: Path) -> list[tuple[str, str, str, float]]:
    """(agent, scorer, trace id, score) of every result in the archive, read independently."""
    spans = read_spans(archive)
    out = []
    for span in spans:
        for name, attributes in span.events:
            if name == sc.GEN_AI_EVALUATION_RESULT and sc.ERROR_TYPE not in attributes:
                out.append((span.attributes[sc.GEN_AI_AGENT_NAME], attributes[sc.TS_SCORER_ID],
                            span.trace_id, float(attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE])))
    return out


@pytest.mark.slow
def test_the_report_shows_agents_scorers_bands_worst_calls_and_corrected_rates(
        traffic: tuple[Path, Path], tmp_path: Path) -> None:
    archive, labels = traffic
    page = tmp_path / "report.html"
    said = _run("report", archive.name, "-o", str(page), "--labels",
                f"answer-relevancy={labels.name}", cwd=archive.parent)
    assert f"report written to {page}" in said
    assert page.stat().st_mode & 0o077 == 0  # span content: the owner's alone
    results = _results(archive)
    groups = {(agent, scorer) for agent, scorer, _, _ in results}
    assert {agent for agent, _ in groups} == {"trivia-agent", "support-bot", "checkout-bot"}
    assert {"answer-relevancy", "content-similarity", "keyword-coverage"} <= {
        scorer for _, scorer in groups}

    with Chromium(width=1280, height=1700) as browser:
        browser.call("Network.enable")
        browser.navigate(page.as_uri())
        browser.wait_for("document.querySelectorAll('section.group').length > 0")
        text = browser.text()
        sections = browser.evaluate(
            "[...document.querySelectorAll('section.group')].map(s => [s.dataset.agent, "
            "s.dataset.scorer, s.querySelectorAll('.band').length, "
            "s.querySelectorAll('.histogram rect.bar').length, "
            "[...s.querySelectorAll('table.worst code.trace-id')].map(c => c.innerText)])")
        browser.screenshot(tmp_path / "report.png")
        if os.environ.get("TRACESCORE_UPDATE_SCREENSHOT") == "1":
            browser.screenshot(DOCS_SCREENSHOT)
        # the agent filter hides the other agent's sections
        browser.evaluate("(() => { const s = document.getElementById('agent'); "
                         "s.value = 'support-bot'; s.dispatchEvent(new Event('change')); })()")
        shown = browser.evaluate("[...document.querySelectorAll('section.group')]"
                                 ".filter(s => !s.hidden).map(s => s.dataset.agent)")
        events = list(browser.events)
        checkout = browser.evaluate(
            "(() => { const s = document.querySelector('section[data-agent=\"checkout-bot\"]');"
            " return [[...s.querySelectorAll('table.unscored tr')].map(r => [...r.cells].map("
            "c => c.innerText)),"
            " [...s.querySelectorAll('table.worst tr td:last-child')].map(c => c.innerText)];"
            " })()")

    assert {(agent, scorer) for agent, scorer, *_ in sections} == groups
    for agent, scorer, bands, bars, worst in sections:
        assert bands == 1, (agent, scorer)  # every group has its interval band
        assert bars == 10
        mine = sorted((score, trace) for a, s, trace, score in results if (a, s) == (agent, scorer))
        lowest = mine[0][0]
        assert {trace for score, trace in mine if score == lowest} & set(worst), (agent, scorer)
    assert shown and set(shown) == {"support-bot"}
    # live traffic: the call the judge was too slow for, the one it refused, and the judge
    # traces of the scored ones (chat spans in the archive, linked to the agent spans)
    unscored, judge_traces = checkout
    assert ["timeout", "1"] in unscored, unscored
    assert any(reason.startswith("failed: ") for reason, _ in unscored[1:]), unscored
    chats = {s.trace_id for s in read_spans(archive) if s.attributes.get(sc.TS_JUDGE)}
    assert judge_traces and set(judge_traces) <= chats
    # the overview's pass rate of the demo's relevancy, with its Wilson interval, as computed
    # from the archive independently (a result passes at 0.5)
    relevancy = [score for a, s, _, score in results
                 if (a, s) == ("trivia-agent", "answer-relevancy")]
    passed = sum(score >= 0.5 for score in relevancy)
    low, high = wilson(passed, len(relevancy), 0.95)
    assert f"{passed / len(relevancy):.2f} ({low:.2f} to {high:.2f})" in text
    # the corrected pass rate beside the judge-only one
    assert "Pass rates corrected by people's labels" in text
    labelled = list(csv.DictReader(labels.open()))
    every = _relevancy_by_span(archive)  # of every agent: the labels were drawn from all
    by_span = {(trace, span): (score, version) for trace, span, score, version in every}
    judge = [by_span[(row["trace_id"], row["span_id"])][0] >= 0.5 for row in labelled]
    (version,) = {by_span[(row["trace_id"], row["span_id"])][1] for row in labelled}
    human = [row["label"] == "pass" for row in labelled]
    expected = corrected_pass_rate([s >= 0.5 for *_, s, v in every if v == version], judge, human)
    c = expected.corrected
    assert f"{c.rate:.2f} ({c.low:.2f} to {c.high:.2f})" in text
    console = [e for e in events if e["method"] in ("Runtime.exceptionThrown", "Log.entryAdded")
               or (e["method"] == "Runtime.consoleAPICalled"
                   and e["params"].get("type") in ("error", "warning", "assert"))]
    assert console == []
    requests = [e["params"]["request"]["url"] for e in events
                if e["method"] == "Network.requestWillBeSent"]
    assert requests == [page.as_uri()]


def _relevancy_by_span(archive: Path) -> list[tuple[str, str, float, str]]:
    """(trace id, span id, score, scorer version) of every answer relevancy score."""
    return [(span.trace_id, span.span_id, float(attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE]),
             attributes[sc.TS_SCORER_VERSION])
            for span in read_spans(archive) for name, attributes in span.events
            if name == sc.GEN_AI_EVALUATION_RESULT and sc.ERROR_TYPE not in attributes
            and attributes[sc.TS_SCORER_ID] == "answer-relevancy"]


def test_since_and_until_keep_the_calls_that_ended_between(traffic: tuple[Path, Path],
                                                          tmp_path: Path) -> None:
    archive, _ = traffic
    ends = {s.span_id: s.end_ns for s in read_spans(archive)}
    times = sorted(ends[span] for span, in _result_spans(archive))
    cut = times[len(times) // 2] // 10**9 * 10**9  # a whole second, as the option takes it
    since = datetime.fromtimestamp(cut / 1e9, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    for option, expected in (("--since", sum(t >= cut for t in times)),
                             ("--until", sum(t < cut for t in times))):
        said = _run("report", str(archive), option, since, "-o", str(tmp_path / "r.html"),
                    cwd=tmp_path)
        assert said.startswith(f"{expected} results of "), said
    assert 0 < sum(t >= cut for t in times) < len(times)


def _result_spans(archive: Path) -> list[tuple[str]]:
    """The span id of every result (failed runs too) in the archive."""
    return [(span.span_id,) for span in read_spans(archive) for name, _ in span.events
            if name == sc.GEN_AI_EVALUATION_RESULT]


def test_bad_input_is_a_clear_usage_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    done = subprocess.run([_CLI, "report", str(empty), "-o", str(tmp_path / "r.html")],
                          check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "no spans" in done.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"resourceSpans": [}\n')
    done = subprocess.run([_CLI, "report", str(bad)], check=False, capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert done.returncode == 2 and "bad.jsonl" in done.stderr
    assert not (tmp_path / "tracescore-report.html").exists()


def test_a_labels_option_without_a_scorer_names_its_form(tmp_path: Path) -> None:
    spans = tmp_path / "s.jsonl"
    spans.write_text(json.dumps({"resourceSpans": []}) + "\n")
    done = subprocess.run([_CLI, "report", str(spans), "--labels", "labels.csv"],
                          check=False, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2 and "SCORER=FILE" in done.stderr
    (tmp_path / "labels.jsonl").write_text('{"trace_id": "ab"\n')
    for spec, said in (("relevancy=missing.csv", "missing.csv: No such file"),
                       ("relevancy=labels.jsonl", "labels.jsonl, line 1: invalid JSON"),
                       ("relevancy=phoenix:correctness", "need --phoenix")):
        done = subprocess.run([_CLI, "report", str(spans), "--labels", spec], check=False,
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert done.returncode == 2 and said in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 2000), data=st.data(), confidence=st.sampled_from((0.8, 0.9, 0.95, 0.99)))
def test_the_wilson_interval_agrees_with_scipy(n: int, data: st.DataObject,
                                               confidence: float) -> None:
    from scipy.stats import binomtest

    passed = data.draw(st.integers(0, n))
    expected = binomtest(passed, n).proportion_ci(confidence, method="wilson")
    low, high = wilson(passed, n, confidence)
    assert low == pytest.approx(expected.low, abs=1e-9)
    assert high == pytest.approx(expected.high, abs=1e-9)



@pytest.mark.slow
def test_rectifiers_written_from_the_labels_match_an_independent_computation(
        traffic: tuple[Path, Path], tmp_path: Path) -> None:
    """`--rectifiers`: one rectifier per labelled scorer name and version, the mean and variance
    of (human - judge) with the judge's verdict as the quality metrics count it (its label's
    band), read back as the gateway reads it."""
    from tracescore.calibration import read_rectifiers

    archive, people = traffic
    rows = list(csv.DictReader(people.open()))
    for row in [r for r in rows if r["label"] == "pass"][:2]:
        row["label"] = "fail"  # a stricter person: the judge passes calls people fail
    labels = tmp_path / "labels.csv"
    with labels.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    out = tmp_path / "rectifiers.json"
    said = _run("report", str(archive), "-o", str(tmp_path / "r.html"), "--labels",
                f"answer-relevancy={labels}", "--rectifiers", str(out), cwd=tmp_path)
    assert f"1 rectifiers written to {out}" in said
    labelled = list(csv.DictReader(labels.open()))
    by_span = {(span.trace_id, span.span_id): attributes for span in read_spans(archive)
               for name, attributes in span.events if name == sc.GEN_AI_EVALUATION_RESULT
               and attributes.get(sc.TS_SCORER_ID) == "answer-relevancy"
               and sc.ERROR_TYPE not in attributes}
    results = [by_span[(row["trace_id"], row["span_id"])] for row in labelled]
    differences = [(row["label"] == "pass") - (r[sc.GEN_AI_EVALUATION_SCORE_LABEL] == "relevant")
                   for row, r in zip(labelled, results)]
    mean = sum(differences) / len(differences)
    variance = sum((d - mean) ** 2 for d in differences) / (len(differences) - 1)
    (got,) = read_rectifiers(out)
    assert (got.name, got.version, got.n) == (
        results[0][sc.GEN_AI_EVALUATION_NAME], results[0][sc.TS_SCORER_VERSION], len(labelled))
    assert got.mean == pytest.approx(mean) and got.variance == pytest.approx(variance)
    assert mean < 0  # the judge passes calls people fail: the correction lowers its rate


def test_rectifiers_need_labels(tmp_path: Path) -> None:
    spans = tmp_path / "s.jsonl"
    spans.write_text(json.dumps({"resourceSpans": []}) + "\n")
    done = subprocess.run([_CLI, "report", str(spans), "--rectifiers", "r.json"],
                          check=False, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2 and "--rectifiers needs --labels" in done.stderr
    assert not (tmp_path / "r.json").exists()
