"""Reconciled counts that persist: per hour and per shift, the camera's and the plant's side by side.

One SQLite file, `<state_dir>/reconcile.sqlite` (WAL, `synchronous=FULL`: a committed flush survives a
power cut), so the counts outlive restarts of the daemon, the bridge and Redis. Two tables:

- `counts(key, bucket, start_ms, vision, reference)`: `bucket` is `1h` or `shift` (with `[bridge]
  shifts`), `start_ms` the bucket's start from `daemon.core.shifts.bucket_start`. The camera's
  crossings are counted at their time plus the lag (when they reach the photo-eye), the counter's
  increase at the reading that showed it, so both sides of a bucket count the same parts.
- `windows(key, start_ms, end_ms, lag_ms, vision, reference, allowed, crossings)`: every window that
  disagreed, with the crossings in it (`evidence_label`: each one's stream id, snapshot and clip with
  the crossing's offset in it): the evidence for the shift report (CSV, and the page `report_page`).

`add_*` only add to memory; `flush` (run in a thread by the service, every few seconds and at stop)
writes them in one transaction. What was added but not flushed when the process dies is lost.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import threading
from collections import defaultdict
from collections.abc import Sequence
from datetime import time, tzinfo
from pathlib import Path
from typing import Any

from daemon.bridge.reconcile import Window
from daemon.bridge.state import Crossing
from daemon.core.shifts import Bucket, bucket_start

SCHEMA = """
CREATE TABLE IF NOT EXISTS counts (
    key TEXT NOT NULL, bucket TEXT NOT NULL, start_ms INTEGER NOT NULL,
    vision INTEGER NOT NULL DEFAULT 0, reference INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (key, bucket, start_ms));
CREATE TABLE IF NOT EXISTS windows (
    key TEXT NOT NULL, start_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL, lag_ms INTEGER NOT NULL,
    vision INTEGER NOT NULL, reference INTEGER NOT NULL, allowed REAL NOT NULL, crossings TEXT NOT NULL,
    PRIMARY KEY (key, end_ms));
