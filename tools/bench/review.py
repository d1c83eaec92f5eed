"""The review record's SQLite file at a week's size: insert rate and query times.

    .venv/bin/python -m tools.bench.review [--cameras 8] [--per-s 2] [--days 7] [--batch 500] [--repeat 15]
        [--db FILE] [--out FILE.json]

Generates the rows directly (no Redis, no daemon): `--per-s` crossings per second on each of `--cameras`
cameras for `--days` days (two lines per camera, in/out, three labels of which one is rare), written with
`daemon.ops.review.store.Store.record` in transactions of `--batch` rows (the recorder writes one
transaction per read of the streams, at most 500 entries per stream), each with the positions as the
recorder writes them. Prints the insert rate over the whole fill and over its last tenth (a rate that
falls as the file grows would show there), the file's size per day, then the median and worst time of
each query the API makes (`--repeat` runs each, against the file as it is on disk, the page cache
warm as on a running box): pages of `GET /api/crossings` by camera, line, label, direction and time
range (also 20 pages deep with the cursor) and `GET /api/counts` over the week per 15 min, hour and
shift. The goal (#56): each under 100 ms. The machine is shared: absolute numbers are noisy.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import time as clock_time
from pathlib import Path
from typing import Any

from daemon.core.shifts import parse_shifts
from daemon.ops.review.store import Crossing, Cursor, Filters, Store

DAY_MS = 86_400_000
GOAL_MS = 100.0
LABELS = ("bolt",) * 60 + ("nut",) * 39 + ("washer",)


def rows(cameras: int, per_s: float, days: float, start_ms: int, seed: int = 1) -> Iterator[Crossing]:
    """The crossings of every camera in time order, `per_s` per camera per second (evenly, jittered)."""
    rng = random.Random(seed)
    step_ms = 1000.0 / per_s
    total = int(days * DAY_MS / step_ms)
    counts: dict[tuple[str, str, str], int] = {}
    for i in range(total):
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


def fill(store: Store, source: Iterator[Crossing], batch: int, total: int) -> dict[str, float]:
    """Insert everything in transactions of `batch`; rows/s overall and over the last tenth."""
    t0 = time.perf_counter()
    done = 0
    tail_from, tail_t0 = int(total * 0.9), 0.0
    chunk: list[Crossing] = []
    for crossing in source:
        chunk.append(crossing)
        if len(chunk) == batch:
            store.record(chunk, {f"beltsight:objects:{chunk[-1].camera}": chunk[-1].entry_id})
            done += len(chunk)
            chunk = []
            if not tail_t0 and done >= tail_from:
                tail_t0, tail_done = time.perf_counter(), done
    if chunk:
        store.record(chunk, {})
        done += len(chunk)
    end = time.perf_counter()
    tail_rate = (done - tail_done) / (end - tail_t0) if tail_t0 else float("nan")
    return {"rows": done, "seconds": end - t0, "rows_per_s": done / (end - t0), "last_tenth_rows_per_s": tail_rate}


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
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--db", type=Path, default=None, help="the file (default: a temporary one, removed after)")
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-review-") as tmp:
        path = args.db or Path(tmp) / "review.sqlite3"
        start_ms = 1_764_979_200_000  # 2025-12-06T00:00Z
        total = int(args.days * DAY_MS / (1000 / args.per_s)) * args.cameras
        store = Store(path)
        print(f"filling {total:,} crossings ({args.cameras} cameras x {args.per_s}/s x {args.days} days) into {path}")
        insert = fill(store, rows(args.cameras, args.per_s, args.days, start_ms), args.batch, total)
        store.close()
        size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
        rate, tail = insert["rows_per_s"], insert["last_tenth_rows_per_s"]
        print(
            f"insert: {rate:,.0f} rows/s overall, {tail:,.0f} rows/s over the last tenth ({insert['seconds']:.0f} s);"
        )
        print(f"        the recorder needs {args.cameras * args.per_s:.0f} rows/s")
        mib = size / 2**20
        print(f"file: {mib:,.0f} MiB, {mib / args.days:,.0f} MiB per day, {size / insert['rows']:.0f} B/row")
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
