"""Which kept turns a store (the gateway's journal) may mark scored or delete, for the
conversation scope.

A turn's row is marked scored once a version holding it has delivered its results (not when its
jobs are queued: a version under way at a crash is scored again after the restart), and deleted
once its conversation let it go *and* no version holding it is still being scored. Rows of turns
still on their way to the tracker are never touched: only rows it names go.

    flight = ledger.launch(rows)   # a version of these rows is being scored (one guard held)
    flight.add()                   # ... one more job of it
    flight.land()                  # a job delivered (and the guard, once queued): the last marks
    ledger.release(rows)           # the conversation let these go: deleted now or once landed
    ledger.write()                 # on the timer: the deletions gathered, in one transaction

While `gathering` (the tracker's timer tick, a restart restoring thousands of conversations)
landings wait for `write` too, so all of it is one transaction.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Protocol


class RowStore(Protocol):
    """What the ledger writes to: rows marked scored, rows deleted, in one transaction."""

    def settle(self, scored: Iterable[int], drop: Iterable[int]) -> None: ...


class Flight:
    """One version being scored: lands (marks its rows) when its last job delivered."""

    def __init__(self, ledger: TurnLedger, rows: tuple[int, ...]) -> None:
        self._ledger = ledger
        self.rows = rows
        self._jobs = 1  # the guard, released by `land()` once the jobs are queued
        self._lock = threading.Lock()

    def add(self) -> None:
        """One more job of this version was queued."""
        with self._lock:
            self._jobs += 1

    def land(self) -> None:
        """A job delivered its results (or was dropped, counted), or the guard went."""
        with self._lock:
            self._jobs -= 1
            last = self._jobs == 0
        if last:
            self._ledger.landed(self.rows)


class TurnLedger:
    """Rows in flight and rows let go, for one store (module doc). Thread-safe: versions land
    on the worker threads, conversations are let go on the timer."""

    def __init__(self, store: RowStore, failed: Callable[[], None]) -> None:
        self._store = store
        self._failed = failed  # a store write failed (counted by the owner)
        self._lock = threading.Lock()
        self._flying: Counter[int] = Counter()  # row -> versions under way holding it
        self._released: set[int] = set()  # let go while in flight: deleted once landed
        self._drop: list[int] = []  # let go, not in flight: deleted at the next `write`
        self._marks: list[int] = []  # landed while gathering: marked at the next `write`
        self.gathering = False

    def launch(self, rows: Iterable[int]) -> Flight:
        held = tuple(r for r in rows if r)
        with self._lock:
            self._flying.update(held)
        return Flight(self, held)

    def landed(self, rows: tuple[int, ...]) -> None:
        drop = []
        with self._lock:
            for row in rows:
                self._flying[row] -= 1
                if self._flying[row] <= 0:
                    del self._flying[row]
                    if row in self._released:
                        self._released.discard(row)
                        drop.append(row)
            if self.gathering:
                self._marks.extend(rows)
                self._drop.extend(drop)
                return
        self._settle(rows, drop)

    def release(self, rows: Iterable[int]) -> None:
        """The tracker let these rows' turns go (a bound, a duplicate)."""
        with self._lock:
            for row in rows:
                if not row:
                    continue
                if row in self._flying:
                    self._released.add(row)
                else:
                    self._drop.append(row)

    def write(self) -> None:
        """Delete the rows let go (and mark those landed while gathering) since the last call,
        in one transaction."""
        with self._lock:
            drop, self._drop = self._drop, []
            marks, self._marks = self._marks, []
        if drop or marks:
            self._settle(marks, drop)

    @property
    def flying(self) -> int:
        """Rows held by versions under way."""
        return len(self._flying)

    def _settle(self, scored: Iterable[int], drop: Iterable[int]) -> None:
        try:
            self._store.settle(scored, drop)
        except Exception:  # noqa: BLE001 - the rows stay: scored again after a restart
            self._failed()
