"""`QuietTable`: groups of arrivals keyed by an id, each let go once nothing arrived for it for a
quiet period.

What the run scope (a run, keyed by its trace id, is scored once its root ended and no span of
it arrived for `quiet_s`) and the conversation scope (a conversation after a quiet period) share.
Knows nothing of spans, runs or conversations: a group is a key, the items given to it, their
size in bytes, its creation time and its deadline (last arrival + `quiet_s`).

    table = QuietTable(quiet_s=5.0, deliver=on_due)
    table.arrive(trace_id, item, size=len(body), ready=True)  # the deadline starts again
    table.touch(trace_id)                                      # an arrival without an item
    table.expire()                                             # on the owner's timer

A group leaves exactly once, through `deliver(group, reason)`, outside the table's lock:

- `QUIET`: it is `ready` and nothing arrived for it for `quiet_s` (`expire`);
- `AGE`: it is older than `max_age_s`, ready or not (`expire`);
- `OVERFLOW`: the oldest groups go first when a new group or item would pass `max_groups` or
  `max_bytes`;
- `take(key, reason)`: the owner lets it go now (e.g. a conversation's turn limit);
- `release_all(reason)`: flush, shutdown.

`ready` is False for a group that must not leave on quiet alone (a run whose root has not
arrived); it still leaves on age and overflow. Every delivery is counted by reason (`counts`).
The table has no thread: the owner calls `expire` on the timer it already runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from tracescore._exceptions import ConfigurationError

T = TypeVar("T")
_log = logging.getLogger("tracescore")

QUIET = "quiet"
AGE = "max_age"
OVERFLOW = "overflow"


@dataclass(slots=True)
class Group(Generic[T]):
    """One group: its items in arrival order, their bytes, when it began and when it is due."""

    key: Hashable
    created: float
    deadline: float
    items: list[T] = field(default_factory=list)
    bytes: int = 0
    ready: bool = False
    arrivals: int = 0


class QuietTable(Generic[T]):
    """Groups by key, each delivered once after a quiet period, within bounds (module doc)."""

    def __init__(self, *, quiet_s: float, deliver: Callable[[Group[T], str], None],
                 max_groups: int = 10_000, max_bytes: int = 64 * 1024 * 1024,
                 max_age_s: float = 3600.0, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        for name, value, least in (("quiet_s", quiet_s, 0), ("max_age_s", max_age_s, 0)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < least:
                raise ConfigurationError(f"{name} must be a number >= {least}, got {value!r}")
        for name, count in (("max_groups", max_groups), ("max_bytes", max_bytes)):
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ConfigurationError(f"{name} must be an integer >= 1, got {count!r}")
        self.quiet_s = float(quiet_s)
        self.max_groups = max_groups
        self.max_bytes = max_bytes
        self.max_age_s = float(max_age_s)
        self._deliver = deliver
        self._clock = clock
        self._groups: dict[Hashable, Group[T]] = {}  # in creation order: the oldest first
        self._bytes = 0
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()  # groups delivered, by reason

    def __len__(self) -> int:
        return len(self._groups)

    def __contains__(self, key: object) -> bool:
        return key in self._groups

    @property
    def bytes(self) -> int:
        """Bytes of the items held."""
        return self._bytes

    def arrive(self, key: Hashable, item: T | None = None, *, size: int = 0,
               ready: bool = False) -> None:
        """An arrival in group `key` (made if new): its deadline starts again; `item` (of `size`
        bytes) is added; `ready` marks the group ready to leave once quiet (it stays ready)."""
        evicted: list[Group[T]] = []
        with self._lock:
            now = self._clock()
            group = self._groups.get(key)
            if group is None:
                while len(self._groups) >= self.max_groups:
                    evicted.append(self._pop(next(iter(self._groups))))
                group = self._groups[key] = Group(key, now, now + self.quiet_s)
            group.deadline = now + self.quiet_s
            group.arrivals += 1
            group.ready = group.ready or ready
            if item is not None:
                group.items.append(item)
                group.bytes += size
                self._bytes += size
                while self._bytes > self.max_bytes and len(self._groups) > 1:
                    oldest = next(iter(self._groups))
                    if oldest == key:  # the newest group keeps its room while others go
                        oldest = next(k for k in self._groups if k != key)
                    evicted.append(self._pop(oldest))
        self._hand_on(evicted, OVERFLOW)

    def touch(self, key: Hashable) -> bool:
        """An arrival in group `key` if it is held (its deadline starts again); False if not."""
        group = self._groups.get(key)
        if group is None:
            return False
        with self._lock:
            group.deadline = self._clock() + self.quiet_s
            group.arrivals += 1
        return True

    def take(self, key: Hashable, reason: str) -> bool:
        """Deliver group `key` now with `reason`; False when it is not held."""
        with self._lock:
            group = self._groups.get(key)
            if group is not None:
                self._pop(key)
        if group is None:
            return False
        self._hand_on([group], reason)
        return True

    def expire(self) -> None:
        """Deliver the groups quiet for `quiet_s` (ready ones) or older than `max_age_s`."""
        if not self._groups:
            return
        quiet, old = [], []
        with self._lock:
            now = self._clock()
            too_old = now - self.max_age_s
            for key, group in list(self._groups.items()):
                if group.created <= too_old:
                    old.append(self._pop(key))
                elif group.ready and group.deadline <= now:
                    quiet.append(self._pop(key))
        self._hand_on(old, AGE)
        self._hand_on(quiet, QUIET)

    def release_all(self, reason: str) -> None:
        """Deliver every group with `reason` (flush, shutdown)."""
        with self._lock:
            groups = list(self._groups.values())
            self._groups.clear()
            self._bytes = 0
        self._hand_on(groups, reason)

    def _pop(self, key: Hashable) -> Group[T]:
        """(Caller holds the lock.)"""
        group = self._groups.pop(key)
        self._bytes -= group.bytes
        return group

    def _hand_on(self, groups: list[Group[T]], reason: str) -> None:
        if not groups:
            return
        with self._lock:
            self.counts[reason] += len(groups)
        for group in groups:
            try:
                self._deliver(group, reason)
            except Exception:  # noqa: BLE001 - one group must not keep the others in
                _log.warning("tracescore: could not let a group go", exc_info=True)
