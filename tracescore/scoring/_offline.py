"""A deterministic judge that needs no network or API key: word overlap instead of a model.

It splits answers into sentences, gives each sentence a relevancy verdict by rules
(`_offline_relevancy`: shared words, the kind of answer asked for, restatements) and fills a
reason template. Its model name, "tracescore/offline", says so in every result. Its agreement
with people is measured on tests/data/offline_judge/ (docs/scorers.md has the figures).

It has no world knowledge of its own. An LLM judge knows that "Lyon is the capital of France."
is an incorrect but on-topic answer (`unsure` in the rubric); the offline judge can only borrow
that knowledge from the ground truth when the caller gives one (`JudgeRequest.reference`).
Then a statement judged `yes` becomes `unsure` when its answer terms (its numbers, or its
capitalised names, that the question does not contain) share none with the ground truth's
terms of the same kind (a hedged number, "about 300,000", may be 5% off). This is a heuristic: a right answer worded with other names ("the
City of Light") is marked down, and a wrong answer that repeats a name or number of the
ground truth is not. Without a ground truth it cannot tell a wrong answer from the right one.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, NamedTuple

from tracescore.scoring._base import JudgeUsage
from tracescore.scoring._judge_api import OFFLINE_MODEL, JudgeReply, JudgeRequest, JudgeStepError
from tracescore.scoring._offline_relevancy import (
    ENGLISH_STOPWORDS,
    WORD,
    Question,
    fold,
    same_word,
    verdict,
    vocabulary,
)
from tracescore.scoring._prompting import format_score
from tracescore.scoring._prompts import TASK_REASON, TASK_STATEMENTS, TASK_VERDICTS

# a sentence ends at . ! ? … before a capital or a digit; not after an initial ("J. Smith",
# "U.S. Army"), but after a unit ("32 °F. It is ...")
_SENTENCE_END = re.compile(
    r"(?<![\s.][A-Z]\.)(?<!^[A-Z]\.)(?<=[.!?…])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9À-Ý])")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_DASHED = re.compile(r"^\s*[-*•]\s+")


_STOPWORDS = ENGLISH_STOPWORDS
# words that only frame a question or request
_FRAME_WORDS = vocabulary("""
how tell explain describe name give list please know show find say define mean meaning
""")
_PLACE_CUES = vocabulary("""
where capital city country located location place continent region state town province
""")
_PERSON_CUES = vocabulary("""
who whom whose author inventor founder president ceo person wrote invented founded discovered
painted directed composed leader king queen
""")
_NUMBER_CUES = vocabulary("""
many much old long far number count population percent percentage price cost age size
height distance
""")
_TIME_CUES = vocabulary("when year date day century month time")
# number words as values, so "two" and "2" are the same answer term
_NUMBER_VALUES = {word: value for value, word in enumerate((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen", "twenty",
))}
_NUMBER_VALUES.update(thirty=30, forty=40, fifty=50, sixty=60, seventy=70, eighty=80, ninety=90)
_NUMBER_VALUES.update(dozen=12, hundred=100, thousand=1000, million=10**6, billion=10**9)
_NUMERAL = re.compile(r"\d+(?:[.,]\d+)*")
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_DISAGREES = "It answers the question, but its answer"


def _stem(word: str) -> str:
    """A light stemmer: enough to match 'capitals' with 'capital' or 'flows' with 'flow'."""
    word = word.lower().replace("’", "'")
    word = word.removesuffix("'s")
    for suffix, replacement in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""),
                                ("es", ""), ("s", ""), ("ly", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith("ss"):
                return word
            return word[: len(word) - len(suffix)] + replacement
    return word


def split_statements(text: str) -> list[str]:
    """Sentences of `text` (and lines / list items), stripped, empty ones dropped."""
    statements: list[str] = []
    lines = text.splitlines()
    # "12. It is in Kyoto." is an answer, not a list: numbers are bullets in a list of two or more
    bullet = _BULLET if sum(1 for line in lines if _BULLET.match(line)) >= 2 else _DASHED
    for line in lines:
        line = bullet.sub("", line).strip()
        if line:
            statements.extend(p.strip() for p in _SENTENCE_END.split(line) if p.strip())
    return statements


class _Question:
    """The parts of a question the verdicts are made from."""

    def __init__(self, text: str) -> None:
        words = WORD.findall(text)
        lowered = [w.lower() for w in words]
        self.stems = {_stem(w) for w in words}
        self.numbers = _numbers(text)
        cues = set(lowered)
        self.expects = (
            "place" if cues & _PLACE_CUES else
            "person" if cues & _PERSON_CUES else
            "time" if cues & _TIME_CUES else
            "number" if cues & _NUMBER_CUES else
            None
        )


def _number_key(numeral: str) -> str:
    """One spelling per number: '8,849' and '8849', '3.50' and '3.5' give the same key."""
    text = numeral.replace(",", "") if _THOUSANDS.fullmatch(numeral) else numeral.replace(",", ".")
    try:
        return format(Decimal(text).normalize(), "f")
    except InvalidOperation:
        return numeral


def _numbers(text: str) -> dict[str, str]:
    """The numbers in `text` (numerals and number words), by key, with their first spelling."""
    found = {_number_key(n): n for n in reversed(_NUMERAL.findall(text))}
    for word in reversed(WORD.findall(text)):
        value = _NUMBER_VALUES.get(word.lower())
        if value is not None:
            found[str(value)] = word
    return found


def content_stems(text: str) -> set[str]:
    """The stems of the content words of `text` (no stop words, no numbers)."""
    return {_stem(w) for w in WORD.findall(text)
            if w.lower() not in _STOPWORDS and w.lower() not in _NUMBER_VALUES
            and not _NUMERAL.fullmatch(w)}


def number_keys(text: str) -> set[str]:
    """The numbers in `text` (numerals and number words), one key per value."""
    return set(_numbers(text))


class _Terms(NamedTuple):
    """The terms that carry an answer: numbers and capitalised names not in the question.

    Keys compare (number keys, word stems); values are the words as written.
    """

    numbers: dict[str, str]
    names: dict[str, str]


def _answer_terms(text: str, question: _Question) -> _Terms:
    """The answer terms of `text`.

    A sentence's first word counts as a name only when the question asks for a place or person
    or the sentence is a bare answer of up to three words (elsewhere a capital there usually
    just starts the sentence).
    """
    numbers = {k: v for k, v in _numbers(text).items() if k not in question.numbers}
    names: dict[str, str] = {}
    named = question.expects in ("place", "person")
    for sentence in split_statements(text):
        words = WORD.findall(sentence)
        first_counts = named or len(words) <= 3
        for i, word in enumerate(words):
            lowered = word.lower()
            if (word[:1].isupper() and (i > 0 or first_counts) and lowered not in _NUMBER_VALUES
                    and len(word) > 1
                    and lowered not in _STOPWORDS and lowered not in _FRAME_WORDS
                    and _stem(word) not in question.stems):
                names.setdefault(_stem(word), word)
    return _Terms(numbers, names)


def _listed(terms: Mapping[str, str], limit: int = 5) -> str:
    shown = [repr(t) for t in list(terms.values())[:limit]]
    return ", ".join(shown) + (", ..." if len(terms) > limit else "")


def _against_reference(verdict: dict[str, str], statement: str, question: _Question,
                       reference: _Terms) -> dict[str, str]:
    """A `yes` becomes `unsure` when the statement and the ground truth both have numbers but
    share none of them (or, without numbers on both sides, both have names and share none): an
    answer with the reference's number, or its name anywhere, stays `yes` with a true detail
    beside it ("About 37 °C, in Kyoto")."""
    if verdict["result"] != "yes":
        return verdict
    terms = _answer_terms(statement, question)
    words = WORD.findall(statement)
    hedged = bool(_HEDGES & {w.lower() for w in words})
    # a name of the reference anywhere in the statement agrees ("Pacific Ocean, ... in Kyoto":
    # the first word is no name to `_answer_terms`, and "Kyoto" is an extra detail)
    said = {_stem(w): w for w in words if w[:1].isupper()}
    if terms.numbers and reference.numbers:  # numbers decide: a name beside them is a detail
        agree = _near if hedged else _equal
        if any(agree(a, b) for a in terms.numbers for b in reference.numbers):
            return verdict
        own, expected = terms.numbers, reference.numbers
    elif terms.names and reference.names:
        if any(_same_name(a, b) for a in {**terms.names, **said} for b in reference.names):
            return verdict
        own, expected = terms.names, reference.names
    else:
        return verdict
    return {"result": "unsure",
            "reason": f"{_DISAGREES} ({_listed(own)}) disagrees with the reference "
                      f"answer ({_listed(expected)}); the offline judge has no world "
                      f"knowledge and takes the ground truth as its reference."}


_HEDGES = vocabulary("about around roughly approximately nearly almost some circa approx")


def _equal(a: str, b: str) -> bool:
    return a == b


def _near(a: str, b: str) -> bool:
    """Number keys within 5% of each other ("about 300,000" for 299,792)."""
    try:
        x, y = Decimal(a), Decimal(b)
    except InvalidOperation:
        return a == b
    return x == y or abs(x - y) <= Decimal("0.05") * max(abs(x), abs(y))


def _same_name(a: str, b: str) -> bool:
    """Name stems that are the same name, accents folded ("Português", "Portuguese")."""
    return same_word(fold(a), fold(b))


def _explain(data: Mapping[str, Any], with_reference: bool) -> str:
    results = data.get("results") or []
    score = format_score(float(data.get("score", 0.0)))
    if not results:
        return f"The score is {score} because the output contains no statements to judge."
    counts = {"yes": 0, "unsure": 0, "no": 0, "disagrees": 0}
    for item in results:
        key = "".join(str(item.get("result", "")).split()).lower()
        if key == "unsure" and str(item.get("reason", "")).startswith(_DISAGREES):
            key = "disagrees"
        counts[key if key in counts else "no"] += 1
    n = len(results)
    parts = [(f"{counts['yes']} of {n} statement{'s' if n != 1 else ''} directly "
              f"address{'es' if n == 1 else ''} the question")]
    if counts["disagrees"]:
        parts.append(f"{counts['disagrees']} {'is' if counts['disagrees'] == 1 else 'are'} on "
                     f"topic but disagree{'s' if counts['disagrees'] == 1 else ''} with the "
                     f"reference answer")
    if counts["unsure"]:
        parts.append(f"{counts['unsure']} {'is' if counts['unsure'] == 1 else 'are'} only partly relevant")
    if counts["no"]:
        parts.append(f"{counts['no']} {'is' if counts['no'] == 1 else 'are'} off-topic")
    joined = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    how = ("word overlap, answers checked against the ground truth" if with_reference
           else "word overlap")
    return f"The score is {score} because {joined} (offline judge: {how}, no language model)."


# A handler answers one task offline: the request -> (reply data, notes for the step result).
OfflineHandler = Callable[[JudgeRequest], tuple[dict[str, Any], dict[str, Any]]]
_HANDLERS: dict[str, OfflineHandler] = {}


def register_offline_task(task: str, handler: OfflineHandler) -> None:
    """Let the offline judge answer `task` (a JudgeRequest.task) with `handler`.

    A judged scorer registers its deterministic approximations at import; a task without a
    handler fails its step with an error that says the offline judge cannot do it.
    """
    _HANDLERS[task] = handler


class OfflineJudge:
    """The deterministic offline judge (`model="tracescore/offline"`): no network, no key.

    Given a ground truth (`JudgeRequest.reference`) it uses it as its world knowledge: an
    answer whose names and numbers the ground truth shares none of is `unsure`, not `yes`.
    """

    model = OFFLINE_MODEL

    def __repr__(self) -> str:
        return "OfflineJudge()"

    async def judge(self, request: JudgeRequest) -> JudgeReply:
        started = time.perf_counter()
        data = request.data
        notes: dict[str, Any] = {}
        if request.task == TASK_STATEMENTS:
            reply: dict[str, Any] = {"statements": split_statements(str(data.get("output", "")))}
        elif request.task == TASK_VERDICTS:
            text = str(data.get("question", ""))
            question = _Question(text)
            asked = Question(text)
            statements = [str(s) for s in data.get("statements", [])]
            results = [verdict(asked, s, i == 0) for i, s in enumerate(statements)]
            if request.reference is not None:
                reference = _answer_terms(request.reference, question)
                results = [_against_reference(r, s, question, reference)
                           for r, s in zip(results, statements)]
                notes["reference_knowledge"] = {
                    "source": "ground_truth",
                    "answer_terms": [*reference.numbers.values(), *reference.names.values()],
                    "note": "the offline judge has no world knowledge: it took the ground truth "
                            "as its reference and marked an answer unsure when its numbers, or "
                            "its names, share none with the ground truth's (a heuristic)",
                }
            reply = {"results": results}
        elif request.task == TASK_REASON:
            reply = {"reason": _explain(data, request.reference is not None)}
        elif request.task in _HANDLERS:
            reply, notes = _HANDLERS[request.task](request)
        else:
            raise JudgeStepError(f"the offline judge cannot do task {request.task!r}",
                                 step=request.step, model=self.model,
                                 usage=JudgeUsage(model=self.model))
        raw = json.dumps(reply, ensure_ascii=False)
        usage = JudgeUsage(model=self.model, calls=1, cost_usd=0.0,
                           latency_ms=(time.perf_counter() - started) * 1000.0)
        return JudgeReply(data=request.validate(reply), raw=raw, usage=usage,
                          prompt=request.prompt, notes=notes)
