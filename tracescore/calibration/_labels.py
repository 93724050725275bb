"""Human labels and the scorer's scores in one label space: pass/fail, ordered categories, or a
score.

A score is first turned into a *goodness* in 0..1: `score / scale`, or `1 - score / scale` for the
scorers where a higher score is worse (hallucination, toxicity, bias). Then:

- pass/fail: the judge says pass when goodness >= `threshold` (default 0.5);
- categories (best first, k of them): the judge's category is the first whose cut goodness
  reaches; the k-1 `cuts` default to equal bins (3 categories: 0.67 and 0.33);
- score: human scores (0..1, or 0..`label_scale`) are compared with the goodness directly, and
  also as pass/fail at `threshold` (so a kappa and the gate exist for every kind).

Codes are integers where a higher code is better: fail 0 / pass 1; categories worst 0 .. best k-1.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tracescore._exceptions import ConfigurationError

LabelKind = Literal["pass_fail", "categories", "score"]
KINDS: tuple[str, ...] = ("pass_fail", "categories", "score")

PASS, FAIL = "pass", "fail"
_PASS_WORDS = frozenset({"pass", "passed", "yes", "y", "true", "good", "correct", "ok", "1"})
_FAIL_WORDS = frozenset({"fail", "failed", "no", "n", "false", "bad", "incorrect", "0"})
# ordered label sets recognised without --categories (best first)
KNOWN_CATEGORIES: tuple[tuple[str, ...], ...] = (
    ("relevant", "partial", "irrelevant"),
    ("relevant", "partially_relevant", "irrelevant"),
    ("faithful", "partially_faithful", "unfaithful"),
    ("good", "ok", "bad"),
)
# scorers whose score grows with what is wrong (0 is the best answer)
HIGHER_IS_WORSE = frozenset({"hallucination", "toxicity", "bias"})


@dataclass(frozen=True, kw_only=True)
class LabelSpec:
    """How human labels are read and scores mapped to them; None: inferred from the data.

    `kind`: "pass_fail", "categories" or "score". `categories`: the category names, best first.
    `threshold`: the goodness (0..1) from which the judge says pass. `cuts`: for k categories,
    k-1 goodness values, best category first. `higher_is_worse`: the scorer's score grows with
    what is wrong. `label_scale`: the top of the human score range (0..label_scale).
    `pass_categories`: how many of the best categories count as pass (for TPR/TNR and the
    pass/fail kappa of categories).
    """

    kind: LabelKind | None = None
    categories: tuple[str, ...] | None = None
    threshold: float = 0.5
    cuts: tuple[float, ...] | None = None
    higher_is_worse: bool | None = None
    label_scale: float = 1.0
    pass_categories: int = 1


@dataclass(frozen=True, kw_only=True)
class LabelSpace:
    """A `LabelSpec` with nothing left to infer."""

    kind: LabelKind
    categories: tuple[str, ...]  # best first; ("pass", "fail") for pass/fail and scores
    threshold: float
    cuts: tuple[float, ...]  # descending goodness cuts between the categories (categories only)
    higher_is_worse: bool
    label_scale: float
    pass_categories: int

    @property
    def levels(self) -> int:
        return len(self.categories)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "categories": list(self.categories),
                "threshold": self.threshold, "cuts": list(self.cuts),
                "higher_is_worse": self.higher_is_worse, "label_scale": self.label_scale,
                "pass_categories": self.pass_categories}

    def human_value(self, label: Any, where: str) -> float:
        """A human label as a code (pass/fail, categories) or a goodness in 0..1 (score)."""
        if self.kind == "pass_fail":
            verdict = _pass_fail(label)
            if verdict is None:
                raise ConfigurationError(f"{where}: label {label!r} is not pass or fail")
            return float(verdict)
        if self.kind == "categories":
            name = _norm(label)
            if name not in self.categories:
                raise ConfigurationError(f"{where}: label {label!r} is not one of "
                                         f"{', '.join(self.categories)}")
            return float(self.levels - 1 - self.categories.index(name))
        number = _number(label)
        if number is None or not 0 <= number <= self.label_scale:
            raise ConfigurationError(f"{where}: label {label!r} is not a score in "
                                     f"0..{self.label_scale:g}")
        return number / self.label_scale

    def goodness(self, score: float, scale: float) -> float:
        """The scorer's score as 0 (worst) .. 1 (best)."""
        value = min(1.0, max(0.0, score / scale))
        return 1.0 - value if self.higher_is_worse else value

    def judge_code(self, goodness: float) -> int:
        """The judge's code in the label space (pass/fail for scores)."""
        if self.kind == "categories":
            return self.levels - 1 - next(
                (i for i, cut in enumerate(self.cuts) if goodness >= cut), len(self.cuts))
        return int(goodness >= self.threshold)

    def human_code(self, value: float) -> int:
        """A human value as a code (a score becomes pass/fail at the threshold)."""
        return int(value >= self.threshold) if self.kind == "score" else int(value)

    def name(self, code: int) -> str:
        return self.categories[self.levels - 1 - code]


