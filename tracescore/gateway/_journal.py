"""The gateway's journal: accepted spans (and log records, `logs`) not yet forwarded, in SQLite
(WAL mode), replayed at start.

A request is written (and committed) before it is acknowledged, and deleted once the next hop
has acknowledged it, so a crash between the two loses nothing: the next start forwards it again
(at least once; a crash after forwarding and before the delete sends it twice). A request the
next hop took before it was acknowledged (the inline send) is never written.

It also keeps the turns of the conversations a conversation-scope scorer follows (`turns`, one
row per turn, written before its request is acknowledged, marked `scored` once a version holding
it delivered its results), so a restart rebuilds the conversations where they were; a turn's row
goes once its conversation was let go and its last version delivered (`settle`).

Space: the file is `auto_vacuum=INCREMENTAL` (an older file is converted once, at open) and its
free pages are given back once they pass a quarter of the file (`RECLAIM_BYTES` at least); the
WAL is cut back to `WAL_LIMIT_BYTES` after each checkpoint.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import Counter
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
_LOGS = ("CREATE TABLE IF NOT EXISTS logs (id INTEGER PRIMARY KEY, kind INTEGER NOT NULL, "
         "count INTEGER NOT NULL, body BLOB NOT NULL)")  # kind: always PASS
_TURNS = ("CREATE TABLE IF NOT EXISTS turns (id INTEGER PRIMARY KEY, conversation TEXT NOT NULL, "
          "body TEXT NOT NULL, scored INTEGER NOT NULL DEFAULT 0)")
RECLAIM_BYTES = 4 * 1024 * 1024  # free pages given back past this (and a quarter of the file)
WAL_LIMIT_BYTES = 4 * 1024 * 1024
_CHECK_EVERY = 512  # deleted rows between two looks at the free pages


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
            if int(db.execute("PRAGMA auto_vacuum").fetchone()[0]) != 2:
                db.execute("PRAGMA auto_vacuum=INCREMENTAL")  # new files; older ones need:
                db.execute("VACUUM")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={sync.upper()}")
            db.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
            db.execute(_SCHEMA)
            db.execute(_TURNS)
            db.execute(_LOGS)
            _upgrade_turns(db)
            db.execute("BEGIN IMMEDIATE")  # takes the exclusive lock now, not at the first write
            db.execute("COMMIT")
        except (OSError, sqlite3.Error) as exc:
            hint = " (is another gateway using it?)" if "locked" in str(exc) else ""
            raise ConfigurationError(
                f"journal.path: cannot open the journal {str(self.path)!r}: {exc}{hint}"
            ) from None
        self._db: sqlite3.Connection | None = db
        self._deleted = 0  # rows deleted since the last look at the free pages

    def add(self, entries: Iterable[tuple[int, int, bytes]]) -> list[int]:
        """Write (kind, count, body) rows in one transaction; their ids, in order."""
        return self._add("spans", entries)

    def remove(self, ids: Iterable[int]) -> None:
        """Delete rows the next hop has acknowledged."""
        self._remove("spans", ids)

    @property
    def logs(self) -> LogRows:
        """The log requests' rows (what a logs `Forwarder` is given as its journal)."""
        return LogRows(self)

    def _add(self, table: str, entries: Iterable[tuple[int, int, bytes]]) -> list[int]:
        with self._lock:
            db = self._live()
            db.execute("BEGIN")
            try:
                ids = [int(db.execute(f"INSERT INTO {table} (kind, count, body) VALUES (?, ?, ?)",
                                      entry).lastrowid or 0) for entry in entries]
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        return ids

    def _remove(self, table: str, ids: Iterable[int]) -> None:
        rows = [(i,) for i in ids]
        if not rows:
            return
        with self._lock:
            db = self._live()
            db.execute("BEGIN")
            db.executemany(f"DELETE FROM {table} WHERE id = ?", rows)
            db.execute("COMMIT")
            self._deleted_some(db, len(rows))

    def _entries(self, table: str) -> Iterator[Entry]:
        with self._lock:
            rows = self._live().execute(
                f"SELECT id, kind, count, body FROM {table} ORDER BY id").fetchall()
        for row in rows:
            yield Entry(int(row[0]), int(row[1]), int(row[2]), bytes(row[3]))

    @property
    def changes(self) -> int:
        """Rows inserted or deleted since the journal was opened."""
        with self._lock:
            return int(self._live().total_changes)

    def entries(self) -> Iterator[Entry]:
        """Every row, oldest first (for the replay at start)."""
        return self._entries("spans")

    def pending(self) -> int:
        """Spans in the journal."""
        with self._lock:
            return int(self._live().execute("SELECT COALESCE(SUM(count), 0) FROM spans").fetchone()[0])

    # --- conversations (a `TurnStore`) ------------------------------------------------------
    def add_turn(self, conversation: str, turn: Mapping[str, Any]) -> int:
        """Keep one turn of `conversation`; its row id."""
        body = json.dumps(turn, default=str, ensure_ascii=False)
        with self._lock:
            return int(self._live().execute("INSERT INTO turns (conversation, body) VALUES (?, ?)",
                                            (conversation, body)).lastrowid or 0)

    def settle(self, scored: Iterable[int], drop: Iterable[int]) -> None:
        """Mark rows whose version delivered its results, delete rows let go (one transaction)."""
        marked, dropped = [(r,) for r in scored], [(r,) for r in drop]
        if not marked and not dropped:
            return
        with self._lock:
            db = self._live()
            db.execute("BEGIN")
            try:
                db.executemany("UPDATE turns SET scored = 1 WHERE id = ?", marked)
                db.executemany("DELETE FROM turns WHERE id = ?", dropped)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            self._deleted_some(db, len(dropped))

    def conversations(self) -> Iterator[tuple[str, list[dict[str, Any]], int]]:
        """(conversation, its turns in order, 0) of every kept one, the oldest conversation
        first; each turn names its `row` and whether it was `scored`."""
        with self._lock:
            rows = self._live().execute(
                "SELECT id, conversation, body, scored FROM turns ORDER BY id").fetchall()
        turns: dict[str, list[dict[str, Any]]] = {}
        for row, conversation, body, scored in rows:
            turn = json.loads(body)
            turn["row"], turn["scored"] = int(row), bool(scored)
            turns.setdefault(str(conversation), []).append(turn)
        for conversation, kept in turns.items():
            yield conversation, kept, 0

    def size(self) -> tuple[int, int]:
        """(bytes of the file's pages, bytes of them free)."""
        with self._lock:
            db = self._live()
            page = int(db.execute("PRAGMA page_size").fetchone()[0])
            return (page * int(db.execute("PRAGMA page_count").fetchone()[0]),
                    page * int(db.execute("PRAGMA freelist_count").fetchone()[0]))

    def _deleted_some(self, db: sqlite3.Connection, rows: int) -> None:
        """(Caller holds the lock.) Give free pages back once they pass a quarter of the file."""
        self._deleted += rows
        if self._deleted < _CHECK_EVERY:
            return
        self._deleted = 0
        pages = int(db.execute("PRAGMA page_count").fetchone()[0])
        free = int(db.execute("PRAGMA freelist_count").fetchone()[0])
        page = int(db.execute("PRAGMA page_size").fetchone()[0])
        if free * page >= RECLAIM_BYTES and free * 4 >= pages:
            db.executescript("PRAGMA incremental_vacuum;")  # (execute() frees one page)

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


