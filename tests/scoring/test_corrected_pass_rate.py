"""The pass rate corrected by people's labels: coverage of a known truth over many seeds, and
agreement with an independent numpy bootstrap."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from tracescore._exceptions import ConfigurationError
from tracescore.calibration._corrected import corrected_pass_rate

TRUTH = 0.7
TPR, TNR = 0.9, 0.6  # the judge passes 90% of good calls and fails only 60% of bad ones


def _draw(rng: random.Random, n: int) -> tuple[list[bool], list[bool]]:
    human = [rng.random() < TRUTH for _ in range(n)]
    judge = [rng.random() < (TPR if h else 1 - TNR) for h in human]
    return human, judge


def _binomial_upper(trials: int, p: float, tail: float) -> int:
    """The smallest k with P(X > k) < tail for X ~ Binomial(trials, p)."""
    cdf = 0.0
    for k in range(trials + 1):
        cdf += math.comb(trials, k) * p**k * (1 - p) ** (trials - k)
        if 1 - cdf < tail:
            return k
    return trials


def test_the_corrected_interval_covers_the_truth_at_its_stated_rate() -> None:
    seeds, confidence = 300, 0.9
    misses = judge_only_misses = 0
    for seed in range(seeds):
        rng = random.Random(seed)
        _, judge_all = _draw(rng, 1500)
        human, judge = _draw(rng, 150)
        result = corrected_pass_rate(judge_all, judge, human, confidence=confidence)
        misses += not result.corrected.low <= TRUTH <= result.corrected.high
        judge_only_misses += not result.judge_only.low <= TRUTH <= result.judge_only.high
    # Misses ~ Binomial(seeds, 0.1) if the stated rate holds: a miss count above the bound
    # has probability under 1e-6 (the normal interval's small-sample error is far below that).
    assert misses <= _binomial_upper(seeds, 1 - confidence, 1e-6)
    # Not trivially wide either: the interval misses sometimes, as a 90% interval must.
    assert misses >= seeds - _binomial_upper(seeds, confidence, 1e-6)
    # The judge alone (expected 0.75) is biased: its interval almost never covers 0.7.
    assert judge_only_misses > 0.9 * seeds


def test_the_interval_matches_a_numpy_bootstrap() -> None:
    rng = random.Random(7)
    _, judge_all = _draw(rng, 3000)
    human, judge = _draw(rng, 300)
    result = corrected_pass_rate(judge_all, judge, human, confidence=0.95)

    a, h, j = np.array(judge_all, float), np.array(human, float), np.array(judge, float)
    assert result.corrected.rate == pytest.approx(a.mean() + (h - j).mean())
    gen = np.random.default_rng(0)
    boots = np.array([
        a[gen.integers(0, a.size, a.size)].mean()
        + (h - j)[idx].mean()
        for idx in (gen.integers(0, h.size, h.size) for _ in range(2000))])
    low, high = np.percentile(boots, [2.5, 97.5])
    width = result.corrected.high - result.corrected.low
    assert abs(result.corrected.low - low) < 0.1 * width
    assert abs(result.corrected.high - high) < 0.1 * width


def test_a_perfect_judge_needs_no_correction() -> None:
    verdicts = [True, False, True, True]
    result = corrected_pass_rate(verdicts * 50, verdicts, verdicts)
    assert result.corrected.rate == pytest.approx(result.judge_only.rate)
    assert result.corrected.low == pytest.approx(result.judge_only.low)


@pytest.mark.parametrize(("judge", "human", "confidence"), [
    ([True], [True, False], 0.95),
    ([True, False], [True, False], 1.0),
    ([True], [True], 0.9),
])
def test_bad_input_is_a_clear_error(judge: list[bool], human: list[bool], confidence: float) -> None:
    with pytest.raises(ConfigurationError):
        corrected_pass_rate([True, False, True], judge, human, confidence=confidence)