def resolve_space(labels: Sequence[Any], spec: LabelSpec | None, scorer_id: str) -> LabelSpace:
    """The label space of these human labels (empty ones already removed)."""
    spec = spec or LabelSpec()
    kind, categories = spec.kind, spec.categories
    if categories is not None:
        categories = tuple(_norm(c) for c in categories)
        kind = kind or "categories"
    if kind is None:
        kind, categories = _infer(labels, spec.label_scale)
    if kind not in KINDS:
        raise ConfigurationError(f"label kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if kind == "categories":
        categories = categories or _known(labels)
        if categories is None or len(categories) < 2:
            raise ConfigurationError("ordered categories need their names, best first (e.g. "
                                     "--categories relevant,partial,irrelevant)")
    else:
        categories = (PASS, FAIL)
    _check_fraction("threshold", spec.threshold)
    cuts = _cuts(spec.cuts, len(categories)) if kind == "categories" else ()
    if not 1 <= spec.pass_categories < len(categories):
        raise ConfigurationError(f"pass_categories must be 1..{len(categories) - 1}, "
                                 f"got {spec.pass_categories}")
    if not (math.isfinite(spec.label_scale) and spec.label_scale > 0):
        raise ConfigurationError(f"label_scale must be a number > 0, got {spec.label_scale!r}")
    worse = spec.higher_is_worse
    return LabelSpace(kind=kind, categories=categories, threshold=spec.threshold, cuts=cuts,
                      higher_is_worse=scorer_id in HIGHER_IS_WORSE if worse is None else worse,
                      label_scale=spec.label_scale, pass_categories=spec.pass_categories)


def _infer(labels: Sequence[Any], label_scale: float) -> tuple[LabelKind, tuple[str, ...] | None]:
    if all(_pass_fail(label) is not None for label in labels):
        return "pass_fail", None
    if all(_number(label) is not None for label in labels):
        return "score", None
    known = _known(labels)
    if known is None:
        found = ", ".join(sorted({_norm(label) for label in labels})[:8])
        raise ConfigurationError(f"cannot tell how the labels are ordered ({found}): give the "
                                 "categories best first (--categories a,b,c), or use pass/fail "
                                 "or numeric scores")
    return "categories", known


def _known(labels: Sequence[Any]) -> tuple[str, ...] | None:
    seen = {_norm(label) for label in labels}
    return next((known for known in KNOWN_CATEGORIES if seen <= set(known)), None)


def _cuts(cuts: tuple[float, ...] | None, levels: int) -> tuple[float, ...]:
    if cuts is None:  # equal bins over 0..1
        return tuple(round((levels - 1 - i) / levels, 6) for i in range(levels - 1))
    if len(cuts) != levels - 1:
        raise ConfigurationError(f"{levels} categories need {levels - 1} cuts, got {len(cuts)}")
    for cut in cuts:
        _check_fraction("cut", cut)
    if any(a <= b for a, b in itertools.pairwise(cuts)):
        raise ConfigurationError(f"cuts must decrease (best category first), got {list(cuts)}")
    return tuple(float(c) for c in cuts)


def _check_fraction(what: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigurationError(f"{what} must be a number in 0..1, got {value!r}")


def _norm(label: Any) -> str:
    return str(label).strip().lower().replace(" ", "_").replace("-", "_")


def _pass_fail(label: Any) -> int | None:
    if isinstance(label, bool):
        return int(label)
    word = _norm(label)
    return 1 if word in _PASS_WORDS else 0 if word in _FAIL_WORDS else None


def _number(label: Any) -> float | None:
    if isinstance(label, bool):
        return None
    try:
        value = float(label)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def is_empty(label: Any) -> bool:
    """An unlabelled item: no label, or an empty cell."""
    return label is None or (isinstance(label, str) and not label.strip())
