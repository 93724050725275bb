"""Textual difference: how much of the text survives from the input (or ground truth) to the
output, no judge.

The score is the reference system's ratio 2·LCS / (len(a) + len(b)) over the two texts as
JavaScript sees them (UTF-16 code units), with its step result: `changes` (words added,
removed or replaced), `length_diff` and `confidence`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from tracescore.scoring._base import (
    ScoreResult,
    ToolCall,
    check_scale,
    new_run_id,
    similarity_label,
)
from tracescore.scoring._code import NO_JUDGE, CodeScorer
from tracescore.scoring._jstext import js_words, utf16_length, utf16_units
from tracescore.scoring._options import merge_options


def sequence_ratio(a: str, b: str) -> float:
    """2·|longest common subsequence| / (len(a) + len(b)), lengths in UTF-16 code units;
    identical texts give 1, an empty text against a non-empty one 0."""
    if a == b:
        return 1.0
    if not a or not b:
        return 0.0
    from rapidfuzz.distance import LCSseq

    units_a, units_b = utf16_units(a), utf16_units(b)
    return 2 * LCSseq.similarity(units_a, units_b) / (len(units_a) + len(units_b))


def count_changes(a: str, b: str) -> int:
    """Words of the longer text without a counterpart in the other (the reference's count);
    texts that differ only in whitespace count 1."""
    words_a, words_b = js_words(a), js_words(b)
    if words_a == words_b:
        return 0 if a == b else 1
    if not words_a or not words_b:
        return len(words_a) + len(words_b)
    common = sum((Counter(words_a) & Counter(words_b)).values())
    return max(len(words_a), len(words_b)) - common


class TextualDifferenceScorer(CodeScorer):
    """Sequence-matching ratio of the output with `ground_truth` (or with the input)."""

    id = "textual-difference"
    name = "Textual Difference"
    aliases = ("difference",)
    factory = "create_textual_difference_scorer"

    def __init__(self, *, scale: float = 1) -> None:
        self.scale = check_scale(scale)

    def __repr__(self) -> str:
        return f"TextualDifferenceScorer(scale={self.scale!r})"

    def run(self, *, input: Any, output: Any, ground_truth: Any = None,
            run_id: str | None = None, tool_calls: Sequence[ToolCall] = (),
            context: Sequence[str] = ()) -> ScoreResult:
        """Score one pair (pure computation: no event loop involved)."""
        run_id = run_id or new_run_id()
        reference, answer, compared_with = self._texts(input, output, ground_truth, run_id)
        ratio = sequence_ratio(reference, answer)
        length_a, length_b = utf16_length(reference), utf16_length(answer)
        longest = max(length_a, length_b)
        length_diff = abs(length_a - length_b) / longest if longest else 0.0
        changes = count_changes(reference, answer)
        score = ratio * self.scale
        return ScoreResult(
            run_id=run_id, scorer_id=self.id, scorer_name=self.name, score=score,
            label=similarity_label(score, self.scale),
            reason=(f"Sequence ratio between the output and the "
                    f"{compared_with.replace('_', ' ')}: {ratio:.4g} ({changes} word "
                    f"change{'' if changes == 1 else 's'}, length difference {length_diff:.0%})."),
            preprocess_step_result={"ratio": ratio, "confidence": 1 - length_diff,
                                    "changes": changes, "length_diff": length_diff,
                                    "compared_with": compared_with},
            usage=NO_JUDGE,
        )


def create_textual_difference_scorer(*, scale: float = 1,
                                     options: Mapping[str, Any] | None = None
                                     ) -> TextualDifferenceScorer:
    """Factory named after the reference system's `createTextualDifferenceScorer`."""
    return TextualDifferenceScorer(**merge_options(options, {"scale": scale}, {}))
