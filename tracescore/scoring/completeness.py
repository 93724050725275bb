"""Completeness: the share of the input's (or ground truth's) elements, its words with verbs in
their base form, that the output covers. No judge.

The reference system extracts elements with the `compromise` NLP library (nouns, verbs turned
to the infinitive, topics, terms), which has no Python twin. Here a small rule set does the
same job over the words: auxiliaries before a verb dropped, the verb lemmatised (`simplemma`,
the `nlp` extra), a lone form of be/have/do made `be`/`have`/`do`, a contraction's parts kept.
Its agreement with the reference is measured on a fixed corpus (docs/scorers.md). The
matching rule is the reference's exactly: an element of 3 characters or fewer needs an equal
output element; a longer one needs an output element that contains it, or that it contains,
with the shorter over 60% of the longer's length. Score = covered / input elements; an input
without elements scores 1 when the output has none either, else 0.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore.scoring._base import ScoreResult, ToolCall, _band, check_scale, new_run_id
from tracescore.scoring._code import NO_JUDGE, CodeScorer
from tracescore.scoring._options import merge_options

_COMBINING = re.compile("[\u0300-\u036f]")
_PARTS = re.compile(r"[a-z0-9]+")
_EDGE_PUNCTUATION = re.compile(r"^[^\w']+|[^\w']+$")
_APOSTROPHES = str.maketrans("’‘`", "'''")
_CONTRACTION = re.compile(r"^([a-z]+)'(s|re|m|ll|ve|d)$")
_NEGATION = re.compile(r"^([a-z]+)n't$")

_BE = frozenset({"am", "is", "are", "was", "were", "be", "been", "being"})
_HAVE = frozenset({"have", "has", "had", "having"})
_DO = frozenset({"do", "does", "did"})
_MODALS = frozenset({"will", "would", "shall", "should", "can", "could", "may", "might", "must"})
_AUX = _BE | _HAVE | _DO | _MODALS
_CONTRACTED_AUX = {"re": "are", "m": "am", "ll": "will", "ve": "have", "d": "would", "s": "is"}
# Irregular past tenses and participles (regular forms end in -ed).
_IRREGULAR_TEXT = """
    ate began begun bought brought built came caught chose chosen did done drew drawn drove
    driven eaten fell fallen felt flew flown forgot forgotten found gave given gone got gotten
    grew grown heard held hid hidden kept knew known laid led left lent lost made meant met paid
    put ran rang rose risen said sat saw seen sent sold spent spoke spoken stood stole stolen
    taught thought told took taken threw thrown understood went woke won wore worn wrote
    written"""
_IRREGULAR = frozenset(_IRREGULAR_TEXT.split())
_NEGATED_BASE = {"ca": "can", "wo": "will", "sha": "shall", "ai": "is"}
_SINGULAR_SUBJECTS = frozenset({"he", "she", "it", "this", "that", "who", "which", "what"})
_SUBJECTS = _SINGULAR_SUBJECTS | frozenset({"i", "you", "we", "they", "there", "here"})
_DETERMINERS = frozenset({
    "the", "a", "an", "my", "your", "his", "her", "its", "our", "their", "this", "that", "these",
    "those", "some", "any", "no", "every", "each", "all", "many", "much", "few", "several"})
_ADVERBS = frozenset({"not", "never", "also", "just", "already", "still", "really", "always",
                      "often", "usually", "now", "then", "even", "only", "probably", "please"})
_OBJECTS = _DETERMINERS | frozenset({"that", "to", "me", "him", "us", "them", "you", "it"})
_PREPOSITIONS = frozenset({"to", "of", "in", "on", "at", "by", "for", "with", "from", "about",
                           "into", "over", "up", "through", "after", "before"})
_NOT_VERBS = _DETERMINERS | _SUBJECTS | _PREPOSITIONS | frozenset({
    "and", "or", "but", "not", "me", "him", "us", "them", "very", "so", "as", "if", "than"})


def normalize(text: str) -> str:
    """Accents stripped (NFD without combining marks U+0300..U+036F), lower-cased."""
    return _COMBINING.sub("", unicodedata.normalize("NFD", text)).lower()


@cache
def _lemma(word: str) -> str:
    try:
        import simplemma
    except ImportError:  # pragma: no cover - checked when the scorer is built
        return word
    lemma = simplemma.lemmatize(word, lang="en").lower()
    return lemma if lemma.isalpha() else word


def _is_verb_form(word: str) -> bool:
    """Whether `word` reads as an inflected verb (-ing, -ed, -s or an irregular form)."""
    if word in _NOT_VERBS or not word.isalpha():
        return False
    return (word.endswith(("s", "ed", "ing")) or word in _IRREGULAR) and _lemma(word) != word


def _verb_lemma(word: str) -> str:
    lemma = _lemma(word)
    if word.endswith(("xes", "ches", "shes", "sses", "zes")) and lemma == word[:-1]:
        return word[:-2]  # fixes -> fix, not fixe
    if lemma.endswith("ll") and ("lled" in word or "lling" in word):
        american = _lemma(word.replace("ll", "l"))  # cancelled -> canceled -> cancel
        if american == lemma[:-1]:
            return american
    return lemma


def _tokens(text: str) -> tuple[list[str], list[str]]:
    """(words with contractions split into word and auxiliary, parts of the contractions)."""
    words: list[str] = []
    extra: list[str] = []
    for raw in normalize(text).translate(_APOSTROPHES).split():
        word = raw if raw.isalnum() else _EDGE_PUNCTUATION.sub("", raw)
        if "'" not in word:
            if word:
                words.append(word)
        elif negated := _NEGATION.match(word):
            base = negated.group(1)
            words += [_NEGATED_BASE.get(base, base), "not"]
        elif contracted := _CONTRACTION.match(word):
            base, suffix = contracted.groups()
            extra += [base, suffix]
            is_possessive = suffix == "s" and base not in _SUBJECTS
            words += [word] if is_possessive else [base, _CONTRACTED_AUX[suffix]]
        elif word:
            words.append(word)
    return words, extra


def _next_content(words: Sequence[str], start: int) -> int:
    """The index of the first word from `start` that is not an adverb (len(words) if none)."""
    index = start
    while index < len(words) and (words[index] in _ADVERBS or words[index].endswith("ly")):
        index += 1
    return index


def _follows_auxiliary(word: str, auxiliary: str) -> bool:
    """Whether `word`, after `auxiliary` (adverbs between), is the verb of its group: a
    participle after be or have, a base form after do or a modal."""
    if word in _NOT_VERBS or word in _AUX:
        return False
    if auxiliary in _BE:
        return _is_verb_form(word) and word.endswith(("ing", "ed", "en"))
    if auxiliary in _HAVE:
        return _is_verb_form(word) and not word.endswith("s")
    return not _is_verb_form(word)  # `do cats purr`: `cats` is the subject, not the verb


def _reads_as_verb(words: Sequence[str], index: int) -> bool:
    """Whether the -s word at `index` reads as a verb rather than a plural noun."""
    previous = words[index - 1] if index else ""
    following = words[index + 1] if index + 1 < len(words) else ""
    if previous in _SINGULAR_SUBJECTS or previous in _ADVERBS or previous.endswith("ly"):
        return True
    if not previous or previous.isdigit() or previous in _NOT_VERBS:
        return False  # `apps running`, `5 miles to`, `of rules that`: a plural noun
    return (following in _OBJECTS or following.isdigit() or following.endswith("ing")
            or following in _PREPOSITIONS)


def _base_forms(words: list[str]) -> list[str]:
    """The words with each verb group in its base form: auxiliaries before a verb dropped (a
    negation becomes do/does not), the verb lemmatised."""
    out: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        previous = words[index - 1] if index else ""
        if word in _AUX:
            end = index
            while end + 1 < len(words) and words[end + 1] in _AUX:
                end += 1
            verb = _next_content(words, end + 1)
            if verb < len(words) and _follows_auxiliary(words[verb], words[end]):
                if "not" in words[end + 1:verb]:  # don't go -> do not go, isn't -> does not
                    out.append(words[end] if words[end] in _DO else "does")
                out += words[end + 1:verb]
                out.append(_verb_lemma(words[verb]))
                index = verb + 1
                continue
            out += [_lemma(w) if w in _BE | _HAVE | _DO else w for w in words[index:end + 1]]
            index = end + 1
            continue
        if (_is_verb_form(word) and previous not in _DETERMINERS and not word.endswith("ing")
                and (not word.endswith("s") or _reads_as_verb(words, index))):
            word = _verb_lemma(word)
        out.append(word)
        index += 1
    return out


def extract_elements(text: str) -> list[str]:
    """The elements of `text` (lower-case ASCII words and numbers, verbs in their base form),
    in order of first appearance."""
    words, extra = _tokens(text.strip())
    parts = (part for word in (*extra, *_base_forms(words)) for part in _PARTS.findall(word))
    return list(dict.fromkeys(parts))


def _overlaps(element: str, candidate: str) -> bool:
    """The rule for an element over 3 characters: one text contains the other, and the
    shorter is more than 60% of the longer's length."""
    longer, shorter = (element, candidate) if len(element) > len(candidate) else \
        (candidate, element)
    return shorter in longer and len(shorter) / len(longer) > 0.6


