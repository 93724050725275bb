"""Keyword coverage: the share of the input's (or ground truth's) keywords the output repeats,
no judge.

Keywords are extracted the way the reference system does it with the `keyword-extractor`
package: HTML tags and some punctuation removed, words split on whitespace, English stop
words (the SMART list, shipped as `stopwords_en.txt`) and all-digit words dropped,
lower-cased, de-duplicated. Score = matched / input keywords, 1 when the input has none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

from tracescore.scoring._base import ScoreResult, ToolCall, _band, check_scale, new_run_id
from tracescore.scoring._code import NO_JUDGE, CodeScorer
from tracescore.scoring._jstext import JS_WHITESPACE
from tracescore.scoring._options import merge_options

_HTML_TAG = re.compile(r"<[^>]+>")
_JS_WHITESPACE_CHAR = re.compile(f"[{re.escape(JS_WHITESPACE)}]")
_URL = re.compile(r"https?://")
# Removed from every word that is not a URL: these marks, and one quote at either end.
_PUNCTUATION = re.compile(r"""[.,;!?():"“”‘’]|^'|'\Z""")
_WS = re.escape(JS_WHITESPACE)
_PUNCTUATION_IN_TEXT = re.compile(rf"""[.,;!?():"“”‘’]|(?:^|(?<=[{_WS}]))'|'(?=[{_WS}]|\Z)""")
_SINGLE_SYMBOLS = frozenset("_@&#")  # a one-character word of these is dropped
_DIGITS = frozenset("0123456789")


@cache
def english_stop_words() -> frozenset[str]:
    """The English stop words of `keyword-extractor` (the SMART stop list)."""
    text = resources.files("tracescore.scoring").joinpath("stopwords_en.txt").read_text("utf-8")
    return frozenset(text.split())


def extract_keywords(text: str) -> list[str]:
    """The keywords of `text`, in order of first appearance, as the reference extracts them."""
    text = _HTML_TAG.sub("", text).strip(JS_WHITESPACE)
    if not text:
        return []
    if "://" in text:  # URL words keep their punctuation and case: word by word
        return _keywords_by_word(text)
    # Without URLs every word is treated alike, so the text is handled in one piece: the marks
    # and the quotes at word ends removed, lower-cased (word by word only where a capital
    # sigma's final form depends on its neighbours), split, filtered.
    text = _PUNCTUATION_IN_TEXT.sub("", text)
    if "Σ" in text:
        words = [word.lower() for word in _JS_WHITESPACE_CHAR.split(text)]
    else:
        words = _JS_WHITESPACE_CHAR.split(text.lower())
    dropped = _dropped_words()
    return list(dict.fromkeys(
        word for word in words
        if word not in dropped and not (word.isascii() and word.isdigit())))


def _keywords_by_word(text: str) -> list[str]:
    stop_words = english_stop_words()
    keywords: dict[str, None] = {}  # ordered set
    for word in _JS_WHITESPACE_CHAR.split(text):
        is_url = _URL.search(word) is not None
        if not is_url:
            word = _PUNCTUATION.sub("", word)
        if word in _SINGLE_SYMBOLS:
            continue
        if not word or _DIGITS.issuperset(word):
            continue
        lowered = word.lower()
        if lowered not in stop_words:
            keywords[word if is_url else lowered] = None
    return list(keywords)


@cache
def _dropped_words() -> frozenset[str]:
    """Stop words, the one-character symbols and the empty word."""
    return english_stop_words() | _SINGLE_SYMBOLS | {""}


def coverage_label(score: float, scale: float) -> str:
    """Low-cardinality label of a keyword-coverage score."""
    return _band(score / scale, ((0.8, "covered"), (0.5, "partially_covered")), "uncovered")


class KeywordCoverageScorer(CodeScorer):
    """Share of the keywords of `ground_truth` (or of the input) that the output contains."""

    id = "keyword-coverage"
    name = "Keyword Coverage"
    aliases = ("keywords",)
    factory = "create_keyword_coverage_scorer"

    def __init__(self, *, scale: float = 1) -> None:
        self.scale = check_scale(scale)

    def __repr__(self) -> str:
        return f"KeywordCoverageScorer(scale={self.scale!r})"

    def run(self, *, input: Any, output: Any, ground_truth: Any = None,
            run_id: str | None = None, tool_calls: Sequence[ToolCall] = (),
            context: Sequence[str] = ()) -> ScoreResult:
        """Score one pair (pure computation: no event loop involved)."""
        run_id = run_id or new_run_id()
        reference, answer, compared_with = self._texts(input, output, ground_truth, run_id)
        wanted, found = extract_keywords(reference), extract_keywords(answer)
        present = set(found)
        matched = sum(1 for keyword in wanted if keyword in present)
        value = matched / len(wanted) if wanted else 1.0
        score = value * self.scale
        source = compared_with.replace("_", " ")
        reason = (f"The output contains {matched} of the {len(wanted)} keywords of the {source}."
                  if wanted else f"The {source} has no keywords to cover.")
        return ScoreResult(
            run_id=run_id, scorer_id=self.id, scorer_name=self.name, score=score,
            label=coverage_label(score, self.scale), reason=reason,
            preprocess_step_result={"reference_keywords": wanted, "response_keywords": found,
                                    "compared_with": compared_with},
            analyze_step_result={"total_keywords": len(wanted), "matched_keywords": matched},
            usage=NO_JUDGE,
        )


def create_keyword_coverage_scorer(*, scale: float = 1,
                                   options: Mapping[str, Any] | None = None
                                   ) -> KeywordCoverageScorer:
    """Factory named after the reference system's `createKeywordCoverageScorer`."""
    return KeywordCoverageScorer(**merge_options(options, {"scale": scale}, {}))
