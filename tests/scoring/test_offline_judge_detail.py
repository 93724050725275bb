"""A true detail beside a right answer does not turn the offline judge against it: every answer of
the labelled set that scores 1.0, with a place added in the same sentence ("in Kyoto", ", in
Kyoto", "(in Osaka)") still scores 1.0, with or without a ground truth; as a sentence of its own
("It is in Kyoto.") it is one partly relevant statement more, never a zero (it was 0.0: "32 °F."
read as an initial, "12." as a list bullet, a short answer no longer short)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracescore

DATA = Path(__file__).resolve().parents[1] / "data" / "offline_judge"
ROWS = [row for name in ("relevancy_tuning.csv", "relevancy_heldout.csv")
        for row in csv.DictReader((DATA / name).open(encoding="utf-8"))
        if row["label"] == "relevant"]
SCORER = tracescore.create_answer_relevancy_scorer(model="tracescore/offline")
PLACES = st.sampled_from(["Kyoto", "Osaka", "Lyon", "New South Wales", "the old town"])
SAME_SENTENCE = st.sampled_from(["{answer} in {place}.", "{answer}, in {place}.",
                                 "{answer} (in {place}).", "{answer}, near {place}.",
                                 "{answer} at {place}."])


def _score(row: dict[str, str], output: str, with_truth: bool) -> float:
    truth = row["ground_truth"] or None if with_truth else None
    return SCORER.run(input=row["input"], output=output, ground_truth=truth).score


@settings(max_examples=400, deadline=None)
@given(row=st.sampled_from(ROWS), place=PLACES, form=SAME_SENTENCE, with_truth=st.booleans())
def test_a_detail_in_the_same_sentence_keeps_a_full_score(
        row: dict[str, str], place: str, form: str, with_truth: bool) -> None:
    if _score(row, row["output"], with_truth) < 1.0:
        return  # only answers the judge gives full marks
    answer = row["output"].rstrip(".!")
    assert _score(row, form.format(answer=answer, place=place), with_truth) == 1.0


@settings(max_examples=200, deadline=None)
@given(row=st.sampled_from(ROWS), place=PLACES, with_truth=st.booleans())
def test_a_detail_as_a_sentence_of_its_own_is_never_a_zero(
        row: dict[str, str], place: str, with_truth: bool) -> None:
    if _score(row, row["output"], with_truth) < 1.0:
        return
    # one partly relevant statement more (0.65), or at worst an off-topic one when the detail
    # shares a word with the question ("the old town", "How old ..."): 0.5, never a zero
    assert _score(row, f"{row['output']} It is in {place}.", with_truth) >= 0.5


@pytest.mark.parametrize(("output", "statements"), [
    ("32 °F. It is in Kyoto.", ["32 °F.", "It is in Kyoto."]),
    ("12. It is in Kyoto.", ["12.", "It is in Kyoto."]),
    ("J. R. R. Tolkien wrote it.", ["J. R. R. Tolkien wrote it."]),
    ("The U.S. Army did. It won.", ["The U.S. Army did.", "It won."]),
    ("1. Open it\n2. Close it", ["Open it", "Close it"]),
])
def test_sentences_after_units_numbers_and_initials(output: str, statements: list[str]) -> None:
    from tracescore.scoring._offline import split_statements

    assert split_statements(output) == statements
