"""The review record's SQLite file at a week's size: insert rate and query times.

    .venv/bin/python -m tools.bench.review [--cameras 8] [--per-s 2] [--days 7] [--insert-rows 100000]
        [--batch 500] [--repeat 15] [--db FILE] [--out FILE.json]

Generates the rows directly (no Redis, no daemon): `--per-s` crossings per second on each of `--cameras`
cameras for `--days` days (two lines per camera, in/out, three labels of which one is rare). The week is
bulk-loaded into the record's schema (`daemon.ops.review.store`: the rows first, then its indexes,
triggers and per-minute counts built as the store builds them), then the insert rate is measured the
way the recorder writes: `--insert-rows` more rows (the following hours) with `Store.record`, in
transactions of `--batch` rows with the stream positions, on the week-sized file, indexes and triggers
on. Prints that rate, the file's size per day, then the median and worst time of each query the API
makes (`--repeat` runs each, on the file as it is on disk, the page cache warm as on a running box):
pages of `GET /api/crossings` by camera, line, label, direction and time range (also 20 pages deep
with the cursor) and `GET /api/counts` over the week per 15 min, hour and shift. The goal (#56): each
under 100 ms. The machine is shared: absolute numbers are noisy.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import time as clock_time
from pathlib import Path
from typing import Any

from daemon.core.seam import parse_shifts
from daemon.ops.seam import INSERT, SCHEMA, Crossing, Cursor, Filters, Store

DAY_MS = 86_400_000
GOAL_MS = 100.0
LABELS = ("bolt",) * 60 + ("nut",) * 39 + ("washer",)


def rows(cameras: int, per_s: float, days: float, start_ms: int, seed: int = 1, first: int = 0) -> Iterator[Crossing]:
    """The crossings of every camera in time order, `per_s` per camera per second (evenly, jittered),
    from the `first`-th step on."""
    rng = random.Random(seed)
    step_ms = 1000.0 / per_s
    total = int(days * DAY_MS / step_ms)
    counts: dict[tuple[str, str, str], int] = {}
    for i in range(first, first + total):
        base = start_ms + int(i * step_ms)
        for c in range(cameras):
            camera = f"cam{c + 1}"
            at_ms = base + rng.randrange(int(step_ms))
            line = "count" if rng.random() < 0.8 else "reject"
            direction = "in" if rng.random() < 0.9 else "out"
            key = (camera, line, direction)
            counts[key] = n = counts.get(key, 0) + 1
            yield Crossing(
                camera=camera,
                entry_ms=at_ms + 20,
                entry_seq=(i + 1) * 65_536 + 1,
                at_ms=at_ms,
                line=line,
                direction=direction,
                label=rng.choice(LABELS),
                cls=0,
                score=0.9,
                track=i + 1,
                count=n,
                speed_px_s=240.0,
                eta=f'{{"gate1":{at_ms + 1500}}}',
                snapshot=f"{camera}/2026-12-06/{at_ms}-{i + 1}-{line}-{direction}.jpg",
                clip=f"{camera}/2026-12-06/{at_ms // 10_000}.mp4",
                clip_offset_ms=5000,
                box="[312.5,140.0,398.0,226.5]",
                frame_w=1280,
                frame_h=720,
                line_xy="[[0.5,0.05],[0.5,0.95]]",
            )


def bulk_load(path: Path, source: Iterator[Crossing]) -> float:
    """The rows into a new file with the store's schema, its indexes and triggers built after; seconds taken."""
    t0 = time.perf_counter()
    Store(path).close()  # the schema
    db = sqlite3.connect(str(path), isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = OFF")  # the load is the bench's set-up, not what it measures
        db.execute("PRAGMA synchronous = OFF")
        names = db.execute(
            "SELECT type, name FROM sqlite_master WHERE type IN ('index', 'trigger') AND sql IS NOT NULL"
        )
        for kind, name in names.fetchall():
            db.execute(f"DROP {kind.upper()} {name}")
        db.execute("BEGIN")
        db.executemany(INSERT, (c.row() for c in source))
        db.execute("COMMIT")
        db.executescript(SCHEMA)  # IF NOT EXISTS: the indexes and triggers dropped above, built on the rows
        db.execute(
            "INSERT INTO minute_counts SELECT camera, line, at_ms - at_ms % 60000 AS m, direction, COUNT(*)"
            " FROM crossings GROUP BY camera, line, m, direction"
        )
        db.execute("PRAGMA journal_mode = WAL")  # as the store runs it
    finally:
        db.close()
    return time.perf_counter() - t0


def insert_rate(store: Store, source: Iterator[Crossing], batch: int) -> dict[str, float]:
    """Rows per second written as the recorder writes them: `Store.record` per `batch` with the positions."""
    chunk: list[Crossing] = []
    done = 0
    t0 = time.perf_counter()
    for crossing in source:
        chunk.append(crossing)
        if len(chunk) == batch:
            done += store.record(chunk, {f"beltsight:objects:{chunk[-1].camera}": chunk[-1].entry_id})
            chunk = []
    if chunk:
        done += store.record(chunk, {})
    seconds = time.perf_counter() - t0
    return {"rows": done, "seconds": seconds, "rows_per_s": done / seconds}


def timed(fn: Callable[[], Any], repeat: int) -> dict[str, float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return {"median_ms": statistics.median(times), "max_ms": max(times)}


def deep(store: Store, filters: Filters, pages: int) -> Cursor | None:
    after: Cursor | None = None
    for _ in range(pages):
        page = store.crossings(filters, 101, after)[:100]
        last = page[-1]
        after = (last.at_ms, last.camera, last.entry_ms, last.entry_seq)
    return after


def queries(store: Store, start_ms: int, days: float, shifts: tuple[clock_time, ...]) -> dict[str, Callable[[], Any]]:
    mid = start_ms + int(days * DAY_MS / 2)
    hour = Filters(since=mid, until=mid + 3_600_000)
    week = Filters(camera="cam3", line="count", since=start_ms, until=start_ms + int(days * DAY_MS))
    odd = Filters(camera="cam3", line="count", since=start_ms + 12_345, until=start_ms + int(days * DAY_MS) - 54_321)
    return {
        "crossings newest 100": lambda: store.crossings(Filters(), 101),
        "crossings camera": lambda: store.crossings(Filters(camera="cam5"), 101),
        "crossings camera+line": lambda: store.crossings(Filters(camera="cam5", line="reject"), 101),
        "crossings line": lambda: store.crossings(Filters(line="reject"), 101),
        "crossings label (1 % of parts)": lambda: store.crossings(Filters(label="washer"), 101),
        "crossings direction": lambda: store.crossings(Filters(direction="out"), 101),
        "crossings all filters, 1 h range": lambda: store.crossings(
            Filters("cam2", "count", "nut", "in", mid, mid + 3_600_000), 101
        ),
        "crossings 1 h range mid-week": lambda: store.crossings(hour, 101),
        "crossings camera, 20 pages deep": lambda: deep(store, Filters(camera="cam5"), 20),
        "counts line, week, 15m": lambda: store.counts(week, "15m", shifts),
        "counts line, week, 1h": lambda: store.counts(week, "1h", shifts),
        "counts line, week, shift": lambda: store.counts(week, "shift", shifts),
        "counts line, week, 1h, range not on minutes": lambda: store.counts(odd, "1h", shifts),
        "counts line, 1 day, 1h, label (from the rows)": lambda: store.counts(
            Filters("cam3", "count", "washer", None, mid, mid + DAY_MS), "1h", shifts
        ),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cameras", type=int, default=8)
    ap.add_argument("--per-s", type=float, default=2.0, help="crossings per second per camera")
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--insert-rows", type=int, default=100_000, help="rows written as the recorder writes them")
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument(
        "--db", type=Path, default=None, help="the file (default: a temporary one, removed after); kept, and reused"
    )
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-review-") as tmp:
        path = args.db or Path(tmp) / "review.sqlite3"
        start_ms = 1_764_979_200_000  # 2025-12-06T00:00Z
        total = int(args.days * DAY_MS / (1000 / args.per_s)) * args.cameras
        per_step = args.cameras
        total = int(args.days * DAY_MS / (1000 / args.per_s)) * per_step
        print(f"loading {total:,} crossings ({args.cameras} cameras x {args.per_s}/s x {args.days} days) into {path}")
        if path.exists():  # a file of an earlier run with the same arguments (`--db`): its queries again
            print(f"{path} exists: not loaded again")
            load_s = 0.0
        else:
            load_s = bulk_load(path, rows(args.cameras, args.per_s, args.days, start_ms))
        size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
        mib = size / 2**20
        per_day = mib / args.days
        print(f"loaded in {load_s:.0f} s; file: {mib:,.0f} MiB, {per_day:,.0f} MiB per day, {size / total:.0f} B/row")
        store = Store(path)
        more_days = args.insert_rows / per_step / args.per_s / 86_400
        steps = int(args.days * DAY_MS / (1000 / args.per_s))
        insert = insert_rate(
            store, rows(args.cameras, args.per_s, more_days, start_ms, seed=2, first=steps), args.batch
        )
        store.close()
        need = args.cameras * args.per_s
        print(f"insert on the week's file: {insert['rows_per_s']:,.0f} rows/s ({insert['rows']:,} rows in transactions")
        print(f"        of {args.batch}, rows generated in the same loop); the recorder needs {need:.0f} rows/s")
        store = Store(path)  # reopened: the queries run on the file as it is on disk
        shifts = parse_shifts(["06:00", "14:00", "22:00"])
        results: dict[str, dict[str, float]] = {}
        print(f"{'query':48} {'median ms':>10} {'max ms':>8}")
        for name, fn in queries(store, start_ms, args.days, shifts).items():
            results[name] = r = timed(fn, args.repeat)
            flag = "" if r["median_ms"] < GOAL_MS else "  over the goal"
            print(f"{name:48} {r['median_ms']:10.1f} {r['max_ms']:8.1f}{flag}")
        store.close()
        if args.out is not None:
            report = {"args": {k: str(v) for k, v in vars(args).items()}, "insert": insert, "bytes": size}
            args.out.write_text(json.dumps(report | {"queries": results}, indent=2))


if __name__ == "__main__":
    main()
