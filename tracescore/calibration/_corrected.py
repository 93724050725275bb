"""A judge's pass rate corrected by people's labels (prediction-powered inference).

The judge scores all sampled traffic; people label a small random subset of it. The judge-only
pass rate is biased by the judge's disagreement with people. The prediction-powered estimate
(Angelopoulos et al., 2023) adds back the mean of (human - judge) measured on the labelled items:

    estimate = mean(judge over all N) + mean(human - judge over the n labelled)

and its normal interval uses var(judge)/N + var(human - judge)/n. It is unbiased for the
population pass rate whatever the judge's errors, and narrower than the labels alone when the
judge agrees with people. Pure Python: no extra is needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from tracescore._exceptions import ConfigurationError


@dataclass(frozen=True, kw_only=True)
class PassRate:
    """A pass rate with its interval at `confidence` (bounds clipped to 0..1)."""

    rate: float
    low: float
    high: float
    n: int
    confidence: float


@dataclass(frozen=True, kw_only=True)
class CorrectedPassRate:
    """The judge-only pass rate beside the one corrected by `labelled` human labels."""

    judge_only: PassRate
    corrected: PassRate
    labelled: int


def _mean_var(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = math.fsum(values) / n
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return mean, var


def disagreement(judge_labelled: Sequence[bool], human_labelled: Sequence[bool]
                 ) -> tuple[float, float]:
    """Mean and sample variance of (human - judge) over the labelled calls: the rectifier."""
    return _mean_var(
        [float(h) - float(j) for h, j in zip(human_labelled, judge_labelled, strict=True)])


def _interval(rate: float, variance: float, n: int, confidence: float) -> PassRate:
    half = NormalDist().inv_cdf(0.5 + confidence / 2) * math.sqrt(variance)
    return PassRate(rate=rate, low=max(0.0, rate - half), high=min(1.0, rate + half), n=n,
                    confidence=confidence)


def corrected_pass_rate(judge_all: Sequence[bool], judge_labelled: Sequence[bool],
                        human_labelled: Sequence[bool], *,
                        confidence: float = 0.95) -> CorrectedPassRate:
    """Pass rate of the population from the judge's verdicts on all sampled calls
    (`judge_all`) and on a random labelled subset (`judge_labelled`, paired with
    `human_labelled`, the people's verdicts on the same calls)."""
    if not 0 < confidence < 1:
        raise ConfigurationError(f"confidence must be between 0 and 1, got {confidence}")
    if len(judge_labelled) != len(human_labelled):
        raise ConfigurationError(
            f"{len(judge_labelled)} judge verdicts for {len(human_labelled)} human labels")
    if len(judge_all) < 2 or len(human_labelled) < 2:
        raise ConfigurationError("a corrected pass rate needs at least 2 judged and 2 labelled calls")
    n_all, n_lab = len(judge_all), len(human_labelled)
    judge_mean, judge_var = _mean_var([float(v) for v in judge_all])
    rectifier, rect_var = disagreement(judge_labelled, human_labelled)
    return CorrectedPassRate(
        judge_only=_interval(judge_mean, judge_var / n_all, n_all, confidence),
        corrected=_interval(judge_mean + rectifier, judge_var / n_all + rect_var / n_lab,
                            n_all, confidence),
        labelled=n_lab)
