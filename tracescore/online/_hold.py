"""`HoldTable`: evaluated spans held from export until their span-sink scorers settle.

Holds opaque items (an SDK span in process, a one-span OTLP request at the gateway) by
(trace id, span id), each with the scorers it waits for, the events that landed and a deadline.
An item leaves exactly once, through the `release` callback: when nothing is waited for any more
(`reason` None), when its deadline passes (`expire`, reason "timeout"), or when everything is let
go (`release_all`: flush, shutdown). `release` runs outside the lock; `wait_released` waits for
items taken out and not yet handed on (shutdown must not close the exporter before them).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracescore.online import _metrics as reasons
from tracescore.online._events import EventPayload
from tracescore.online._options import OnlineScorer

Key = tuple[int, int]


@dataclass(slots=True)
class Held:
    """An evaluated span held from export until its span-sink scorers finish."""

    key: Key
    item: Any
    agent: str | None
    waiting: dict[str, OnlineScorer]  # by scorer id
    deadline: float
    events: list[EventPayload] | None = None  # made when the first lands (one object less held)


class HoldTable:
    """Held items in deadline order (one `max_wait_s` for all, so insertion order)."""

    def __init__(self, *, max_held: int, max_wait_s: float,
                 release: Callable[[Held, str | None], None]) -> None:
        self._max_held = max_held
        self._max_wait_s = max_wait_s
        self._release = release
        self.reset()

    def reset(self) -> None:
        """Forget everything (a forked child: the parent exports what it held)."""
        self._held: dict[Key, Held] = {}
        self._lock = threading.Lock()
        self._releasing = 0  # taken out and not yet handed on
        self._released = threading.Condition(self._lock)

    def __len__(self) -> int:
        return len(self._held)

    def oldest_age_s(self) -> float:
        """Seconds the oldest held item has waited (0: none held); deadlines are in order."""
        with self._lock:
            first = next(iter(self._held.values()), None)
        if first is None:
            return 0.0
        return max(0.0, self._max_wait_s - (first.deadline - time.monotonic()))

    def hold(self, key: Key, item: Any, agent: str | None,
             waiting: dict[str, OnlineScorer]) -> bool:
        """Hold `item` until the scorers `waiting` settle; False when the table is full."""
        with self._lock:
            if len(self._held) >= self._max_held:
                return False
            self._held[key] = Held(key, item, agent, waiting,
                                   time.monotonic() + self._max_wait_s)
        return True

    def waits_for(self, key: Key, scorer_id: str) -> bool:
        """Whether the item `key` is still held and waits for `scorer_id`."""
        with self._lock:
            held = self._held.get(key)
            return held is not None and scorer_id in held.waiting

    def time_left(self, key: Key) -> float | None:
        """Seconds before the item `key` is released unscored (None: not held)."""
        held = self._held.get(key)
        return None if held is None else held.deadline - time.monotonic()

    def settle(self, key: Key, events: Mapping[str, Sequence[EventPayload]]) -> bool:
        """Put the events of the scorers in `events` on the item `key` if it still waits for
        them; release it once it waits for nothing. True when any of them landed."""
        done, landed = None, False
        with self._lock:
            held = self._held.get(key)
            if held is not None:
                for scorer_id, payloads in events.items():
                    if held.waiting.pop(scorer_id, None) is not None:
                        landed = True
                        if held.events is None:
                            held.events = []
                        held.events.extend(payloads)
                if not held.waiting:
                    done = self._take(key)
        if done is not None:
            self._hand_on([done], None)
        return landed

    def expire(self) -> None:
        """Release the items whose deadline has passed (reason "timeout")."""
        now = time.monotonic()
        with self._lock:
            expired = []
            for held in self._held.values():
                if held.deadline > now:
                    break
                expired.append(held)
            for held in expired:
                self._take(held.key)
        self._hand_on(expired, reasons.TIMEOUT)

    def release_all(self, reason: str) -> None:
        """Release every held item with `reason`."""
        with self._lock:
            released = list(self._held.values())
            self._held.clear()
            self._releasing += len(released)
        self._hand_on(released, reason)

    def wait_released(self, timeout: float) -> bool:
        """Wait until every item taken out has been handed on."""
        with self._lock:
            return self._released.wait_for(lambda: not self._releasing, timeout=timeout)

    def _take(self, key: Key) -> Held | None:
        """Remove a held item for release (caller holds the lock; `_hand_on` it)."""
        held = self._held.pop(key, None)
        if held is not None:
            self._releasing += 1
        return held

    def _hand_on(self, taken: Sequence[Held], reason: str | None) -> None:
        try:
            for held in taken:
                self._release(held, reason)
        finally:
            if taken:
                with self._lock:
                    self._releasing -= len(taken)
                    if not self._releasing:
                        self._released.notify_all()
