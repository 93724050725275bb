"""The gateway's journal: accepted spans not yet forwarded, in SQLite (WAL mode), replayed at start.

A request is written (and committed) before it is acknowledged, and deleted once the next hop
has acknowledged it, so a crash between the two loses nothing: the next start forwards it again
(at least once; a crash after forwarding and before the delete sends it twice). A request the
next hop took before it was acknowledged (the inline send) is never written.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tracescore._exceptions import ConfigurationError

PASS = 0  # spans forwarded as they came
HELD = 1  # one agent span held for scoring

SYNC_MODES = ("normal", "full")
_SCHEMA = ("CREATE TABLE IF NOT EXISTS spans (id INTEGER PRIMARY KEY, kind INTEGER NOT NULL, "
           "count INTEGER NOT NULL, body BLOB NOT NULL)")


@dataclass(frozen=True, slots=True)
class Entry:
    """One journaled request: its row id, kind, span count and serialized ExportTraceServiceRequest."""

    id: int
    kind: int
    count: int
    body: bytes


class Journal:
    """Thread-safe SQLite journal owned by one gateway process (an exclusive lock keeps a second
    gateway off the same file). `sync="full"` also survives power loss; "normal" survives crashes
    of the process (SIGKILL), which is cheaper."""

    def __init__(self, path: str | Path, *, sync: str = "full") -> None:
        if sync not in SYNC_MODES:
            raise ConfigurationError(f"journal.sync must be one of {', '.join(SYNC_MODES)}, "
                                     f"got {sync!r}")
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA locking_mode=EXCLUSIVE")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={sync.upper()}")
            db.execute(_SCHEMA)
            db.execute("BEGIN IMMEDIATE")  # takes the exclusive lock now, not at the first write
            db.execute("COMMIT")
        except (OSError, sqlite3.Error) as exc:
            hint = " (is another gateway using it?)" if "locked" in str(exc) else ""
            raise ConfigurationError(
                f"journal.path: cannot open the journal {str(self.path)!r}: {exc}{hint}"
            ) from None
        self._db: sqlite3.Connection | None = db

    def add(self, entries: Iterable[tuple[int, int, bytes]]) -> list[int]:
        """Write (kind, count, body) rows in one transaction; their ids, in order."""
        with self._lock:
            db = self._live()
            db.execute("BEGIN")
            try:
                ids = [int(db.execute("INSERT INTO spans (kind, count, body) VALUES (?, ?, ?)",
                                      entry).lastrowid or 0) for entry in entries]
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        return ids

    def remove(self, ids: Iterable[int]) -> None:
        """Delete rows the next hop has acknowledged."""
        rows = [(i,) for i in ids]
        if not rows:
            return
        with self._lock:
            db = self._live()
            db.execute("BEGIN")
            db.executemany("DELETE FROM spans WHERE id = ?", rows)
            db.execute("COMMIT")

    @property
    def changes(self) -> int:
        """Rows inserted or deleted since the journal was opened."""
        with self._lock:
            return int(self._live().total_changes)

    def entries(self) -> Iterator[Entry]:
        """Every row, oldest first (for the replay at start)."""
        with self._lock:
            rows = self._live().execute("SELECT id, kind, count, body FROM spans ORDER BY id").fetchall()
        for row in rows:
            yield Entry(int(row[0]), int(row[1]), int(row[2]), bytes(row[3]))

    def pending(self) -> int:
        """Spans in the journal."""
        with self._lock:
            return int(self._live().execute("SELECT COALESCE(SUM(count), 0) FROM spans").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            db, self._db = self._db, None
        if db is not None:
            try:
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass
            db.close()

    def _live(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("the journal is closed")
        return self._db
