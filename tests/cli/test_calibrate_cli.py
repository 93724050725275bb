"""`tracescore calibrate` (its gate's exit codes, JSON and HTML output) and `tracescore sample`
(stratified by score, deterministic with --seed), run as the console script."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tracescore.testing import StubLLMServer

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "tracescore"
EXAMPLE = ROOT / "examples" / "relevancy_labels.csv"
EXIT_UNSCORED, EXIT_BELOW_KAPPA = 3, 4


def version_prefix() -> str:
    from tracescore import __version__

    return f"{__version__}+"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACESCORE_"))}
    full_env.update({"COLUMNS": "200", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_COLOR": "1"})
    full_env.update(env or {})
    return subprocess.run([str(SCRIPT), *args], cwd=ROOT, env=full_env, text=True,
                          capture_output=True, timeout=300, check=False)


def test_the_gate_passes_fails_and_refuses_with_distinct_exit_codes(tmp_path: Path) -> None:
    common = ("calibrate", str(EXAMPLE), "-s", "relevancy", "--cuts", "0.7,0.3",
              "--resamples", "50")
    passed = run(*common, "--min-kappa", "-1", "--report", str(tmp_path / "r.html"),
                 "--json", str(tmp_path / "r.json"))
    assert passed.returncode == 0, passed.stderr
    assert "Cohen's kappa" in passed.stdout and "Confusion matrix" in passed.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["passed"] is True and report["agreement"]["n"] == 26
    assert report["scorer_version"] in passed.stdout and report["scorer_version"].startswith(
        version_prefix())
    assert "<svg" in (tmp_path / "r.html").read_text()
    assert f"PASSED: kappa {report['gate_kappa']:.3f} reaches --min-kappa -1" in passed.stdout

    below = run(*common, "--min-kappa", "0.99", "--json", "-")
    assert below.returncode == EXIT_BELOW_KAPPA, below.stderr
    assert "below --min-kappa 0.99" in below.stderr and "PASSED" not in below.stderr
    data = json.loads(below.stdout)  # `--json -`: plain JSON on stdout
    assert data["passed"] is False and data["gate_kappa"] < 0.99

    weighted = run(*common, "--kappa-weights", "quadratic", "--min-kappa", "0", "--json", "-")
    assert json.loads(weighted.stdout)["gate_kappa"] == data["agreement"]["kappa_quadratic"]

    bad = run("calibrate", str(EXAMPLE), "-s", "relevancy", "--categories", "good,bad")
    assert bad.returncode == 2 and "is not one of good, bad" in bad.stderr
    missing = run("calibrate", str(tmp_path / "none.csv"), "-s", "relevancy")
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_a_judge_that_scores_no_item_exits_3(tmp_path: Path, stub_llm: StubLLMServer) -> None:
    stub_llm.default_reply = "not JSON"  # every judge reply is refused
    dataset = tmp_path / "two.jsonl"
    dataset.write_text("".join(json.dumps({"input": "Capital of France?", "output": answer,
                                           "label": label}) + "\n"
                               for answer, label in (("Paris.", "pass"), ("Lyon.", "fail"))))
    result = run("calibrate", str(dataset), "-s", "relevancy", "--judge-model",
                 "openai/stub-judge",
                 env={"OPENAI_API_BASE": stub_llm.base_url, "OPENAI_API_KEY": "sk-test"})
    assert result.returncode == EXIT_UNSCORED, result.stderr
    assert "no item was scored" in result.stderr and "Traceback" not in result.stderr


# --- tracescore sample ---------------------------------------------------------------------------

def _attrs(values: dict[str, Any]) -> list[dict[str, Any]]:
    def value(v: Any) -> dict[str, Any]:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, float):
            return {"doubleValue": v}
        return {"stringValue": v}
    return [{"key": k, "value": value(v)} for k, v in values.items()]


def _score_event(score: float, scorer: str = "answer-relevancy") -> dict[str, Any]:
    return {"name": "gen_ai.evaluation.result", "timeUnixNano": "2",
            "attributes": _attrs({"gen_ai.evaluation.name": scorer.replace("-", " "),
                                  "tracescore.scorer.id": scorer,
                                  "gen_ai.evaluation.score.value": score})}


def _agent_span(number: int, events: list[dict[str, Any]]) -> dict[str, Any]:
    question = [{"role": "user", "parts": [{"type": "text", "content": f"question {number}"}]}]
    answer = [{"role": "assistant", "parts": [{"type": "text", "content": f"answer {number}"}],
               "finish_reason": "stop"}]
    return {"traceId": f"{number + 1:032x}", "spanId": f"{number + 1:016x}",
            "name": "invoke_agent support", "startTimeUnixNano": "1", "endTimeUnixNano": "2",
            "attributes": _attrs({"gen_ai.operation.name": "invoke_agent",
                                  "gen_ai.agent.name": "support",
                                  "gen_ai.input.messages": json.dumps(question),
                                  "gen_ai.output.messages": json.dumps(answer)}),
            "events": events}


def _traces(path: Path) -> dict[str, float]:
    """A trace file of 100 scored agent calls, most of them scoring 1, and a few that must not be
    drawn; returns the score of each drawable call by span id."""
    scores = [1.0] * 70 + [0.0] * 10 + [round(0.05 + 0.045 * i, 3) for i in range(20)]
    spans = [_agent_span(i, [_score_event(s)]) for i, s in enumerate(scores)]
    carried = _agent_span(100, [])  # scored through a carrier span (its child)
    carrier = {"traceId": carried["traceId"], "spanId": f"{999:016x}",
               "parentSpanId": carried["spanId"], "name": "evaluation answer relevancy",
               "startTimeUnixNano": "1", "endTimeUnixNano": "2",
               "attributes": _attrs({"tracescore.evaluation.carrier": True}),
               "events": [_score_event(0.5)]}
    other_scorer = _agent_span(101, [_score_event(0.5, "content-similarity")])
    not_agent = {**_agent_span(102, [_score_event(0.5)]), "attributes": []}
    lines = [spans[:50], spans[50:], [carried, carrier, other_scorer, not_agent]]
    path.write_text("".join(json.dumps({"resourceSpans": [{"resource": {"attributes": []},
                                                           "scopeSpans": [{"spans": group}]}]})
                            + "\n" for group in lines))
    found = {s["spanId"]: score for s, score in zip(spans, scores)}
    found[carried["spanId"]] = 0.5
    return found


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_sample_is_stratified_by_score_and_deterministic(tmp_path: Path) -> None:
    scores = _traces(tmp_path / "traces.jsonl")
    args = ("sample", str(tmp_path / "traces.jsonl"), "-s", "relevancy", "--n", "20")
    first = run(*args, "--out", str(tmp_path / "a.csv"), "--seed", "1")
    assert first.returncode == 0, first.stderr
    assert "20 of 101 scored calls written" in first.stdout
    run(*args, "--out", str(tmp_path / "b.csv"), "--seed", "1")
    run(*args, "--out", str(tmp_path / "c.csv"), "--seed", "2")
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    rows = _rows(tmp_path / "a.csv")
    assert {r["span_id"] for r in rows} != {r["span_id"] for r in _rows(tmp_path / "c.csv")}
    assert len(rows) == 20 == len({r["span_id"] for r in rows})
    assert all(r["label"] == "" and r["agent"] == "support" for r in rows)
    assert all(r["input"] == f"question {int(r['span_id'], 16) - 1}" for r in rows)
    assert all(r["output"] == f"answer {int(r['span_id'], 16) - 1}" for r in rows)
    # five equal bins of 0..1: a uniform draw would take ~14 of the 70 scores of 1; stratified,
    # every bin gives at least its share (4) or all it has
    bins = [min(int(scores[r["span_id"]] * 5), 4) for r in rows]
    sizes = [sum(1 for s in scores.values() if min(int(s * 5), 4) == b) for b in range(5)]
    assert all(bins.count(b) >= min(4, sizes[b]) for b in range(5)), (bins, sizes)
    assert bins.count(4) <= 8


def test_a_labelled_sample_is_a_calibration_dataset(tmp_path: Path) -> None:
    _traces(tmp_path / "traces.jsonl")
    out = tmp_path / "labels.jsonl"
    assert run("sample", str(tmp_path / "traces.jsonl"), "-s", "answer-relevancy", "--n", "6",
               "--out", str(out)).returncode == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 6 and all(row["label"] == "" for row in rows)
    for number, row in enumerate(rows):
        row["label"] = "pass" if number % 2 else "fail" if number < 4 else ""
    out.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = run("calibrate", str(out), "-s", "relevancy", "--json", "-", "--resamples", "0")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["agreement"]["n"] == 5 and report["unlabelled"] == 1


@pytest.mark.parametrize("problem, message", [
    ("other.txt", "--out must end in .csv or .jsonl"),
    ("none", "no agent call scored by 'faithfulness'"),
])
def test_sample_refuses_bad_input(tmp_path: Path, problem: str, message: str) -> None:
    _traces(tmp_path / "traces.jsonl")
    out = tmp_path / ("labels.csv" if problem == "none" else problem)
    result = run("sample", str(tmp_path / "traces.jsonl"), "-s", "faithfulness", "--out", str(out))
    assert result.returncode == 2 and message in result.stderr