def coverage(reference: Sequence[str], response: Iterable[str]) -> float:
    """The share of `reference` elements that some `response` element covers (the
    reference system's matching rule); 1 when both are empty, 0 when only `reference` is."""
    candidates = [normalize(element) for element in response]
    if not reference:
        return 0.0 if candidates else 1.0
    present = set(candidates)  # an equal element covers under either rule
    covered = 0
    for element in map(normalize, reference):
        if element in present or (
                len(element) > 3 and any(_overlaps(element, c) for c in candidates)):
            covered += 1
    return covered / len(reference)


def completeness_label(score: float, scale: float) -> str:
    """Low-cardinality label of a completeness score."""
    return _band(score / scale, ((0.8, "complete"), (0.5, "partially_complete")), "incomplete")


class CompletenessScorer(CodeScorer):
    """Share of the elements of `ground_truth` (or of the input) that the output covers."""

    id = "completeness"
    name = "Completeness"
    factory = "create_completeness_scorer"

    def __init__(self, *, scale: float = 1) -> None:
        self.scale = check_scale(scale)
        try:
            import simplemma  # noqa: F401
        except ImportError:
            raise ConfigurationError(
                "the completeness scorer needs simplemma: pip install 'tracescore[nlp]'"
            ) from None

    def __repr__(self) -> str:
        return f"CompletenessScorer(scale={self.scale!r})"

    def run(self, *, input: Any, output: Any, ground_truth: Any = None,
            run_id: str | None = None, tool_calls: Sequence[ToolCall] = (),
            context: Sequence[str] = ()) -> ScoreResult:
        """Score one pair (pure computation: no event loop involved)."""
        run_id = run_id or new_run_id()
        reference, answer, compared_with = self._texts(input, output, ground_truth, run_id)
        wanted, found = extract_elements(reference), extract_elements(answer)
        value = coverage(wanted, found)
        score = value * self.scale
        present = set(found)
        missing = [element for element in wanted if element not in present]
        source = compared_with.replace("_", " ")
        reason = (f"The output covers {round(value * len(wanted))} of the {len(wanted)} "
                  f"elements of the {source}." if wanted
                  else f"The {source} has no elements to cover.")
        return ScoreResult(
            run_id=run_id, scorer_id=self.id, scorer_name=self.name, score=score,
            label=completeness_label(score, self.scale), reason=reason,
            preprocess_step_result={"input_elements": wanted, "output_elements": found,
                                    "missing_elements": missing,
                                    "element_counts": {"input": len(wanted),
                                                       "output": len(found)},
                                    "compared_with": compared_with},
            usage=NO_JUDGE,
        )


def create_completeness_scorer(*, scale: float = 1,
                               options: Mapping[str, Any] | None = None) -> CompletenessScorer:
    """Factory named after the reference system's `createCompletenessScorer`."""
    return CompletenessScorer(**merge_options(options, {"scale": scale}, {}))
