"""Content similarity: how close the output is to the ground truth (or to the input), no judge.

The default algorithm is the reference system's Sørensen–Dice coefficient over character
bigrams; rapidfuzz metrics are selectable by name. Every algorithm gives 0..1, times `scale`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from itertools import repeat
from typing import Any

from tracescore._exceptions import ConfigurationError, ScorerError
from tracescore.scoring._base import (
    STEP_PREPROCESS,
    JudgeUsage,
    Scorer,
    ScoreResult,
    check_scale,
    new_run_id,
    similarity_label,
)
from tracescore.scoring._inputs import InputError, answer_text, question_text
from tracescore.scoring.relevancy import _merge_options

try:  # the C helper behind Counter.update; a plain dict skips Counter's own overhead
    from collections import _count_elements  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - other interpreters
    def _count_elements(mapping: dict[Any, int], iterable: Iterable[Any]) -> None:
        get = mapping.get
        for item in iterable:
            mapping[item] = get(item, 0) + 1

_LONG = 128  # from this total length on, bigrams are counted as integers (faster than substrings)


def _bigram_counts(text: str, as_ints: bool) -> dict[Any, int]:
    """Multiset of the character bigrams of `text` (len >= 2), as substrings or as integers."""
    counts: dict[Any, int] = {}
    if not as_ints:
        _count_elements(counts, map(operator.add, text[:-1], text[1:]))
        return counts
    # Two UTF-32 code units side by side read as one 64-bit integer: even offsets, then odd.
    data = memoryview(text.encode("utf-32-le"))
    even = (len(data) // 8) * 8
    odd = ((len(data) - 4) // 8) * 8
    _count_elements(counts, data[:even].cast("Q"))
    _count_elements(counts, data[4:4 + odd].cast("Q"))
    return counts


def dice_similarity(a: str, b: str) -> float:
    """Sørensen–Dice coefficient over character bigrams, all whitespace removed.

    2·|bigrams(a) ∩ bigrams(b)| / (len(a) + len(b) - 2), multiset intersection; identical
    texts (both empty included) give 1, a text shorter than 2 characters gives 0.
    """
    a = "".join(a.split())
    b = "".join(b.split())
    if a == b:
        return 1.0
    if len(a) < 2 or len(b) < 2:
        return 0.0
    as_ints = len(a) + len(b) >= _LONG  # both texts must use the same representation
    ca, cb = _bigram_counts(a, as_ints), _bigram_counts(b, as_ints)
    if len(ca) > len(cb):
        ca, cb = cb, ca
    common = sum(map(min, ca.values(), map(cb.get, ca, repeat(0))))
    return 2.0 * common / (len(a) + len(b) - 2)


ALGORITHMS: tuple[str, ...] = ("dice", "ratio", "partial_ratio", "token_set_ratio",
                               "token_sort_ratio", "jaro_winkler", "levenshtein")
_METRICS: dict[str, Callable[[str, str], float]] = {"dice": dice_similarity}


def _metric(name: str) -> Callable[[str, str], float]:
    """The 0..1 metric called `name`; rapidfuzz is imported when one of its metrics is first used."""
    if name not in _METRICS:
        from rapidfuzz import fuzz
        from rapidfuzz.distance import JaroWinkler, Levenshtein

        _METRICS.update({
            "ratio": lambda a, b: fuzz.ratio(a, b) / 100.0,
            "partial_ratio": lambda a, b: fuzz.partial_ratio(a, b) / 100.0,
            "token_set_ratio": lambda a, b: fuzz.token_set_ratio(a, b) / 100.0,
            "token_sort_ratio": lambda a, b: fuzz.token_sort_ratio(a, b) / 100.0,
            "jaro_winkler": JaroWinkler.normalized_similarity,
            "levenshtein": Levenshtein.normalized_similarity,
        })
    return _METRICS[name]


_ALIASES = {"sorensen_dice": "dice", "normalized_levenshtein": "levenshtein",
            "indel": "ratio"}
_DESCRIPTIONS = {
    "dice": "Sørensen–Dice similarity of character bigrams",
    "ratio": "rapidfuzz ratio (normalised Indel similarity)",
    "partial_ratio": "rapidfuzz partial_ratio (best matching substring)",
    "token_set_ratio": "rapidfuzz token_set_ratio (shared words)",
    "token_sort_ratio": "rapidfuzz token_sort_ratio (sorted words)",
    "jaro_winkler": "Jaro-Winkler similarity",
    "levenshtein": "normalised Levenshtein similarity",
}


class ContentSimilarityScorer(Scorer):
    """String similarity of the output with `ground_truth` (or with the input when absent)."""

    id = "content-similarity"
    name = "Content Similarity"
    uses_judge = False

    def __init__(self, *, ignore_case: bool = True, ignore_whitespace: bool = True,
                 algorithm: str = "dice", scale: float = 1) -> None:
        for option, value in (("ignore_case", ignore_case), ("ignore_whitespace", ignore_whitespace)):
            if not isinstance(value, bool):
                raise ConfigurationError(f"{option} must be True or False, got {value!r}")
        if not isinstance(algorithm, str):
            raise ConfigurationError(f"algorithm must be a name, got {algorithm!r}")
        resolved = _ALIASES.get(algorithm.strip().lower(), algorithm.strip().lower())
        if resolved not in ALGORITHMS:
            raise ConfigurationError(
                f"unknown similarity algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
        self.ignore_case = ignore_case
        self.ignore_whitespace = ignore_whitespace
        self.algorithm = resolved
        self.scale = check_scale(scale)
        self._metric = _metric(resolved)

    def __repr__(self) -> str:
        return (f"ContentSimilarityScorer(algorithm={self.algorithm!r}, ignore_case="
                f"{self.ignore_case!r}, ignore_whitespace={self.ignore_whitespace!r}, "
                f"scale={self.scale!r})")

    def _process(self, text: str) -> str:
        if self.ignore_case:
            text = text.lower()
        if self.ignore_whitespace:
            text = " ".join(text.split())
        return text

    def similarity(self, a: str, b: str) -> float:
        """The 0..1 similarity of two texts after this scorer's case/whitespace processing."""
        a, b = self._process(a), self._process(b)
        return 1.0 if a == b else self._metric(a, b)

    def run(self, *, input: Any, output: Any, ground_truth: Any = None,
            run_id: str | None = None) -> ScoreResult:
        """Score one pair (pure computation: no event loop involved)."""
        run_id = run_id or new_run_id()
        compared_with = "input" if ground_truth is None else "ground_truth"
        try:
            reference = question_text(input) if ground_truth is None else answer_text(ground_truth)
            answer = answer_text(output)
        except InputError as exc:
            raise ScorerError(str(exc), scorer_id=self.id, step=STEP_PREPROCESS,
                              partial={"run_id": run_id}) from exc
        processed_reference, processed_output = self._process(reference), self._process(answer)
        if processed_reference == processed_output:
            value = 1.0
        else:
            value = self._metric(processed_reference, processed_output)
        score = value * self.scale
        return ScoreResult(
            run_id=run_id, scorer_id=self.id, scorer_name=self.name, score=score,
            label=similarity_label(score, self.scale),
            reason=(f"{_DESCRIPTIONS[self.algorithm]} between the output and the "
                    f"{compared_with.replace('_', ' ')}: {value:.4g}."),
            preprocess_step_result={"processed_input": processed_reference,
                                    "processed_output": processed_output,
                                    "compared_with": compared_with},
            analyze_step_result={"similarity": value},
            usage=JudgeUsage(model=None),
        )

    async def arun(self, *, input: Any, output: Any, ground_truth: Any = None,
                   run_id: str | None = None) -> ScoreResult:
        return self.run(input=input, output=output, ground_truth=ground_truth, run_id=run_id)


def create_content_similarity_scorer(*, ignore_case: bool = True, ignore_whitespace: bool = True,
                                     algorithm: str = "dice", scale: float = 1,
                                     options: Mapping[str, Any] | None = None
                                     ) -> ContentSimilarityScorer:
    """Factory named after the reference system's `createContentSimilarityScorer`.

    `options` may carry `ignore_case`/`ignoreCase`, `ignore_whitespace`/`ignoreWhitespace`,
    `algorithm` and `scale` (a partial set merges with the defaults).
    """
    merged = _merge_options(
        options,
        {"ignore_case": ignore_case, "ignore_whitespace": ignore_whitespace,
         "algorithm": algorithm, "scale": scale},
        {"ignoreCase": "ignore_case", "ignoreWhitespace": "ignore_whitespace"},
    )
    return ContentSimilarityScorer(**merged)
