"""`tracescore.calibrate`: the agreement statistics match an independent computation on generated
labels; the label spaces, the report (JSON, HTML) and the judge reached through real litellm."""

from __future__ import annotations

import itertools
import json
import math
import random
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _helpers import STUB_JUDGE

import tracescore
from tracescore import ConfigurationError, LabelSpec, Scorer, ScoreResult, calibrate
from tracescore.calibration._html import html_report
from tracescore.testing import StubLLMServer

CATEGORIES = ("relevant", "partial", "irrelevant")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "relevancy_labels.csv"


class _ScoreInOutput(Scorer):
    """A scorer whose score is written in the output (so a test chooses the judge's answer)."""

    id = name = "echo"
    uses_judge = False

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None) -> ScoreResult:
        score = float(output)
        return ScoreResult(run_id="r", scorer_id=self.id, scorer_name=self.name, score=score,
                           reason=f"the output says {score}")


def _generated(n: int, seed: int) -> tuple[list[dict[str, Any]], list[int], list[int]]:
    """Items with human categories and judge scores that agree about 60% of the time; the codes
    (0 best .. 2 worst) of both."""
    rng = random.Random(seed)
    items, human, judge = [], [], []
    for i in range(n):
        h = rng.choices(range(3), weights=(5, 2, 3))[0]
        j = h if rng.random() < 0.6 else rng.randrange(3)
        score = (0.9, 0.5, 0.1)[j]  # judge category j with cuts 0.7, 0.3
        items.append({"input": f"q{i}", "output": str(score), "label": CATEGORIES[h]})
        human.append(h)
        judge.append(j)
    return items, human, judge


def _kappa(human: list[int], judge: list[int], k: int, power: int | None = None) -> float:
    """Cohen's kappa from the confusion matrix; `power` 1/2: linear/quadratic weights."""
    n = len(human)
    observed = Counter(zip(human, judge))
    rows, cols = Counter(human), Counter(judge)
    def weight(i: int, j: int) -> float:
        if power is None:
            return float(i != j)
        return (abs(i - j) / (k - 1)) ** power
    disagree = sum(weight(i, j) * observed[i, j] for i in range(k) for j in range(k)) / n
    chance = sum(weight(i, j) * rows[i] * cols[j] for i in range(k) for j in range(k)) / n**2
    return 1 - disagree / chance


def test_kappa_weighted_kappa_and_confusion_matrix_match_a_computation_by_hand() -> None:
    items, human, judge = _generated(400, seed=7)
    report = calibrate(items, _ScoreInOutput(), labels=LabelSpec(cuts=(0.7, 0.3)),
                       resamples=0)
    a = report.agreement
    assert report.space.kind == "categories" and report.space.categories == CATEGORIES
    assert a.n == 400
    assert a.confusion == [[sum(1 for h, j in zip(human, judge) if (h, j) == (r, c))
                            for c in range(3)] for r in range(3)]
    assert a.kappa == pytest.approx(_kappa(human, judge, 3), abs=1e-12)
    assert a.kappa_linear == pytest.approx(_kappa(human, judge, 3, 1), abs=1e-12)
    assert a.kappa_quadratic == pytest.approx(_kappa(human, judge, 3, 2), abs=1e-12)
    human_pass, judge_pass = [int(h == 0) for h in human], [int(j == 0) for j in judge]
    assert a.pass_kappa == pytest.approx(_kappa(human_pass, judge_pass, 2), abs=1e-12)
    assert a.base_rate == pytest.approx(sum(human_pass) / 400)
    passes = [j for h, j in zip(human_pass, judge_pass) if h]
    fails = [j for h, j in zip(human_pass, judge_pass) if not h]
    assert a.tpr == pytest.approx(sum(passes) / len(passes))
    assert a.tnr == pytest.approx(1 - sum(fails) / len(fails))
    assert a.accuracy == pytest.approx(sum(h == j for h, j in zip(human, judge)) / 400)
    assert 0.3 < a.kappa < 0.7  # the generated agreement: neither chance nor perfect


