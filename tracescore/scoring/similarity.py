"""Content similarity: how close the output is to the ground truth (or to the input), no judge.

The default algorithm is the reference system's Sørensen–Dice coefficient over character
bigrams; rapidfuzz metrics are selectable by name. Every algorithm gives 0..1, times `scale`.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import islice
from operator import sub
from typing import Any, Literal

from tracescore._exceptions import ConfigurationError
from tracescore.scoring._base import (
    ScoreResult,
    ToolCall,
    check_scale,
    new_run_id,
    similarity_label,
)
from tracescore.scoring._code import NO_JUDGE, CodeScorer
from tracescore.scoring._jstext import JS_WHITESPACE, JS_WHITESPACE_RUN
from tracescore.scoring._options import check_flag, merge_options

try:  # the C helper behind Counter.update; a plain dict skips Counter's own overhead
    from collections import _count_elements  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - other interpreters
    def _count_elements(mapping: dict[Any, int], iterable: Iterable[Any]) -> None:
        get = mapping.get
        for item in iterable:
            mapping[item] = get(item, 0) + 1

# Bigrams are handled as integers: the text is encoded with a fixed width per character and
# two neighbouring code units are read as one number (array type code by unit size in bytes).
_PAIR_FORMAT: dict[int, Literal["H", "I"]] = {1: "H", 2: "I"}
assert all(array(code).itemsize == 2 * unit for unit, code in _PAIR_FORMAT.items())
# Native byte order keeps every code below 2**53 (rapidfuzz hashes ints; small ones hash to
# themselves, so distinct bigrams never collide).
_UTF16 = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"
# Whitespace is JavaScript's (`\s`), as in the reference: no U+001C..U+001F or U+0085, but U+FEFF.
# Its Latin-1 characters, deleted in one C-level pass.
_LATIN1_WHITESPACE = bytes(ord(c) for c in JS_WHITESPACE if ord(c) < 256)
# ASCII whitespace other than the space: a text without it, without double, leading or trailing
# spaces, is already whitespace-normalised (checking that beats the regex from ~100 chars on).
_ASCII_OTHER_WHITESPACE = bytes(ord(c) for c in JS_WHITESPACE if ord(c) < 128 and c != " ")
_NORMALISED_CHECK_MIN_CHARS = 100
# Up to this many characters (both texts together) the sort-and-LCS route is the faster one;
# above it, counting in dicts wins (measured side by side on short and long texts).
_SORT_MAX_CHARS = 600
_lcs: Callable[[Sequence[int], Sequence[int]], int] | None = None


def _encode_pair(a: str, b: str) -> tuple[bytes, bytes, int]:
    """Both texts without whitespace, in Latin-1 when both fit (1 byte a character), else in
    UTF-16 (2 bytes a code unit: a character beyond the BMP is two, as JavaScript counts it),
    and that width."""
    try:
        return (a.encode("latin-1").translate(None, _LATIN1_WHITESPACE),
                b.encode("latin-1").translate(None, _LATIN1_WHITESPACE), 1)
    except UnicodeEncodeError:
        pass
    return (JS_WHITESPACE_RUN.sub("", a).encode(_UTF16, "surrogatepass"),
            JS_WHITESPACE_RUN.sub("", b).encode(_UTF16, "surrogatepass"), 2)


def _bigram_codes(data: bytes, unit: int) -> array[int]:
    """Every bigram of the encoded text as one integer: those at even offsets, then odd ones."""
    chars, pair = len(data) // unit, 2 * unit
    codes = array(_PAIR_FORMAT[unit], data[: chars // 2 * pair])
    codes.frombytes(data[unit: unit + (chars - 1) // 2 * pair])
    return codes


def _sorted_bigrams(data: bytes, unit: int) -> list[int]:
    codes = _bigram_codes(data, unit).tolist()
    codes.sort()
    return codes


def _bigram_counts(data: bytes, unit: int, counts: dict[int, int] | None = None) -> dict[int, int]:
    counts = {} if counts is None else counts
    _count_elements(counts, _bigram_codes(data, unit))
    return counts


def _common_bigrams(data_a: bytes, data_b: bytes, unit: int) -> int:
    """Size of the multiset intersection of the bigrams of two texts encoded alike (>= 2 chars)."""
    if (len(data_a) + len(data_b)) // unit <= _SORT_MAX_CHARS:
        # The longest common subsequence of two sorted sequences is their multiset
        # intersection (every common element, in order); rapidfuzz computes it in C.
        global _lcs
        if _lcs is None:
            from rapidfuzz.distance import LCSseq
            _lcs = LCSseq.similarity
        return _lcs(_sorted_bigrams(data_a, unit), _sorted_bigrams(data_b, unit))
    counts_a = _bigram_counts(data_a, unit)
    # b's counts start from a's bigrams at 0, so b's first values line up with a's keys
    counts_b = _bigram_counts(data_b, unit, dict.fromkeys(counts_a, 0))
    in_b = list(islice(counts_b.values(), len(counts_a)))
    # Sum of min(x, y) over a's bigrams, as (sum x + sum y - sum |x - y|) / 2: subtraction and
    # abs() are much cheaper calls than min() with two arguments.
    total_a = len(data_a) // unit - 1
    return (total_a + sum(in_b) - sum(map(abs, map(sub, counts_a.values(), in_b)))) // 2


def _collapse_whitespace(text: str) -> str:
    r"""Runs of whitespace as one space, trimmed (`.replace(/\s+/g, " ").trim()`), skipping the
    regex for a long ASCII text already in that form."""
    if (len(text) >= _NORMALISED_CHECK_MIN_CHARS and text.isascii() and "  " not in text
            and text[0] != " " and text[-1] != " "
            and len(text.encode("ascii").translate(None, _ASCII_OTHER_WHITESPACE)) == len(text)):
        return text
    return JS_WHITESPACE_RUN.sub(" ", text).strip(JS_WHITESPACE)


def dice_similarity(a: str, b: str) -> float:
    """Sørensen–Dice coefficient over character bigrams, all whitespace removed, as the
    reference's `string-similarity` computes it (JavaScript's whitespace and UTF-16 code units).

    2·|bigrams(a) ∩ bigrams(b)| / (len(a) + len(b) - 2), multiset intersection; identical
    texts (both empty included) give 1, a text shorter than 2 characters gives 0.
    """
    data_a, data_b, unit = _encode_pair(a, b)  # one encoding for both: equal bigrams, equal codes
    if data_a == data_b:
        return 1.0
    len_a, len_b = len(data_a) // unit, len(data_b) // unit
    if len_a < 2 or len_b < 2:
        return 0.0
    return 2.0 * _common_bigrams(data_a, data_b, unit) / (len_a + len_b - 2)


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


class ContentSimilarityScorer(CodeScorer):
    """String similarity of the output with `ground_truth` (or with the input when absent)."""

    id = "content-similarity"
    name = "Content Similarity"
    aliases = ("similarity",)
    factory = "create_content_similarity_scorer"

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
        self._reasons = {  # reason text before the value, by what the output is compared with
            compared_with: f"{_DESCRIPTIONS[resolved]} between the output and the "
                           f"{compared_with.replace('_', ' ')}: "
            for compared_with in ("input", "ground_truth")
        }

    def __repr__(self) -> str:
        return (f"ContentSimilarityScorer(algorithm={self.algorithm!r}, ignore_case="
                f"{self.ignore_case!r}, ignore_whitespace={self.ignore_whitespace!r}, "
                f"scale={self.scale!r})")

    def _process(self, text: str) -> str:
        if self.ignore_case:
            text = text.lower()
        if self.ignore_whitespace:
            text = _collapse_whitespace(text)
        return text

    def similarity(self, a: str, b: str) -> float:
        """The 0..1 similarity of two texts after this scorer's case/whitespace processing."""
        a, b = self._process(a), self._process(b)
        return 1.0 if a == b else self._metric(a, b)

    def run(self, *, input: Any, output: Any, ground_truth: Any = None,
            run_id: str | None = None, tool_calls: Sequence[ToolCall] = (),
            context: Sequence[str] = ()) -> ScoreResult:
        """Score one pair (pure computation: no event loop involved)."""
        run_id = run_id or new_run_id()
        reference, answer, compared_with = self._texts(input, output, ground_truth, run_id)
        processed_reference, processed_output = self._process(reference), self._process(answer)
        if processed_reference == processed_output:
            value = 1.0
        else:
            value = self._metric(processed_reference, processed_output)
        score = value * self.scale
        return ScoreResult(
            run_id=run_id, scorer_id=self.id, scorer_name=self.name, score=score,
            label=similarity_label(score, self.scale),
            reason=f"{self._reasons[compared_with]}{value:.4g}.",
            preprocess_step_result={"processed_input": processed_reference,
                                    "processed_output": processed_output,
                                    "compared_with": compared_with},
            analyze_step_result={"similarity": value},
            usage=NO_JUDGE,
        )


