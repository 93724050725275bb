"""The offline judge's relevancy verdicts: does a statement answer the question, by rules.

Measured against a labelled set (tests/data/offline_judge/), the rules look at three things
besides the words a statement shares with the question:

- the kind of answer the question asks for (a number, a time, a place or person, steps, a
  reason, yes or no) and whether the statement has one;
- whether it says anything new: a statement made only of the question's words and empty
  praise ("Shipping is something we take seriously.") answers nothing;
- two-word terms of the question ("bear market", "black hole"): one half alone ("Bears
  hibernate.") is a weak match, not an answer.

Words are compared after accents are folded and a light stemmer, and a long shared prefix
counts ("capitale" is "capital"), which also catches some answers in a Romance language.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_NUMERAL = re.compile(r"\d")


def vocabulary(text: str) -> frozenset[str]:
    """A vocabulary written as a whitespace-separated word list."""
    return frozenset(text.split())


# English function words (the offline judge's other checks use them too)
ENGLISH_STOPWORDS = vocabulary("""
a about above after again against all also am an and any are as at be because been before
being below between both but by could did do does doing down during each few for from further
had has have having he her here hers herself him himself his i if in into is it its itself
just let me more most my myself no nor not now of off on once only or other our ours
ourselves out over own same she should so some such than that the their theirs them themselves
then there these they this those through to too under until up very was we were what when
where which while who whom whose why will with would you your yours yourself yourselves can
may might must shall yes there's it's that's i'm one get got
""")
# for relevancy: without "one" (an answer may be "one"), with the commonest function words of
# French, Spanish, Italian, Portuguese and German
_STOP = (ENGLISH_STOPWORDS - {"one"}) | vocabulary("""
how what's
la le les el los las de del du des un une una uno unos es est et y e il lo gli della di da
en au aux d l à o os um uma é è der die das den dem ein eine einen und ist sind gibt hay
""")
_FRAME = vocabulary("tell explain describe name give list please know show find say define mean meaning")
# words that praise, worry or fill, and so add nothing to the question's own words
_EMPTY = vocabulary("""
something thing things anything everything many much lot lots people person really always
often important importance interesting serious seriously matter matters care deeply fascinating
scary annoying useful popular fun delicious beautiful terrible wonderful frustrating great good
nice big problem issue topic part talk wonder reason reasons priority top common essential
question questions answer know concept term subject word words kind
""")
_PRONOUN_START = vocabulary("i i'm i've we'll thanks thank sorry okay ok hmm well")
_DETERMINERS = vocabulary("a an the my your our their his her its this that")
_SUBJECT_PRONOUNS = vocabulary("it its they their he his she her this these")
_YES_NO_START = vocabulary("""
is are was were do does did can could will would should has have had may might must
""")
_YES_NO_ANSWER = vocabulary("yes no not nope yeah yep sure absolutely never")
_NUMBER_WORDS = vocabulary("""
zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety
hundred thousand million billion trillion dozen half couple few several
uno dos tres cuatro cinco seis siete ocho nueve diez deux trois quatre cinq sept huit neuf dix
eins zwei drei vier fünf sechs sieben acht neun zehn due tre quattro sette otto nove dieci
""")
_UNITS = vocabulary("""
second seconds minute minutes hour hours day days week weeks fortnight month months year years
decade decades century centuries am pm noon midnight morning evening night daily weekly
""")
_MONTHS = vocabulary("""
january february march april may june july august september october november december
spring summer autumn fall winter monday tuesday wednesday thursday friday saturday sunday
""")
_STEP_VERBS = vocabulary("""
go open click tap press hit use turn call add pour put set select choose enter type check make
take remove hold push pull wash rinse fill submit send contact request ask pay email fit swap
loosen tighten jack unscrew shut dim lower close quit enable disable restart install download
upload sign log follow visit book bring mix stir heat boil bake cook cover blot dab wait steep
apply write change update delete edit cut keep avoid try run block order freeze return
""")
_HOW_PROCEDURE = vocabulary("do can should could would to")
_REASON_START = vocabulary("because since as so due")
# where a short answer's detail starts: a comma, a dash or a preposition of place or time
_DETAIL = re.compile(r"[,;:(—–]|\s-\s|\s(?:in|at|on|near|from|since|during|according|per|"
                     r"with|around|outside|inside|across|by|as of)\s", re.IGNORECASE)


@lru_cache(maxsize=8192)
def fold(word: str) -> str:
    """Lower case without accents: 'Japón' -> 'japon'."""
    decomposed = unicodedata.normalize("NFKD", word.lower().replace("’", "'"))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


@lru_cache(maxsize=8192)
def _stem(word: str) -> str:
    """A light stemmer that strips the same suffix on both sides ('takes' and 'take')."""
    word = fold(word).removesuffix("'s")
    for suffix in ("ies", "ing", "est", "ed", "es", "s", "ly", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith("ss"):
                return word
            if suffix == "es" and not word.endswith(("sses", "xes", "ches", "shes", "zes")):
                continue
            return word[: len(word) - len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def same_word(a: str, b: str) -> bool:
    """Stems that are the same word: equal, or sharing a long prefix ('capital', 'capitale')."""
    if a == b:
        return True
    shorter = min(len(a), len(b))
    if shorter < 5:
        return False
    common = 0
    for x, y in zip(a, b):
        if x != y:
            break
        common += 1
    return common >= max(5, shorter - 2)


@dataclass
class Question:
    """What the verdicts need from a question."""

    text: str
    units: list[tuple[str, ...]] = field(default_factory=list)  # terms: one word or a pair
    entities: set[str] = field(default_factory=set)  # stems of capitalised words
    expects: str | None = None
    yes_no: bool = False

    def __post_init__(self) -> None:
        words = WORD.findall(self.text)
        lowered = [fold(w) for w in words]
        self.yes_no = bool(lowered) and lowered[0] in _YES_NO_START
        self.entities = {_stem(w) for i, w in enumerate(words)
                         if i > 0 and w[:1].isupper() and fold(w) not in _STOP}
        chain: list[str] = []
        before = ""  # the word before the chain: a determiner makes a pair a term
        for word in [*lowered, ""]:
            if word and word not in _STOP and word not in _FRAME and not _NUMERAL.search(word):
                chain.append(_stem(word))
                continue
            if len(chain) == 2 and before in _DETERMINERS and not set(chain) & self.entities:
                self.units.append(tuple(chain))  # a two-word term: "a bear market"
            else:
                self.units.extend((stem,) for stem in chain)
            chain, before = [], word
        self.expects = _expects(lowered)


def _expects(lowered: Sequence[str]) -> str | None:
    """The kind of answer a question asks for."""
    cues = set(lowered)
    first, second = (list(lowered) + ["", ""])[:2]
    if first == "why":
        return "reason"
    if first == "how" and second in ("long", "often"):
        return "time"  # a number or a duration: "3 to 5 days", "within a week"
    if first == "how" and second in ("many", "much", "old", "far", "big"):
        return "number"
    if first == "how" and (second in _HOW_PROCEDURE or second in ("i", "you", "we")):
        return "steps"
    if first == "when" or cues & {"year", "date", "time", "season", "month"}:
        return "time"
    if first == "who" or cues & {"author", "inventor", "founder", "president", "invented",
                                 "wrote", "painted", "discovered"}:
        return "person"
    if first == "where" or cues & {"capital", "city", "country", "located"}:
        return "place"
    if first in ("what", "which") and (second not in _STOP or cues & {"symbol", "called"}
                                       or any(w.endswith("est") and w != "best" for w in lowered)):
        return "name"  # "which ocean", "what language", "what is the tallest ..."
    if cues & {"percent", "percentage", "price", "cost", "population", "temperature",
               "speed", "rate", "gdp", "pressure", "number", "age", "height", "distance"}:
        return "number"
    return None


def _has_number(words: Sequence[str]) -> bool:
    return any(_NUMERAL.search(w) or fold(w) in _NUMBER_WORDS for w in words)


def _shape(words: Sequence[str], expects: str | None, question: Question) -> bool:
    """Whether the statement has the kind of answer the question asks for."""
    folded = [fold(w) for w in words]
    if expects == "number":
        return _has_number(words)
    if expects == "time":
        return _has_number(words) or any(w in _UNITS or w in _MONTHS for w in folded)
    if expects in ("person", "place", "name"):
        asked = [s for unit in question.units for s in unit]
        return any(w[:1].isupper() and fold(w) not in _STOP
                   and not any(same_word(_stem(w), q) for q in asked)
                   for w in words)
    if expects == "steps":
        return bool(folded) and folded[0] in _STEP_VERBS
    if expects == "reason":
        return bool(folded) and folded[0] in _REASON_START
    return False


def _matches(question: Question, stems: Sequence[str]) -> tuple[int, int, int]:
    """(strong, weak, entities) matches: a pair term is strong only when its words stand together."""
    strong = weak = entities = 0

    def found(stem: str) -> list[int]:
        return [i for i, s in enumerate(stems) if same_word(s, stem)]

    for unit in question.units:
        hits = [found(s) for s in unit]
        if len(unit) == 2 and hits[0] and hits[1]:
            if any(j - i == 1 for i in hits[0] for j in hits[1]):
                strong += 1
            else:
                weak += 1
        elif len(unit) == 2 and (hits[0] or hits[1]):
            weak += 1
        elif hits[0]:
            strong += 1
        if any(hits) and set(unit) & question.entities:
            entities += 1
    return strong, weak, entities


_RANK = {"yes": 2, "unsure": 1, "no": 0}


def verdict(question: Question, statement: str, first: bool) -> dict[str, str]:
    """The verdict on one statement; only the first one may be a bare answer ("Paris.").
    A trailing detail ("... in the old town.") never makes a statement less relevant: it is
    judged with and without it, and the better verdict stands."""
    found = _verdict(question, statement, first)
    details = list(_DETAIL.finditer(statement))
    if details and found["result"] != "yes":
        cut = statement[:details[-1].start()].rstrip(" ,;:(—–-")
        rest = statement[details[-1].end():]
        if cut and len(WORD.findall(rest)) <= 4:
            bare = _verdict(question, cut + ".", first)
            if _RANK[bare["result"]] > _RANK[found["result"]]:
                return bare
    return found


def _verdict(question: Question, statement: str, first: bool) -> dict[str, str]:
    words = WORD.findall(statement)
    if not words:
        return {"result": "no", "reason": "The statement has no words to relate to the question."}
    folded = [fold(w) for w in words]
    if question.yes_no and folded[0] in _YES_NO_ANSWER:
        return {"result": "yes", "reason": "It gives a yes/no answer to a yes/no question."}
    content = [w for w in words if fold(w) not in _STOP]
    stems = [_stem(w) for w in content]
    strong, weak, entities = _matches(question, stems)
    units = len(question.units)
    unit_stems = [s for unit in question.units for s in unit]
    new = [w for w, s in zip(content, stems)
           if not any(same_word(s, q) for q in unit_stems) and fold(w) not in _EMPTY]
    shape = _shape(words, question.expects, question)
    # a short answer, maybe with a detail after it ("212 °F, in Kyoto", "1889 in Kyoto")
    bare = first and len(WORD.findall(_DETAIL.split(statement, maxsplit=1)[0])) <= 4
    if folded[0] in _PRONOUN_START and not strong:
        return {"result": "no", "reason": "It speaks of itself, not of what the question asks."}
    if (strong or weak) and not new and not shape:
        return {"result": "no",
                "reason": "It repeats the question's words but adds no answer to them."}
    if question.expects == "steps" and shape and len(words) >= 6:
        return {"result": "yes", "reason": "It gives steps, as the question asks."}
    if entities and entities == strong and not weak and len(question.units) > entities:
        return {"result": "no",
                "reason": "It mentions the subject of the question but not what it asks about."}
    # "It was painted by ...": a statement that starts with a pronoun is about the subject
    if question.entities and not entities and strong and folded[0] not in _SUBJECT_PRONOUNS:
        return {"result": "unsure",
                "reason": "It shares words with the question but not the subject it asks about."}
    share = strong / units if units else 0.0
    kind = question.expects or "answer"
    if strong and share >= 0.5 and (shape or question.expects is None):
        return {"result": "yes", "reason": "It addresses what the question asks about."}
    if strong and shape:
        return {"result": "yes",
                "reason": f"It is about the question and gives the kind of answer asked for (a {kind})."}
    if first and shape and question.expects != "steps":
        return {"result": "yes", "reason": f"It gives the kind of answer the question asks for (a {kind})."}
    if bare and question.expects is None and _has_number(words):
        return {"result": "yes", "reason": "A short answer with the number the question asks for."}
    if shape and first:
        return {"result": "unsure",
                "reason": "It has the kind of answer the question asks for, but not its subject."}
    if share >= 0.5 or (strong and weak):
        return {"result": "unsure", "reason": "It is about the question but does not answer it."}
    if strong or weak:
        return {"result": "no",
                "reason": "It shares a word with the question but is about something else."}
    if folded[0] in _SUBJECT_PRONOUNS and len(words) >= 3:
        return {"result": "unsure",
                "reason": "It speaks of the question's subject (\"it\") without answering it."}
    if bare and content and question.expects is None:
        return {"result": "unsure", "reason": "A short answer that shares no words with the question."}
    return {"result": "no", "reason": "It shares no key words with the question."}