def test_bootstrap_and_wilson_intervals_match_an_independent_computation() -> None:
    items, human, judge = _generated(300, seed=3)
    report = calibrate(items, _ScoreInOutput(), labels=LabelSpec(cuts=(0.7, 0.3)),
                       resamples=1000, seed=1)
    interval = report.agreement.intervals["kappa"]
    # an independent percentile bootstrap of the hand-computed kappa (other random draws)
    rng = np.random.default_rng(12345)
    h, j = np.array(human), np.array(judge)
    draws = []
    for _ in range(1000):
        pick = rng.integers(0, len(h), len(h))
        draws.append(_kappa(h[pick].tolist(), j[pick].tolist(), 3))
    low, high = np.percentile(draws, [2.5, 97.5])
    assert interval.low == pytest.approx(low, abs=0.03)
    assert interval.high == pytest.approx(high, abs=0.03)
    assert interval.low < report.agreement.kappa < interval.high
    # TPR: the Wilson score interval, by its formula
    passes = [int(jj == 0) for hh, jj in zip(human, judge) if hh == 0]
    n, p, z = len(passes), sum(passes) / len(passes), 1.959963984540054
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    tpr = report.agreement.intervals["tpr"]
    assert (tpr.low, tpr.high) == pytest.approx((centre - half, centre + half), abs=1e-9)


def test_scores_against_human_scores_spearman_and_mean_difference() -> None:
    rng = random.Random(5)
    human = [rng.random() for _ in range(200)]
    judge = [0.5 * h + 0.3 + rng.uniform(-0.2, 0.2) for h in human]  # 0.1..1.0, no ties
    items = [{"input": "q", "output": str(j), "label": f"{h * 5:.6f}"}
             for h, j in zip(human, judge)]
    report = calibrate(items, _ScoreInOutput(), labels=LabelSpec(label_scale=5, threshold=0.5),
                       resamples=200)
    a = report.agreement
    assert report.space.kind == "score"
    hs = [round(h * 5, 6) / 5 for h in human]
    rank = lambda v: np.argsort(np.argsort(v))
    assert a.spearman == pytest.approx(float(np.corrcoef(rank(hs), rank(judge))[0, 1]), abs=1e-9)
    assert a.mean_difference == pytest.approx(float(np.mean(np.array(judge) - hs)), abs=1e-9)
    human_pass = [int(h >= 0.5) for h in hs]
    judge_pass = [int(j >= 0.5) for j in judge]
    assert a.kappa == pytest.approx(_kappa(human_pass, judge_pass, 2), abs=1e-12)
    assert set(a.intervals) >= {"kappa", "spearman", "mean_difference", "tpr", "tnr"}


def test_pass_fail_labels_and_a_scorer_where_higher_is_worse() -> None:
    items = [{"input": "q", "output": out, "label": label} for out, label in
             [("0.0", "pass"), ("0.1", "yes"), ("0.9", "fail"), ("0.2", "fail"), ("1", "FAIL")]]
    plain = calibrate(items, _ScoreInOutput(), resamples=0)
    assert plain.space.kind == "pass_fail" and plain.agreement.accuracy == pytest.approx(1 / 5)
    inverted = calibrate(items, _ScoreInOutput(), labels=LabelSpec(higher_is_worse=True),
                         resamples=0)
    assert inverted.agreement.accuracy == pytest.approx(4 / 5)
    assert [r.index for r in inverted.disagreements] == [3]


def test_labels_that_cannot_be_read_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="--categories"):
        calibrate([{"input": "q", "output": "1", "label": "meh"},
                   {"input": "q", "output": "1", "label": "great"}], _ScoreInOutput())
    with pytest.raises(ConfigurationError, match="not one of"):
        calibrate([{"input": "q", "output": "1", "label": "great"}], _ScoreInOutput(),
                  labels=LabelSpec(categories=("good", "bad")))
    with pytest.raises(ConfigurationError, match="no item has"):
        calibrate([{"input": "q", "output": "1", "label": ""}], _ScoreInOutput())
    with pytest.raises(ConfigurationError, match="cuts must decrease"):
        calibrate([{"input": "q", "output": "1", "label": "relevant"}], _ScoreInOutput(),
                  labels=LabelSpec(cuts=(0.3, 0.7)))


