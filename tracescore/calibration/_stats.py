"""Agreement between human labels and a judge, computed with scikit-learn and SciPy.

Cohen's kappa (unweighted, and linear/quadratic weighted for ordered categories), the confusion
matrix, TPR/TNR, Spearman's rank correlation and the mean difference; confidence intervals by a
percentile bootstrap (`scipy.stats.bootstrap`, paired resampling of the items, a fixed seed)
and, for TPR/TNR, Wilson score intervals. Both libraries are imported here only (the `calibrate` extra), when a report is made.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tracescore._exceptions import ConfigurationError

DEFAULT_RESAMPLES = 1000
DEFAULT_CONFIDENCE = 0.95
_EXTRA_HINT = "pip install 'tracescore[calibrate]'"


@dataclass(frozen=True, kw_only=True)
class Interval:
    """A bootstrap confidence interval."""

    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return {"low": self.low, "high": self.high}


@dataclass(frozen=True, kw_only=True)
class Agreement:
    """How often the judge agrees with the human labels (None: undefined for these labels).

    `kappa` is Cohen's kappa in the label space (pass/fail for scores); `kappa_linear` and
    `kappa_quadratic` are its weighted forms (ordered categories only); `pass_kappa` is the
    kappa of pass against fail (categories collapsed with `pass_categories`). `base_rate` is the
    share of human passes, `judge_pass_rate` the judge's; `tpr` the share of human passes the
    judge passes, `tnr` the share of human fails it fails. `confusion[i][j]` counts the items a
    human put in category i and the judge in category j (best first). `spearman` compares the
    human ranks with the judge's scores; `mean_difference` is judge minus human (scores only).
    """

    n: int
    accuracy: float
    kappa: float | None
    kappa_linear: float | None = None
    kappa_quadratic: float | None = None
    pass_kappa: float | None = None
    base_rate: float
    judge_pass_rate: float
    tpr: float | None
    tnr: float | None
    confusion: list[list[int]]
    spearman: float | None
    mean_difference: float | None = None
    intervals: dict[str, Interval] = field(default_factory=dict)
    confidence: float = DEFAULT_CONFIDENCE

    def to_dict(self) -> dict[str, Any]:
        data = {k: getattr(self, k) for k in (
            "n", "accuracy", "kappa", "kappa_linear", "kappa_quadratic", "pass_kappa",
            "base_rate", "judge_pass_rate", "tpr", "tnr", "confusion", "spearman",
            "mean_difference", "confidence")}
        data["intervals"] = {k: v.to_dict() for k, v in self.intervals.items()}
        return data


def agreement(human: Sequence[float], judge_codes: Sequence[int], judge_goodness: Sequence[float],
              *, levels: int, ordinal: bool, scores: bool, pass_from: int, threshold: float,
              weights: str = "none", confidence: float = DEFAULT_CONFIDENCE,
              resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Agreement:
    """Agreement of `judge_codes` (and `judge_goodness`, 0..1) with `human`: codes 0..levels-1
    (higher is better), or goodness values 0..1 when `scores`. A code >= `pass_from` is a pass;
    a human score is a pass from `threshold`.

    Bootstrap intervals are computed for the kappa (and the `weights` kappa of ordered
    categories, the one a gate compares), Spearman and the mean difference; TPR and TNR get
    Wilson score intervals (`scipy.stats.binomtest`).
    """
    np, metrics, stats = _libraries()
    if not 0 < confidence < 1:
        raise ConfigurationError(f"confidence must be between 0 and 1, got {confidence!r}")
    human_values = np.asarray(human, dtype=float)
    codes = np.asarray(judge_codes, dtype=int)
    goodness = np.asarray(judge_goodness, dtype=float)
    labels = list(range(levels))

    def codes_of(h: Any) -> Any:
        return (h >= threshold).astype(int) if scores else h.astype(int)

    def kappa(h: Any, c: Any, w: str | None = None) -> float:
        return float(metrics.cohen_kappa_score(codes_of(h), c, labels=labels, weights=w))

    # the statistics with bootstrap intervals: name -> f(human, codes, goodness)
    bootstrapped: dict[str, Any] = {"kappa": lambda h, c, g: kappa(h, c)}
    if ordinal and weights != "none":
        bootstrapped[f"kappa_{weights}"] = lambda h, c, g: kappa(h, c, weights)
    bootstrapped["spearman"] = lambda h, c, g: stats.spearmanr(h, g).statistic
    if scores:
        bootstrapped["mean_difference"] = lambda h, c, g: float(np.mean(g - h))

    def measure(h: Any, c: Any, g: Any) -> Any:
        return np.asarray([f(h, c, g) for f in bootstrapped.values()], dtype=float)

    human_codes = codes_of(human_values)
    human_pass, judge_pass = human_codes >= pass_from, codes >= pass_from
    with warnings.catch_warnings():  # undefined values (one class only) are reported as None
        warnings.simplefilter("ignore")
        point = dict(zip(bootstrapped, measure(human_values, codes, goodness)))
        intervals = _intervals(stats, (human_values, codes, goodness), measure,
                               list(bootstrapped), confidence, resamples, seed)
        if ordinal:
            point["kappa_linear"] = kappa(human_values, codes, "linear")
            point["kappa_quadratic"] = kappa(human_values, codes, "quadratic")
            point["pass_kappa"] = metrics.cohen_kappa_score(human_pass, judge_pass)
        else:
            point["pass_kappa"] = point["kappa"]
    tpr, tpr_interval = _rate(stats, judge_pass[human_pass], confidence)
    tnr, tnr_interval = _rate(stats, ~judge_pass[~human_pass], confidence)
    intervals.update({k: v for k, v in (("tpr", tpr_interval), ("tnr", tnr_interval)) if v})
    confusion = metrics.confusion_matrix(human_codes, codes, labels=labels)[::-1, ::-1]
    return Agreement(
        n=len(human_values),
        accuracy=float(metrics.accuracy_score(human_codes, codes)),
        kappa=_clean(point["kappa"]),
        kappa_linear=_clean(point.get("kappa_linear")),
        kappa_quadratic=_clean(point.get("kappa_quadratic")),
        pass_kappa=_clean(point["pass_kappa"]),
        base_rate=float(np.mean(human_pass)),
        judge_pass_rate=float(np.mean(judge_pass)),
        tpr=tpr,
        tnr=tnr,
        confusion=confusion.tolist(),
        spearman=_clean(point["spearman"]),
        mean_difference=_clean(point.get("mean_difference")),
        intervals=intervals,
        confidence=confidence,
    )


def _rate(stats: Any, hits: Any, confidence: float) -> tuple[float | None, Interval | None]:
    """The share of True in `hits` and its Wilson score interval (None: no item)."""
    if not len(hits):
        return None, None
    test = stats.binomtest(int(hits.sum()), len(hits))
    low, high = test.proportion_ci(confidence_level=confidence, method="wilson")
    return float(test.statistic), Interval(low=float(low), high=float(high))


def _intervals(stats: Any, data: tuple[Any, ...], measure: Any, names: list[str],
               confidence: float, resamples: int, seed: int) -> dict[str, Interval]:
    if resamples < 1 or len(data[0]) < 2:
        return {}
    result = stats.bootstrap(data, measure, paired=True, vectorized=False,
                             n_resamples=resamples, confidence_level=confidence,
                             method="percentile", rng=seed)
    low, high = result.confidence_interval
    distribution = result.bootstrap_distribution.reshape(len(names), -1)
    out = {}
    for name, lo, hi, values in zip(names, low, high, distribution):
        if not (math.isfinite(lo) and math.isfinite(hi)):
            # some resamples leave the statistic undefined (a kappa of resamples where everyone
            # gave one label, as with a perfect agreement): the interval of the others
            lo, hi = _defined_percentiles(values, confidence)
        if math.isfinite(lo) and math.isfinite(hi):
            out[name] = Interval(low=float(lo), high=float(hi))
    return out


def _defined_percentiles(values: Any, confidence: float) -> tuple[float, float]:
    """The percentile interval of the finite `values`, when most of them are (else NaN)."""
    import numpy as np

    finite = values[np.isfinite(values)]
    if len(finite) < len(values) / 2:
        return math.nan, math.nan
    tail = (1 - confidence) / 2 * 100
    return float(np.percentile(finite, tail)), float(np.percentile(finite, 100 - tail))


def _clean(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _libraries() -> tuple[Any, Any, Any]:
    """numpy, sklearn.metrics and scipy.stats, or a ConfigurationError naming the extra."""
    try:
        import numpy
        from scipy import stats
        from sklearn import metrics
    except ImportError as exc:
        raise ConfigurationError(f"calibration needs scikit-learn and SciPy ({exc.name} is "
                                 f"missing): {_EXTRA_HINT}") from None
    return numpy, metrics, stats