class LogRows:
    """The journal's OTLP log requests (table `logs`), written before they are acknowledged and
    deleted once the next hop has them, as spans are."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    def add(self, count: int, body: bytes) -> int:
        """Write one serialized ExportLogsServiceRequest of `count` records; its row id."""
        return self._journal._add("logs", [(PASS, count, body)])[0]

    def remove(self, ids: Iterable[int]) -> None:
        self._journal._remove("logs", ids)

    def entries(self) -> Iterator[Entry]:
        """Every log request kept, oldest first (for the replay at start)."""
        return self._journal._entries("logs")


def _upgrade_turns(db: sqlite3.Connection) -> None:
    """A journal from before turns were marked one by one: its counts become marks."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(turns)")}
    if "scored" not in columns:
        db.execute("ALTER TABLE turns ADD COLUMN scored INTEGER NOT NULL DEFAULT 0")
    old = db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                     "AND name = 'conversations'").fetchone()
    if old is None:
        return
    counts = dict(db.execute("SELECT conversation, scored FROM conversations").fetchall())
    marked: list[tuple[int]] = []
    seen: Counter[str] = Counter()
    for row, conversation in db.execute("SELECT id, conversation FROM turns ORDER BY id"):
        seen[conversation] += 1
        if seen[conversation] <= int(counts.get(conversation, 0)):
            marked.append((int(row),))
    db.execute("BEGIN")
    db.executemany("UPDATE turns SET scored = 1 WHERE id = ?", marked)
    db.execute("DROP TABLE conversations")
    db.execute("COMMIT")