def test_the_offline_judge_on_the_example_dataset(tmp_path: Path) -> None:
    report = tracescore.calibrate(EXAMPLE, "relevancy", labels=LabelSpec(cuts=(0.7, 0.3)),
                                  resamples=100, min_kappa=0.99)
    assert report.judge_model == "tracescore/offline"
    assert report.agreement.n == 26 and report.unlabelled == 0
    assert sum(map(sum, report.agreement.confusion)) == 26
    assert report.cost.judge_calls >= 26 and report.cost.duration_s > 0
    worst = report.disagreements
    assert worst and all(a.distance >= b.distance for a, b in itertools.pairwise(worst))
    assert all(r.reason for r in worst) and report.passed is False
    data = json.loads(json.dumps(report.to_dict()))
    assert data["agreement"]["kappa"] == report.agreement.kappa
    assert len(data["disagreements"]) == len(worst)
    # the version its results carry online: a score with it is one this report measured
    online = tracescore.create_answer_relevancy_scorer(model="tracescore/offline")
    assert report.scorer_version == data["scorer_version"] == online.version
    assert data["scorer_name"] == online.name
    page = html_report(report)
    assert page.count("<svg") == 2 and "Confusion matrix" in page
    assert online.version in page
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")  # self-contained


def test_the_judge_reached_through_litellm_over_http(stub_llm: StubLLMServer) -> None:
    def judge(request: dict[str, Any]) -> Any:
        prompt = next(m["content"] for m in request["messages"] if m["role"] == "user")
        if "<verdicts>" in prompt:
            return {"reason": "The score is X because the stub judged it."}
        if "<statements>" in prompt:
            verdict = "no" if "turtles" in prompt else "yes"
            return {"results": [{"result": verdict, "reason": f"judged {verdict}"}]}
        return {"statements": ["turtles" if "turtles" in prompt else "an answer"]}

    stub_llm.responder = judge
    scorer = tracescore.create_answer_relevancy_scorer(
        model=tracescore.LiteLLMJudge(**STUB_JUDGE, api_base=stub_llm.base_url))
    items = [{"input": "What is the tallest mountain?", "output": "Everest.", "label": "pass"},
             {"input": "What is the tallest mountain?", "output": "I like turtles.",
              "label": "fail"},
             {"input": "Capital of France?", "output": "Lyon.", "label": "fail"}]
    report = calibrate(items, scorer, resamples=50)
    assert report.judge_model == "openai/judge-stub"
    assert report.cost.judge_calls == 9 == len(stub_llm.requests)
    assert report.agreement.confusion == [[1, 0], [1, 1]]
    assert [r.output for r in report.disagreements] == ["Lyon."]
    assert report.disagreements[0].reason == "The score is X because the stub judged it."


@pytest.mark.parametrize(("n", "fails"), [(40, 10), (200, 3), (25, 12), (60, 30)])
def test_a_perfect_agreement_has_an_interval_of_one(n: int, fails: int) -> None:
    """Every resample where the kappa is defined agrees perfectly: the interval is 1 .. 1 (it
    was left blank, resamples with one label only making the bootstrap undefined)."""
    items = [{"input": f"q{i}", "output": "0.1" if i < fails else "0.9",
              "label": "fail" if i < fails else "pass"} for i in range(n)]
    report = calibrate(items, _ScoreInOutput(), resamples=300, seed=n)
    interval = report.agreement.intervals["kappa"]
    assert report.agreement.kappa == 1.0 and (interval.low, interval.high) == (1.0, 1.0)


@pytest.mark.parametrize(("resamples", "shown"), [(0, "not computed (--resamples 0)")])
def test_a_missing_interval_says_why(resamples: int, shown: str) -> None:
    from rich.console import Console

    from tracescore.cli._calibrate import _summary_table

    items = [{"input": f"q{i}", "output": "0.1" if i == 0 else "0.9",
              "label": "fail" if i == 0 else "pass"} for i in range(4)]
    report = calibrate(items, _ScoreInOutput(), resamples=resamples, seed=1)
    assert "kappa" not in report.agreement.intervals
    console = Console(width=200, record=True)
    console.print(_summary_table(report, resamples))
    (row,) = [line for line in console.export_text().splitlines() if "Cohen's kappa" in line]
    assert shown in row
