"""The gateway's journal: accepted spans not yet forwarded, in SQLite (WAL mode), replayed at start.

A request is written (and committed) before it is acknowledged, and deleted once the next hop
has acknowledged it, so a crash between the two loses nothing: the next start forwards it again
(at least once; a crash after forwarding and before the delete sends it twice). A request the
next hop took before it was acknowledged (the inline send) is never written.

It also keeps the turns of the conversations a conversation-scope scorer follows (`turns`, one
row per turn, written before its request is acknowledged) and how many turns of each were
scored (`conversations`), so a restart rebuilds the conversations where they were; a
conversation's rows go when the gateway lets it go.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracescore._exceptions import ConfigurationError
from tracescore._private_files import make_private

PASS = 0  # spans forwarded as they came
HELD = 1  # one agent span held for scoring

SYNC_MODES = ("normal", "full")
_SCHEMA = ("CREATE TABLE IF NOT EXISTS spans (id INTEGER PRIMARY KEY, kind INTEGER NOT NULL, "
           "count INTEGER NOT NULL, body BLOB NOT NULL)")
_TURNS = ("CREATE TABLE IF NOT EXISTS turns (id INTEGER PRIMARY KEY, conversation TEXT NOT NULL, "
          "body TEXT NOT NULL)")
_SCORED = ("CREATE TABLE IF NOT EXISTS conversations (conversation TEXT PRIMARY KEY, "
           "scored INTEGER NOT NULL)")


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
            make_private(self.path)  # spans, prompts and answers: the owner's alone (0600)
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA locking_mode=EXCLUSIVE")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={sync.upper()}")
            db.execute(_SCHEMA)
            db.execute(_TURNS)
            db.execute(_SCORED)
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

    # --- conversations (a `TurnStore`) ------------------------------------------------------
    def add_turn(self, conversation: str, turn: Mapping[str, Any]) -> None:
        """Keep one turn of `conversation`."""
        body = json.dumps(turn, default=str, ensure_ascii=False)
        with self._lock:
            self._live().execute("INSERT INTO turns (conversation, body) VALUES (?, ?)",
                                 (conversation, body))

    def scored(self, conversation: str, turns: int) -> None:
        """The first `turns` turns of `conversation` were scored."""
        with self._lock:
            self._live().execute("INSERT OR REPLACE INTO conversations VALUES (?, ?)",
                                 (conversation, turns))

    def forget(self, conversation: str) -> None:
        """`conversation` was let go: its turns go."""
        with self._lock:
            db = self._live()
            db.execute("BEGIN")
            db.execute("DELETE FROM turns WHERE conversation = ?", (conversation,))
            db.execute("DELETE FROM conversations WHERE conversation = ?", (conversation,))
            db.execute("COMMIT")

    def conversations(self) -> Iterator[tuple[str, list[dict[str, Any]], int]]:
        """(conversation, its turns in order, how many were scored) of every kept one."""
        with self._lock:
            db = self._live()
            rows = db.execute("SELECT conversation, body FROM turns ORDER BY id").fetchall()
            scored = dict(db.execute("SELECT conversation, scored FROM conversations").fetchall())
        turns: dict[str, list[dict[str, Any]]] = {}
        for conversation, body in rows:
            turns.setdefault(str(conversation), []).append(json.loads(body))
        for conversation, kept in turns.items():
            yield conversation, kept, int(scored.get(conversation, 0))

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
