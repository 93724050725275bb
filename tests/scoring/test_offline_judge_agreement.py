"""The offline judge's agreement with people, on the labelled set shipped in tests/data/offline_judge.

The floors are the kappas measured on the held-out relevancy part and on the faithfulness set
when the judge was last changed, less a small margin: a change to the offline judge that makes
it agree less with the labels fails here. Raise them when the judge gets better; never tune the judge on the held-out part.
"""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import pytest

import tracescore
from tracescore import LabelSpec

DATA = Path(__file__).parents[1] / "data" / "offline_judge"
HELD_OUT = DATA / "relevancy_heldout.csv"
TUNING = DATA / "relevancy_tuning.csv"
MARGIN = 0.03
# measured with `tracescore calibrate tests/data/offline_judge/relevancy_heldout.csv
# --scorer relevancy --cuts 0.7,0.3` (docs/scorers.md has them)
HELD_OUT_PASS_KAPPA = 0.666
HELD_OUT_KAPPA = 0.519
FAITHFULNESS = DATA / "faithfulness.csv"
FAITHFULNESS_PASS_KAPPA = {"faithfulness": 0.608, "hallucination": 0.610}


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def _part(question: str) -> str:
    """The fixed split: the first byte of the question's SHA-256, odd: held out."""
    return "heldout" if hashlib.sha256(question.encode()).digest()[0] % 2 else "tuning"


def test_the_parts_are_split_by_question_and_labelled() -> None:
    held_out, tuning = _rows(HELD_OUT), _rows(TUNING)
    assert len(held_out) + len(tuning) >= 300
    assert {_part(r["input"]) for r in held_out} == {"heldout"}
    assert {_part(r["input"]) for r in tuning} == {"tuning"}
    for rows in (held_out, tuning):
        assert {r["label"] for r in rows} == {"relevant", "partial", "irrelevant"}


def test_held_out_agreement_does_not_regress() -> None:
    report = tracescore.calibrate(HELD_OUT, "relevancy", labels=LabelSpec(cuts=(0.7, 0.3)),
                                  judge_model="tracescore/offline", resamples=20)
    agreement = report.agreement
    assert agreement.n == len(_rows(HELD_OUT)) and not report.errors
    assert agreement.pass_kappa is not None and agreement.kappa is not None
    assert agreement.pass_kappa >= HELD_OUT_PASS_KAPPA - MARGIN, agreement.pass_kappa
    assert agreement.kappa >= HELD_OUT_KAPPA - MARGIN, agreement.kappa


@pytest.mark.parametrize("scorer", ["faithfulness", "hallucination"])
def test_faithfulness_agreement_does_not_regress(scorer: str) -> None:
    report = tracescore.calibrate(FAITHFULNESS, scorer, judge_model="tracescore/offline",
                                  resamples=20)
    assert report.agreement.n == len(_rows(FAITHFULNESS)) and not report.errors
    assert report.space.categories == ("faithful", "partially_faithful", "unfaithful")
    kappa = report.agreement.pass_kappa
    assert kappa is not None and kappa >= FAITHFULNESS_PASS_KAPPA[scorer] - MARGIN, kappa


@pytest.mark.parametrize(("question", "output", "ground_truth", "expected"), [
    # the families of mistakes the labelled set was built around, one of each
    ("How long does shipping take?", "Shipping is something we take seriously.", None, 0.0),
    ("What does a bear market mean?", "Bears hibernate through the winter.", None, 0.0),
    ("What is the tallest mountain?", "I like turtles.", None, 0.0),
    ("How long does shipping take?", "Orders usually arrive within a week.", None, 1.0),
    ("What is the capital of Japan?", "Tokyo.", None, 1.0),
    ("What is the capital of Canada?", "Ottawa est la capitale du Canada.", "Ottawa.", 1.0),
    ("What language is spoken in Brazil?", "Português.", "Portuguese.", 1.0),
    ("What is the speed of light?", "About 300,000 kilometres per second.",
     "About 299,792 kilometres per second.", 1.0),
    ("What is the capital of Australia?", "Sydney is the capital of Australia.", "Canberra.", 0.3),
])
def test_the_families_of_mistakes(question: str, output: str, ground_truth: str | None,
                                  expected: float) -> None:
    scorer = tracescore.create_answer_relevancy_scorer(model="tracescore/offline")
    assert scorer.run(input=question, output=output, ground_truth=ground_truth).score == expected
