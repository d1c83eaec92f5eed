"""The record's SQLite file: one row per crossing, the read position of each objects stream, and the
crossings counted per minute.

- A crossing's identity is its objects stream entry: `(camera, entry_ms, entry_seq)` is the primary
  key and rows are written with `INSERT OR IGNORE`, so an entry read twice (a crash between the
  insert and the position, a rebuild) is stored once.
- The positions (`positions`: stream -> the last entry ID read) are written in the same transaction
  as the rows they cover: after a crash the record continues where its last commit ended; without a
  file (deleted, lost) it starts from each stream's first entry and rebuilds what the streams hold.
- `minute_counts` holds each (camera, line, direction, minute)'s number of crossings, kept by
  triggers on insert and delete, so `counts()` over a week reads about 10,000 rows per line instead
  of every crossing. Buckets are made from minutes (`daemon.ops.review.buckets`, with
  `daemon.core.shifts.bucket_start`: local time, shifts start on a minute); a range that does not
  start or end on a minute counts its edge minutes from the crossings themselves.
- Pages are newest first in the order `(at_ms, camera, entry_ms, entry_seq)`, descending; the cursor
  is that key of the page's last row, so following it visits each crossing of the range once, also
  across a rebuild of the file.

Not thread-safe: a `Store` is used from one thread (the record keeps one for writing and one for
reading, each on its own thread; SQLite's WAL lets the reader read while the writer writes).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import time
from pathlib import Path
from time import monotonic, sleep
from typing import Any

from daemon.core.shifts import Bucket
from daemon.ops.review.buckets import Span, bucket_counts, chunk_ms

MINUTE_MS = 60_000
BUSY_S = 30.0
"""How long a connection waits for another's lock (SQLite's busy handler, and the set-up's retries)."""
BUSY_RETRY_S = 0.05
SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS crossings (
    camera TEXT NOT NULL,
    entry_ms INTEGER NOT NULL,
    entry_seq INTEGER NOT NULL,
    at_ms INTEGER NOT NULL,
    line TEXT NOT NULL,
    direction TEXT NOT NULL,
    label TEXT NOT NULL,
    cls INTEGER NOT NULL,
    score REAL NOT NULL,
    track INTEGER NOT NULL,
    count INTEGER NOT NULL,
    speed_px_s REAL,
    speed_mm_s REAL,
    eta TEXT,
    snapshot TEXT,
    clip TEXT,
    clip_offset_ms INTEGER,
    box TEXT,
    frame_w INTEGER,
    frame_h INTEGER,
    line_xy TEXT,
    PRIMARY KEY (camera, entry_ms, entry_seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS crossings_by_time ON crossings (at_ms);
CREATE INDEX IF NOT EXISTS crossings_by_camera ON crossings (camera, at_ms);
CREATE INDEX IF NOT EXISTS crossings_by_camera_line ON crossings (camera, line, at_ms);
CREATE INDEX IF NOT EXISTS crossings_by_line ON crossings (line, at_ms);
CREATE INDEX IF NOT EXISTS crossings_by_label ON crossings (label, at_ms);
CREATE TABLE IF NOT EXISTS positions (stream TEXT PRIMARY KEY, last_id TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS minute_counts (
    camera TEXT NOT NULL,
    line TEXT NOT NULL,
    minute_ms INTEGER NOT NULL,
    direction TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (camera, line, minute_ms, direction)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS crossings_counted AFTER INSERT ON crossings BEGIN
    INSERT INTO minute_counts VALUES (NEW.camera, NEW.line, NEW.at_ms - NEW.at_ms % 60000, NEW.direction, 1)
    ON CONFLICT DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS crossings_uncounted AFTER DELETE ON crossings BEGIN
    UPDATE minute_counts SET n = n - 1 WHERE camera = OLD.camera AND line = OLD.line
        AND minute_ms = OLD.at_ms - OLD.at_ms % 60000 AND direction = OLD.direction;
END;
"""

COLUMNS = (
    "camera", "entry_ms", "entry_seq", "at_ms", "line", "direction", "label", "cls", "score", "track", "count",
    "speed_px_s", "speed_mm_s", "eta", "snapshot", "clip", "clip_offset_ms", "box", "frame_w", "frame_h", "line_xy",
)  # fmt: skip
INSERT = f"INSERT OR IGNORE INTO crossings ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
_ORDER = "ORDER BY at_ms DESC, camera DESC, entry_ms DESC, entry_seq DESC"
MAX_LIMIT = 1000
"""The most crossings one page of the API holds."""


@dataclass(frozen=True, slots=True)
class Crossing:
    """One recorded crossing: the `crossed` entry's fields, its entry ID, and the part's box on the frame
    the crossing was found on (from the detections stream; None when that entry was already trimmed)."""

    camera: str
    entry_ms: int
    entry_seq: int
    at_ms: int
    line: str
    direction: str
    label: str
    cls: int
    score: float
    track: int
    count: int
    speed_px_s: float | None = None
    speed_mm_s: float | None = None
    eta: str | None = None
    """Compact JSON gate id -> Unix ms, as the stream has it."""
    snapshot: str | None = None
    clip: str | None = None
    clip_offset_ms: int | None = None
    box: str | None = None
    """JSON [x1, y1, x2, y2] in camera pixels."""
    frame_w: int | None = None
    frame_h: int | None = None
    line_xy: str | None = None
    """JSON [[x, y], [x, y]]: the line's start and end (fractions of the frame) when it was recorded."""

    @property
    def entry_id(self) -> str:
        return f"{self.entry_ms}-{self.entry_seq}"

    def row(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in COLUMNS)

    def to_json(self) -> dict[str, Any]:
        """What `GET /api/crossings` answers per crossing."""
        return {
            "id": f"{self.camera}/{self.entry_id}",
            "entry": self.entry_id,
            "camera": self.camera,
            "line": self.line,
            "direction": self.direction,
            "label": self.label,
            "cls": self.cls,
            "score": self.score,
            "track": self.track,
            "count": self.count,
            "at_ms": self.at_ms,
            "speed_px_s": self.speed_px_s,
            "speed_mm_s": self.speed_mm_s,
            "eta": None if self.eta is None else json.loads(self.eta),
            "snapshot": self.snapshot,
            "clip": self.clip,
            "clip_offset_ms": self.clip_offset_ms,
            "box": None if self.box is None else json.loads(self.box),
            "w": self.frame_w,
            "h": self.frame_h,
            "line_xy": None if self.line_xy is None else json.loads(self.line_xy),
        }


@dataclass(frozen=True, slots=True)
class Filters:
    """What `crossings()` and `counts()` select: each field None selects all; `since` inclusive, `until`
    exclusive (ms since the epoch)."""

    camera: str | None = None
    line: str | None = None
    label: str | None = None
    direction: str | None = None
    since: int | None = None
    until: int | None = None

    def where(self) -> tuple[list[str], list[Any]]:
        clauses: list[str] = []
        args: list[Any] = []
        for name in ("camera", "line", "label", "direction"):
            value = getattr(self, name)
            if value is not None:
                clauses.append(f"{name} = ?")
                args.append(value)
        if self.since is not None:
            clauses.append("at_ms >= ?")
            args.append(self.since)
        if self.until is not None:
            clauses.append("at_ms < ?")
            args.append(self.until)
        return clauses, args


Cursor = tuple[int, str, int, int]
"""(at_ms, camera, entry_ms, entry_seq) of the last crossing of a page."""


class Store:
    """The record's file (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        if str(path) != ":memory:":
            path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), timeout=BUSY_S, check_same_thread=False, isolation_level=None)
        try:
            self._set_up(monotonic() + BUSY_S)
        except BaseException:
            self._db.close()
            raise

    def _set_up(self, deadline: float) -> None:
        """WAL, and the schema where the file has none. Two connections opening a new file at once (the
        recorder's and the API reader's) can race here: while one still holds the file in its first,
        rollback-journal mode, SQLite answers the other's journal-mode change with `SQLITE_BUSY` at once,
        without its busy handler (waiting could deadlock). That answer is retried until `deadline`."""
        while True:
            try:
                self._db.execute("PRAGMA journal_mode = WAL")
                self._db.execute("PRAGMA synchronous = NORMAL")
                if self._db.execute("PRAGMA user_version").fetchone()[0] == 0:  # IF NOT EXISTS: redone after a crash
                    self._db.executescript(SCHEMA + f"PRAGMA user_version = {SCHEMA_VERSION};")
                return
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or monotonic() >= deadline:
                    raise
                sleep(BUSY_RETRY_S)

    def close(self) -> None:
        self._db.close()

    # -- writing ---------------------------------------------------------------------------
    def record(self, crossings: Iterable[Crossing], positions: Mapping[str, str]) -> int:
        """Store `crossings` (those already stored are skipped) and the streams' new positions, in one
        transaction; returns how many were new."""
        with self._transaction():
            inserted = self._db.executemany(INSERT, (c.row() for c in crossings)).rowcount  # the triggers' not counted
            self._db.executemany(
                "INSERT INTO positions VALUES (?, ?) ON CONFLICT DO UPDATE SET last_id = excluded.last_id",
                positions.items(),
            )
        return max(0, inserted)

    def positions(self) -> dict[str, str]:
        return dict(self._db.execute("SELECT stream, last_id FROM positions").fetchall())

    def prune(self, before_ms: int) -> int:
        """Remove the crossings before `before_ms` (rounded down to a minute, so each minute's count
        goes with all its crossings); returns how many."""
        cutoff = before_ms - before_ms % MINUTE_MS
        with self._transaction():
            removed = self._db.execute("DELETE FROM crossings WHERE at_ms < ?", (cutoff,)).rowcount
            self._db.execute("DELETE FROM minute_counts WHERE n <= 0 OR minute_ms < ?", (cutoff,))
        return int(removed)

    def lines(self) -> list[tuple[str, str]]:
        """The (camera, line) pairs with a crossing on record."""
        rows = self._db.execute("SELECT DISTINCT camera, line FROM minute_counts WHERE n > 0 ORDER BY camera, line")
        return [(str(c), str(ln)) for c, ln in rows.fetchall()]

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)

    # -- reading ---------------------------------------------------------------------------
    def crossings(self, filters: Filters, limit: int, after: Cursor | None = None) -> list[Crossing]:
        """Up to `limit` crossings, newest first, older than `after` (a page's last key)."""
        clauses, args = filters.where()
        if after is not None:
            clauses.append("at_ms <= ? AND (at_ms, camera, entry_ms, entry_seq) < (?, ?, ?, ?)")
            args.extend([after[0], *after])
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._db.execute(
            f"SELECT {', '.join(COLUMNS)} FROM crossings {where} {_ORDER} LIMIT ?",
            [*args, max(1, min(limit, MAX_LIMIT + 1))],  # one more: whether a next page exists
        ).fetchall()
        return [Crossing(*row) for row in rows]

    def counts(self, filters: Filters, bucket: Bucket, shifts: Sequence[time] = ()) -> list[tuple[int, dict[str, int]]]:
        """(bucket start ms, {"in": N, "out": M}) per bucket holding a crossing of `filters`, oldest first."""
        span = chunk_ms(bucket, shifts)

        def minutes(start: int, direction: str) -> list[Span]:
            """A chunk's minutes, for a chunk that straddles two buckets."""
            since = start if filters.since is None else max(start, filters.since)
            until = start + span if filters.until is None else min(start + span, filters.until)
            scope = Filters(filters.camera, filters.line, filters.label, direction, since, until)
            return self._spans(scope, MINUTE_MS)

        return bucket_counts(self._spans(filters, span), bucket, shifts, minutes)

    def _spans(self, filters: Filters, span_ms: int) -> list[Span]:
        """(start, length, direction, crossings) per chunk of `span_ms` from the minute counts, the range's
        partial edge minutes counted from the crossings (all of it from the crossings with a `label`: the
        minute counts are per line)."""
        if filters.label is not None:
            return self._counted(filters, filters.since, filters.until, span_ms)
        scope = Filters(filters.camera, filters.line, None, filters.direction)
        clauses, args = scope.where()
        edges: list[tuple[int, int]] = []
        if filters.since is not None:
            first = -(-filters.since // MINUTE_MS) * MINUTE_MS  # the first whole minute
            clauses.append("minute_ms >= ?")
            args.append(first)
            if first != filters.since:
                edges.append((filters.since, first if filters.until is None else min(first, filters.until)))
        if filters.until is not None:
            last = filters.until - filters.until % MINUTE_MS  # the minute `until` falls in, not whole
            clauses.append("minute_ms < ?")
            args.append(last)
            if last != filters.until and (filters.since is None or last >= filters.since):
                edges.append((last if filters.since is None else max(last, filters.since), filters.until))
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows: list[Span] = [
            (int(t), span_ms, str(d), int(n))
            for t, d, n in self._db.execute(
                f"SELECT minute_ms - minute_ms % ? AS t, direction, SUM(n) FROM minute_counts {where}"
                " GROUP BY t, direction",
                [span_ms, *args],
            ).fetchall()
            if n
        ]
        for since, until in dict.fromkeys(edges):
            rows.extend(self._counted(scope, since, until, MINUTE_MS))
        return rows

    def _counted(self, filters: Filters, since: int | None, until: int | None, span_ms: int) -> list[Span]:
        clauses, args = Filters(filters.camera, filters.line, filters.label, filters.direction, since, until).where()
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        return [
            (int(t), span_ms, str(d), int(n))
            for t, d, n in self._db.execute(
                f"SELECT at_ms - at_ms % ? AS t, direction, COUNT(*) FROM crossings {where} GROUP BY t, direction",
                [span_ms, *args],
            ).fetchall()
        ]


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on an exception), on a connection in autocommit mode."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        if not self._db.in_transaction:
            self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, _exc: object, _tb: object) -> None:
        if not self._db.in_transaction:
            return
        self._db.execute("ROLLBACK" if kind is not None else "COMMIT")


__all__ = ["COLUMNS", "INSERT", "MAX_LIMIT", "SCHEMA", "Crossing", "Cursor", "Filters", "Store"]
