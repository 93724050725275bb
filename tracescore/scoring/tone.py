"""Tone consistency: how close the output's sentiment is to a reference text's, or, without a
reference, how steady it stays from sentence to sentence. No judge.

Sentiment is the npm `sentiment` package's (which the reference system uses), reproduced
exactly: the text lower-cased, its marks `. , / # ! ? $ % ^ & * ; : { } = _ \\` " ~ ( )` and
line feeds made spaces, split on single spaces; each token scored by the AFINN-165 word list
and the emoji sentiment list (shipped in this package, see `sentiment_data_NOTICE.txt`), its
score negated after a negator (`not`, `don't`, ...); comparative = sum / number of tokens.
With a reference: score = max(0, 1 - |comparative(output) - comparative(reference)|).
Without: the output's sentences (runs ending in `.`, `!` or `?`, or the whole text) scored
each, score = max(0, 1 - population variance of their comparatives).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from tracescore._exceptions import ConfigurationError, ScorerError
from tracescore.scoring._base import (
    STEP_PREPROCESS,
    ScoreResult,
    ToolCall,
    _band,
    check_scale,
    new_run_id,
)
from tracescore.scoring._code import NO_JUDGE, CodeScorer
from tracescore.scoring._inputs import InputError, answer_text
from tracescore.scoring._jstext import JS_WHITESPACE
from tracescore.scoring._options import merge_options

_MARKS = re.compile(r"""[.,/#!?$%^&*;:{}=_`"~()]""")
_WHITESPACE_RUNS = re.compile(f"[{re.escape(JS_WHITESPACE)}]{{2,}}")  # JavaScript /\s\s+/
_SENTENCE = re.compile(r"[^.!?]+[.!?]+")
# The package looks negators up in a plain JavaScript object, so an inherited property name
# that survives tokenising counts too: `constructor` is the only all-lower-case one.
_NEGATORS = frozenset({"cant", "can't", "dont", "don't", "doesnt", "doesn't", "not", "non",
                       "wont", "won't", "isnt", "isn't", "constructor"})


@dataclass(frozen=True, slots=True)
class Sentiment:
    """A text's sentiment: the sum of its token scores, and that sum per token."""

    score: int
    comparative: float
    tokens: int


@cache
def sentiment_labels() -> dict[str, int]:
    """Token -> score: AFINN-165 words and the emoji list, as the `sentiment` package has them."""
    labels: dict[str, int] = {}
    folder = resources.files("tracescore.scoring")
    for name in ("afinn_165.txt", "emoji_sentiment.txt"):
        for line in folder.joinpath(name).read_text("utf-8").splitlines():
            token, value = line.rsplit("\t", 1)
            labels[token] = int(value)
    return labels


def tokenize(text: str) -> list[str]:
    """The `sentiment` package's tokens of `text` (empty strings included, as it keeps them)."""
    text = _MARKS.sub(" ", text.lower().replace("\n", " "))
    return _WHITESPACE_RUNS.sub(" ", text).strip(JS_WHITESPACE).split(" ")


def analyze_sentiment(text: str) -> Sentiment:
    """The sentiment of `text` as the npm `sentiment` package (5.0.2) computes it."""
    labels = sentiment_labels()
    tokens = tokenize(text)
    total = 0
    for index, token in enumerate(tokens):
        value = labels.get(token)
        if value is None:
            continue
        total += -value if index and tokens[index - 1] in _NEGATORS else value
    return Sentiment(score=total, comparative=total / len(tokens), tokens=len(tokens))


def _sentences(text: str) -> list[str]:
    """`text.match(/[^.!?]+[.!?]+/g)`, in linear time: a tail without an end mark cannot
    match, and leaving it out spares the regex a quadratic search over it."""
    last = max(text.rfind("."), text.rfind("!"), text.rfind("?"))
    return _SENTENCE.findall(text, 0, last + 1) if last >= 0 else []


def _mean(values: Sequence[float]) -> float:
    total = 0.0
    for value in values:  # left to right, as JavaScript's reduce (not math.fsum)
        total += value
    return total / len(values)


def tone_label(score: float, scale: float) -> str:
    """Low-cardinality label of a tone-consistency score."""
    return _band(score / scale, ((0.8, "consistent"), (0.5, "partially_consistent")),
                 "inconsistent")


class ToneConsistencyScorer(CodeScorer):
    """Sentiment of the output against `reference_tone` (or the item's `ground_truth`), or its
    stability across sentences when there is neither."""

    id = "tone-consistency"
    name = "Tone Consistency"
    aliases = ("tone",)
    factory = "create_tone_scorer"

    def __init__(self, *, reference_tone: str | None = None, scale: float = 1) -> None:
        if reference_tone is not None and not isinstance(reference_tone, str):
            raise ConfigurationError(
                f"reference_tone must be a string, got {type(reference_tone).__name__}")
        self.reference_tone = reference_tone or None  # "" means none, as in the reference
        self.scale = check_scale(scale)

    def __repr__(self) -> str:
        return f"ToneConsistencyScorer(reference_tone={self.reference_tone!r}, scale={self.scale!r})"

    def run(self, *, input: Any, output: Any, ground_truth: Any = None,
            run_id: str | None = None, tool_calls: Sequence[ToolCall] = (),
            context: Sequence[str] = ()) -> ScoreResult:
        """Score one output (pure computation: no event loop involved)."""
        run_id = run_id or new_run_id()
        try:
            answer = answer_text(output)
            reference = self.reference_tone
            compared_with = "reference_tone"
            if reference is None and ground_truth is not None:
                reference, compared_with = answer_text(ground_truth), "ground_truth"
        except InputError as exc:
            raise ScorerError(str(exc), scorer_id=self.id, step=STEP_PREPROCESS,
                              partial={"run_id": run_id}) from exc
        response = analyze_sentiment(answer).comparative
        if reference is not None:
            expected = analyze_sentiment(reference).comparative
            difference = abs(response - expected)
            value = max(0.0, 1 - difference)
            step: dict[str, Any] = {"response_sentiment": response,
                                    "reference_sentiment": expected, "difference": difference,
                                    "compared_with": compared_with}
            reason = (f"The output's sentiment ({response:.3g} per word) differs by "
                      f"{difference:.3g} from the {compared_with.replace('_', ' ')}'s.")
        else:
            sentences = _sentences(answer) or [answer]
            scores = [analyze_sentiment(sentence).comparative for sentence in sentences]
            average = _mean(scores)
            variance = _mean([(s - average) * (s - average) for s in scores])
            value = max(0.0, 1 - variance)
            step = {"avg_sentiment": average, "sentiment_variance": variance,
                    "sentences": len(sentences), "compared_with": None}
            reason = (f"The sentiment of the output's {len(sentences)} sentence"
                      f"{'' if len(sentences) == 1 else 's'} varies by {variance:.3g} "
                      f"(average {average:.3g} per word).")
        score = value * self.scale
        return ScoreResult(
            run_id=run_id, scorer_id=self.id, scorer_name=self.name, score=score,
            label=tone_label(score, self.scale), reason=reason, preprocess_step_result=step,
            usage=NO_JUDGE,
        )


def create_tone_scorer(*, reference_tone: str | None = None, scale: float = 1,
                       options: Mapping[str, Any] | None = None) -> ToneConsistencyScorer:
    """Factory named after the reference system's `createToneScorer`."""
    return ToneConsistencyScorer(**merge_options(
        options, {"reference_tone": reference_tone, "scale": scale},
        {"referenceTone": "reference_tone"}))
