"""Deterministic trace-id sampling, rate limits and judge-cost budgets for online scorers.

Sampling compares the 56 random bits of a W3C trace id (its low 7 bytes) with a threshold
derived from the rate, the same way OpenTelemetry's consistent probability samplers do: the
decision depends only on the trace id (same answer in every process and on every retry) and a
lower rate always selects a subset of a higher rate, across scorers too.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

RANDOMNESS_BITS = 56
RANDOMNESS_MASK = (1 << RANDOMNESS_BITS) - 1
_MAX_RANDOMNESS = 1 << RANDOMNESS_BITS


def rejection_threshold(rate: float) -> int:
    """Smallest 56-bit randomness value that is sampled at `rate` (rate 0 -> 2**56: never)."""
    if rate >= 1.0:
        return 0
    if rate <= 0.0:
        return _MAX_RANDOMNESS
    return min(_MAX_RANDOMNESS, max(1, round((1.0 - rate) * _MAX_RANDOMNESS)))


def trace_randomness(trace_id: int) -> int:
    """The 56 random bits of a trace id."""
    return trace_id & RANDOMNESS_MASK


def is_sampled(trace_id: int, rate: float) -> bool:
    """Whether a trace is selected at `rate` (deterministic; subsets nest as the rate falls)."""
    return trace_id & RANDOMNESS_MASK >= rejection_threshold(rate)


class RateLimiter:
    """Token bucket: at most `per_minute` acquisitions per minute, bursting up to that amount."""

    __slots__ = ("_capacity", "_clock", "_lock", "_per_second", "_tokens", "_updated")

    def __init__(
        self, per_minute: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._capacity = float(per_minute)
        self._per_second = float(per_minute) / 60.0
        self._tokens = self._capacity
        self._clock = clock
        self._updated = clock()
        self._lock = threading.Lock()

    def try_acquire(self) -> bool:
        """Take one token if available (never blocks)."""
        with self._lock:
            now = self._clock()
            elapsed = now - self._updated
            self._updated = now
            self._tokens = min(self._capacity, self._tokens + elapsed * self._per_second)
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False

    def after_fork(self) -> None:
        """A fresh lock in a forked child (a parent thread may have held the old one)."""
        self._lock = threading.Lock()


class CostBudget:
    """Judge spend over a sliding hour; admits a run while spend plus in-flight estimate < budget.

    Costs become known only after a run finishes, so admitted-but-unfinished runs are
    reserved at the running average cost to keep a burst from overshooting the budget; until
    a first run has finished there is no average, so one run at a time is admitted.
    """

    __slots__ = ("_avg", "_budget", "_clock", "_finished", "_in_flight", "_lock", "_spent",
                 "_window")

    _WINDOW_S = 3600.0

    def __init__(
        self, usd_per_hour: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._budget = float(usd_per_hour)
        self._spent = 0.0
        self._window: deque[tuple[float, float]] = deque()
        self._in_flight = 0
        self._avg = 0.0
        self._finished = False  # has a run finished (so `_avg` means something)?
        self._clock = clock
        self._lock = threading.Lock()

    def try_reserve(self) -> bool:
        """Admit one run if the budget allows it; pair with `settle`."""
        with self._lock:
            self._expire(self._clock())
            if self._spent + (self._in_flight + 1) * self._avg > self._budget or (
                self._budget <= 0.0
            ) or (self._in_flight and not self._finished):
                return False
            self._in_flight += 1
            return True

    def settle(self, cost_usd: float | None) -> None:
        """Record the real cost of an admitted run that finished (None: unknown, counted as zero)."""
        cost = float(cost_usd) if cost_usd else 0.0
        with self._lock:
            self._finished = True
            self._in_flight = max(0, self._in_flight - 1)
            if cost > 0.0:
                self._window.append((self._clock(), cost))
                self._spent += cost
                self._avg = cost if self._avg == 0.0 else 0.8 * self._avg + 0.2 * cost

    def release(self) -> None:
        """Give back the reservation of an admitted run that never ran."""
        with self._lock:
            self._in_flight = max(0, self._in_flight - 1)

    def after_fork(self) -> None:
        """A fresh lock in a forked child (a parent thread may have held the old one)."""
        self._lock = threading.Lock()

    @property
    def spent_usd(self) -> float:
        """Spend in the last hour."""
        with self._lock:
            self._expire(self._clock())
            return self._spent

    def _expire(self, now: float) -> None:
        window = self._window
        while window and now - window[0][0] >= self._WINDOW_S:
            self._spent -= window.popleft()[1]
        if not window:
            self._spent = 0.0