"""
REPORT_FIELDS = ("key", "start_ms", "end_ms", "lag_ms", "vision", "reference", "drift", "allowed", "crossings")


def evidence_label(crossing: Crossing) -> str:
    """What a window keeps of one crossing: JSON with `id` (its objects-stream entry) and, where the
    entry has them, `snapshot`, `clip` and `clip_offset_ms`."""
    out: dict[str, Any] = {"id": crossing.entry_id}
    if crossing.snapshot:
        out["snapshot"] = crossing.snapshot
    if crossing.clip:
        out |= {"clip": crossing.clip, "clip_offset_ms": crossing.clip_offset_ms}
    return json.dumps(out, separators=(",", ":"), sort_keys=True)


def evidence(label: str) -> dict[str, Any]:
    """`evidence_label` read back; a label written before clips existed (`<id>[ <snapshot>]`) too."""
    if label.startswith("{"):
        found: dict[str, Any] = json.loads(label)
        return found
    entry_id, _, snapshot = label.partition(" ")
    return {"id": entry_id, **({"snapshot": snapshot} if snapshot else {})}


def evidence_text(item: dict[str, Any]) -> str:
    """One crossing in the CSV: its id, then `snapshot=<path>` and `clip=<path>#t=<seconds>` where it has them."""
    parts = [str(item["id"])]
    if item.get("snapshot"):
        parts.append(f"snapshot={item['snapshot']}")
    if item.get("clip"):
        parts.append(f"clip={item['clip']}#t={int(item.get('clip_offset_ms', 0)) / 1000:.1f}")
    return " ".join(parts)


class CountsStore:
    def __init__(self, path: Path, shifts: Sequence[time] = (), tz: tzinfo | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.shifts = tuple(shifts)
        self.tz = tz
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA)
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, Bucket, int], list[int]] = defaultdict(lambda: [0, 0])
        self._windows: list[tuple[str, Window]] = []

    @property
    def buckets(self) -> tuple[Bucket, ...]:
        return ("1h", "shift") if self.shifts else ("1h",)

    def add(self, key: str, at_ms: int, *, vision: int = 0, reference: int = 0) -> None:
        with self._lock:
            for bucket in self.buckets:
                cell = self._counts[(key, bucket, bucket_start(at_ms, bucket, self.shifts, self.tz))]
                cell[0] += vision
                cell[1] += reference

    def add_window(self, key: str, window: Window) -> None:
        with self._lock:
            self._windows.append((key, window))

    def flush(self) -> int:
        """Write what was added since the last flush (one transaction); the rows written. OSError or
        sqlite3.Error when the disk refuses: what was added is kept for the next flush."""
        with self._lock:
            counts, windows = dict(self._counts), list(self._windows)
            self._counts.clear()
            self._windows.clear()
        if not counts and not windows:
            return 0
        try:
            with self._db:
                self._db.execute("BEGIN")
                self._db.executemany(
                    "INSERT INTO counts(key, bucket, start_ms, vision, reference) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT(key, bucket, start_ms) DO UPDATE SET "
                    "vision = vision + excluded.vision, reference = reference + excluded.reference",
                    [(k, b, s, v, r) for (k, b, s), (v, r) in counts.items()],
                )
                self._db.executemany(
                    "INSERT OR REPLACE INTO windows VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (k, w.start_ms, w.end_ms, w.lag_ms, w.vision, w.reference, w.allowed, json.dumps(w.crossings))
                        for k, w in windows
                    ],
                )
        except (sqlite3.Error, OSError):
            with self._lock:
                for cell_key, (v, r) in counts.items():
                    self._counts[cell_key][0] += v
                    self._counts[cell_key][1] += r
                self._windows[:0] = windows
            raise
        return len(counts) + len(windows)

    def rows(self, bucket: Bucket, since_ms: int = 0) -> list[dict[str, Any]]:
        """Flushed counts of `bucket` from `since_ms` on, oldest first."""
        cur = self._db.execute(
            "SELECT key, start_ms, vision, reference FROM counts WHERE bucket = ? AND start_ms >= ? "
            "ORDER BY start_ms, key",
            (bucket, since_ms),
        )
        return [{"key": k, "start_ms": s, "vision": v, "reference": r} for k, s, v, r in cur.fetchall()]

    def last_shift(self, key: str, now_ms: int) -> dict[str, int] | None:
        """The totals of the last complete shift of `key` (None without shifts or before one ended)."""
        if not self.shifts:
            return None
        current = bucket_start(now_ms, "shift", self.shifts, self.tz)
        row = self._db.execute(
            "SELECT start_ms, vision, reference FROM counts WHERE key = ? AND bucket = 'shift' AND start_ms < ? "
            "ORDER BY start_ms DESC LIMIT 1",
            (key, current),
        ).fetchone()
        return None if row is None else {"start_ms": row[0], "vision": row[1], "reference": row[2]}

    def disagreeing(self, start_ms: int, end_ms: int) -> list[dict[str, Any]]:
        cur = self._db.execute(
            "SELECT key, start_ms, end_ms, lag_ms, vision, reference, allowed, crossings FROM windows "
            "WHERE end_ms >= ? AND end_ms < ? ORDER BY end_ms, key",
            (start_ms, end_ms),
        )
        return [
            {
                "key": k,
                "start_ms": s,
                "end_ms": e,
                "lag_ms": lag,
                "vision": v,
                "reference": r,
                "drift": v - r,
                "allowed": a,
                "crossings": [evidence(label) for label in json.loads(c)],
            }
            for k, s, e, lag, v, r, a, c in cur.fetchall()
        ]

    def report_csv(self, start_ms: int, end_ms: int) -> str:
        """The shift report: one row per disagreeing window between the two times, its crossings joined
        by ";", each as `evidence_text` writes it."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(REPORT_FIELDS)
        for row in self.disagreeing(start_ms, end_ms):
            writer.writerow([*(row[f] for f in REPORT_FIELDS[:-1]), ";".join(map(evidence_text, row["crossings"]))])
        return out.getvalue()

    def close(self) -> None:
        self._db.close()


__all__ = ["REPORT_FIELDS", "CountsStore", "evidence", "evidence_label", "evidence_text"]
