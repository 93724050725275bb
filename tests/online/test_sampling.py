"""Deterministic trace-id sampling, rate limits and cost budgets of online scorers."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from tracescore.online._sampling import (
    RANDOMNESS_MASK,
    CostBudget,
    RateLimiter,
    is_sampled,
    rejection_threshold,
)

N = 20_000


def _trace_ids(n: int = N, seed: int = 7) -> list[int]:
    rng = random.Random(seed)
    return [rng.getrandbits(128) or 1 for _ in range(n)]


@pytest.mark.parametrize("rate", [0.0, 1.0])
def test_rate_zero_never_and_one_always(rate: float) -> None:
    decisions = {is_sampled(t, rate) for t in _trace_ids(2000)}
    assert decisions == {bool(rate)}
    assert is_sampled(0, 0.0) is False and is_sampled(RANDOMNESS_MASK, 0.0) is False
    assert is_sampled(0, 1.0) is True


@pytest.mark.parametrize("rate", [0.01, 0.1, 0.5, 0.9])
def test_observed_fraction_is_near_the_rate(rate: float) -> None:
    hits = sum(is_sampled(t, rate) for t in _trace_ids())
    # binomial standard deviation; 5 sigma keeps the test deterministic for the fixed seed
    sigma = (N * rate * (1 - rate)) ** 0.5
    assert abs(hits - N * rate) < 5 * sigma


def test_lower_rates_select_subsets_of_higher_rates() -> None:
    ids = _trace_ids()
    previous: set[int] | None = None
    for rate in (1.0, 0.75, 0.5, 0.25, 0.1, 0.01, 0.0):
        selected = {t for t in ids if is_sampled(t, rate)}
        if previous is not None:
            assert selected <= previous
        previous = selected


def test_decision_uses_only_the_random_low_56_bits() -> None:
    base = 0x0123456789ABCDEF0123456789ABCDEF
    for rate in (0.1, 0.5, 0.9):
        flipped_high = base ^ (0xFF << 120) ^ (0xFF << 56)
        assert is_sampled(base, rate) == is_sampled(flipped_high, rate)


def test_threshold_matches_otel_consistent_probability_convention() -> None:
    # sampled iff randomness >= (1 - rate) * 2**56
    assert rejection_threshold(1.0) == 0
    assert rejection_threshold(0.0) == 1 << 56
    assert rejection_threshold(0.5) == 1 << 55
    assert is_sampled((1 << 55) - 1, 0.5) is False
    assert is_sampled(1 << 55, 0.5) is True


_CHILD = """
import json, sys
from tracescore.online._sampling import is_sampled
ids = json.loads(sys.stdin.read())
print(json.dumps([[is_sampled(t, r) for r in (0.1, 0.5)] for t in ids]))
"""


def test_same_decision_in_another_process() -> None:
    ids = _trace_ids(500, seed=11)
    mine = [[is_sampled(t, r) for r in (0.1, 0.5)] for t in ids]
    child = subprocess.run(
        [sys.executable, "-c", _CHILD], input=json.dumps(ids), capture_output=True, text=True,
        check=True, timeout=60, env={"PYTHONHASHSEED": "123", "PATH": ""},
    )
    assert json.loads(child.stdout) == mine
    assert any(row[0] for row in mine) and not all(row[1] for row in mine)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_rate_limiter_allows_a_burst_then_refills_per_minute() -> None:
    clock = _Clock()
    limiter = RateLimiter(6, clock=clock)
    assert [limiter.try_acquire() for _ in range(8)] == [True] * 6 + [False] * 2
    clock.now += 10.0  # 6 per minute = one every 10 s
    assert limiter.try_acquire() is True
    assert limiter.try_acquire() is False
    clock.now += 3600.0  # refills to the burst size, not beyond
    assert sum(limiter.try_acquire() for _ in range(10)) == 6


def test_cost_budget_stops_at_the_hourly_budget_and_recovers() -> None:
    clock = _Clock()
    budget = CostBudget(1.0, clock=clock)
    assert budget.try_reserve()
    budget.settle(0.4)
    assert budget.try_reserve()
    budget.settle(0.4)
    # spent 0.8; the next run is estimated at the running average (0.4) -> over budget
    assert budget.try_reserve() is False
    assert budget.spent_usd == pytest.approx(0.8)
    clock.now += 3600.0
    assert budget.spent_usd == 0.0
    assert budget.try_reserve() is True


def test_cost_budget_reserves_in_flight_runs() -> None:
    budget = CostBudget(1.0, clock=_Clock())
    assert budget.try_reserve()
    budget.settle(0.3)
    admitted = 0
    while budget.try_reserve():
        admitted += 1
    assert admitted == 2  # 0.3 spent + 2 x 0.3 in flight <= 1.0; a third would exceed it
    budget.settle(None)  # a run dropped before it spent anything releases its reservation
    assert budget.try_reserve()


def test_cost_budget_admits_one_run_until_a_first_cost_is_known() -> None:
    # nothing to estimate a run's cost from yet: a burst at start-up must not all be admitted
    budget = CostBudget(1.0, clock=_Clock())
    assert [budget.try_reserve() for _ in range(3)] == [True, False, False]
    budget.settle(0.3)
    assert [budget.try_reserve() for _ in range(3)] == [True, True, False]


def test_cost_budget_of_an_unpriced_model_admits_every_run_after_the_first() -> None:
    budget = CostBudget(1.0, clock=_Clock())
    assert budget.try_reserve()
    budget.settle(None)  # no known price: counts as zero
    assert all(budget.try_reserve() for _ in range(100))


def test_zero_budget_admits_nothing() -> None:
    assert CostBudget(0.0, clock=_Clock()).try_reserve() is False