_SWITCHES = ("ignore_case", "ignore_whitespace")


def create_content_similarity_scorer(*, ignore_case: bool | None = None,
                                     ignore_whitespace: bool | None = None,
                                     algorithm: str = "dice", scale: float = 1,
                                     options: Mapping[str, Any] | None = None,
                                     mastra_compat: bool = False) -> ContentSimilarityScorer:
    """Factory named after the reference system's `createContentSimilarityScorer`.

    `ignore_case` and `ignore_whitespace` are on unless set to False. `options` may carry
    `ignore_case`/`ignoreCase`, `ignore_whitespace`/`ignoreWhitespace`, `algorithm` and `scale`
    (a partial set merges with the defaults).

    `mastra_compat=True` gives Mastra's number where tracescore decided otherwise: once either
    switch is set (or `options` is given at all, even empty), a switch not set is off, as
    Mastra's factory turns it off.
    """
    merged = merge_options(
        options,
        {"ignore_case": ignore_case, "ignore_whitespace": ignore_whitespace,
         "algorithm": algorithm, "scale": scale},
        {"ignoreCase": "ignore_case", "ignoreWhitespace": "ignore_whitespace"},
    )
    set_any = options is not None or any(merged[k] is not None for k in _SWITCHES)
    unset = not (check_flag("mastra_compat", mastra_compat) and set_any)  # Mastra: off
    for key in _SWITCHES:
        if merged[key] is None:
            merged[key] = unset
    return ContentSimilarityScorer(**merged)
