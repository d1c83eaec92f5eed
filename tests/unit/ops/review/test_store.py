"""The record's file: each crossing once, pages that visit each crossing once, counts that add up, pruning."""

from __future__ import annotations

import random
import sqlite3
import threading
import time as time_module
from collections import Counter
from datetime import time
from pathlib import Path

import pytest

from daemon.core.shifts import bucket_start
from daemon.ops.review.buckets import bucket_counts
from daemon.ops.review.store import MAX_LIMIT, Crossing, Filters, Store

T0 = 1_765_000_000_000  # 2025-12-06T05:46:40Z


def crossing(i: int, *, camera: str = "cam1", line: str = "count", at_ms: int | None = None, **kw: object) -> Crossing:
    fields: dict[str, object] = {
        "camera": camera,
        "entry_ms": T0 + i * 250,
        "entry_seq": 65_537,
        "at_ms": T0 + i * 250 if at_ms is None else at_ms,
        "line": line,
        "direction": "in" if i % 3 else "out",
        "label": "bolt" if i % 2 else "nut",
        "cls": i % 2,
        "score": 0.9,
        "track": i,
        "count": i + 1,
    }
    fields.update(kw)
    return Crossing(**fields)  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "review.sqlite3")


def every_page(store: Store, filters: Filters, limit: int) -> list[Crossing]:
    seen: list[Crossing] = []
    after = None
    while True:
        page = store.crossings(filters, limit, after)
        seen += page
        if len(page) < limit:
            return seen
        last = page[-1]
        after = (last.at_ms, last.camera, last.entry_ms, last.entry_seq)


def test_a_crossing_read_twice_is_stored_once_and_positions_go_with_it(store: Store) -> None:
    rows = [crossing(i) for i in range(10)]
    assert store.record(rows[:6], {"s1": "1-1"}) == 6
    assert store.record(rows, {"s1": "2-1"}) == 4
    assert store.positions() == {"s1": "2-1"}
    assert len(every_page(store, Filters(), 100)) == 10


def test_pages_visit_each_crossing_once_newest_first_with_ties(store: Store) -> None:
    rng = random.Random(5)
    rows = [
        crossing(i, camera=rng.choice(["a", "b"]), line=rng.choice(["l1", "l2"]), at_ms=T0 + rng.randrange(20) * 1000)
        for i in range(300)
    ]
    store.record(rows, {})
    for filters in (Filters(), Filters(camera="a"), Filters(line="l2", direction="in"), Filters(label="nut")):
        for limit in (1, 7, 50):
            seen = every_page(store, filters, limit)
            keys = [(c.at_ms, c.camera, c.entry_ms, c.entry_seq) for c in seen]
            expected = sorted(
                ((c.at_ms, c.camera, c.entry_ms, c.entry_seq) for c in rows if _matches(c, filters)), reverse=True
            )
            assert keys == expected


def _matches(c: Crossing, f: Filters) -> bool:
    return all(getattr(f, n) in (None, getattr(c, n)) for n in ("camera", "line", "label", "direction"))


@pytest.mark.parametrize("bucket", ["15m", "1h", "shift"])
def test_counts_add_up_to_the_crossings_per_direction(store: Store, bucket: str) -> None:
    rng = random.Random(7)
    rows = [crossing(i, at_ms=T0 + rng.randrange(3 * 86_400_000)) for i in range(2000)]
    store.record(rows, {})
    shifts = (time(6), time(14), time(22))
    since, until = T0 + 3_600_123, T0 + 2 * 86_400_000 + 17_777  # not on a minute: edge minutes counted exactly
    for filters in (Filters(line="count"), Filters(line="count", since=since, until=until), Filters(label="nut")):
        got = store.counts(filters, bucket, shifts)  # type: ignore[arg-type]
        expected: Counter[tuple[int, str]] = Counter(
            (bucket_start(c.at_ms, bucket, shifts), c.direction)  # type: ignore[arg-type]
            for c in rows
            if (filters.since is None or c.at_ms >= filters.since)
            and (filters.until is None or c.at_ms < filters.until)
            and filters.label in (None, c.label)
        )
        assert {(s, d): n for s, per in got for d, n in per.items() if n} == dict(expected)


def test_counts_within_one_minute(store: Store) -> None:
    store.record([crossing(i, at_ms=T0 + 60_000 * 10 + i * 100) for i in range(50)], {})
    since, until = T0 + 600_000 + 1_050, T0 + 600_000 + 3_050
    got = store.counts(Filters(since=since, until=until), "1h")
    assert sum(sum(per.values()) for _s, per in got) == 20


def test_prune_removes_old_crossings_and_their_counts(store: Store) -> None:
    rows = [crossing(i, at_ms=T0 + i * 30_000) for i in range(100)]
    store.record(rows, {})
    cutoff = T0 + 50 * 30_000 + 10_000
    removed = store.prune(cutoff)
    kept = every_page(store, Filters(), 1000)
    minute = cutoff - cutoff % 60_000
    assert removed == sum(1 for c in rows if c.at_ms < minute)
    assert all(c.at_ms >= minute for c in kept)
    total = sum(sum(per.values()) for _s, per in store.counts(Filters(), "1h"))
    assert total == len(kept)


def test_lines_on_record(store: Store) -> None:
    store.record([crossing(1, camera="b", line="x"), crossing(2, camera="a", line="y")], {})
    assert store.lines() == [("a", "y"), ("b", "x")]


def test_a_full_page_of_the_largest_size_still_tells_there_is_more(store: Store) -> None:
    store.record([crossing(i) for i in range(MAX_LIMIT + 5)], {})
    assert len(store.crossings(Filters(), MAX_LIMIT + 1)) == MAX_LIMIT + 1


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/St_Johns", "Asia/Kathmandu", "UTC"])
@pytest.mark.parametrize("bucket", ["15m", "1h", "shift"])
def test_buckets_equal_bucket_start_per_minute_across_daylight_saving(
    zone: str, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three days around each of Berlin's 2026 changes, every minute: the proved bucket ends give what
    `bucket_start` gives minute by minute (shifts of unequal length, one starting off the quarter hour)."""
    monkeypatch.setenv("TZ", zone)
    time_module.tzset()
    try:
        shifts = (time(5, 50), time(14), time(22))
        for change_ms in (1_774_746_000_000, 1_792_890_000_000):  # 2026-03-29 01:00Z, 2026-10-25 01:00Z
            minutes = [(change_ms + m * 60_000, 60_000, "in" if m % 3 else "out", 1) for m in range(-1440, 1440 * 2)]
            want: dict[int, Counter[str]] = {}
            for minute_ms, _one, direction, n in minutes:
                want.setdefault(bucket_start(minute_ms, bucket, shifts), Counter())[direction] += n  # type: ignore[arg-type]
            expected = [(s, c["in"], c["out"]) for s, c in sorted(want.items())]
            got = bucket_counts(minutes, bucket, shifts)  # type: ignore[arg-type]
            assert [(s, per["in"], per["out"]) for s, per in got] == expected
            chunks: Counter[tuple[int, str]] = Counter()  # 15 min chunks: some straddle the 05:50 shift start
            for minute_ms, _one, direction, n in minutes:
                chunks[(minute_ms - minute_ms % 900_000, direction)] += n

            def of_chunk(
                start: int, direction: str, minutes: list[tuple[int, int, str, int]] = minutes
            ) -> list[tuple[int, int, str, int]]:
                return [m for m in minutes if start <= m[0] < start + 900_000 and m[2] == direction]

            spans = [(t, 900_000, d, n) for (t, d), n in chunks.items()]
            got = bucket_counts(spans, bucket, shifts, of_chunk)  # type: ignore[arg-type]
            assert [(s, per["in"], per["out"]) for s, per in got] == expected
    finally:
        monkeypatch.undo()
        time_module.tzset()


def test_counts_in_a_zone_off_the_hour_with_a_shift_off_the_quarter(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", "Asia/Kathmandu")  # UTC+05:45
    time_module.tzset()
    try:
        rng = random.Random(9)
        rows = [crossing(i, at_ms=T0 + rng.randrange(2 * 86_400_000)) for i in range(3000)]
        store.record(rows, {})
        shifts = (time(5, 50), time(14, 5), time(22))
        for bucket in ("15m", "1h", "shift"):
            for since in (None, T0 + 7_777_777):
                got = store.counts(Filters(line="count", since=since), bucket, shifts)
                want: Counter[tuple[int, str]] = Counter(
                    (bucket_start(c.at_ms, bucket, shifts), c.direction)
                    for c in rows
                    if since is None or c.at_ms >= since
                )
                assert {(s, d): n for s, per in got for d, n in per.items() if n} == dict(want)
    finally:
        monkeypatch.undo()
        time_module.tzset()


def test_a_second_connection_opening_while_the_first_still_holds_the_new_file_waits_for_it(tmp_path: Path) -> None:
    """The recorder's and the API reader's connections open a new file at once: while one holds it in
    SQLite's first (rollback-journal) mode with a write lock, the other's journal-mode change gets
    SQLITE_BUSY at once, without the busy handler. The set-up retries it (it used to answer the API's
    first read with a 500)."""
    path = tmp_path / "review.sqlite3"
    first = sqlite3.connect(str(path), isolation_level=None)
    first.execute("CREATE TABLE early (a)")
    first.execute("BEGIN IMMEDIATE")
    first.execute("INSERT INTO early VALUES (1)")
    with pytest.raises(sqlite3.OperationalError, match="locked"):  # what SQLite itself answers, at once
        sqlite3.connect(str(path), timeout=5.0, isolation_level=None).execute("PRAGMA journal_mode = WAL")
    opened: list[Store] = []
    thread = threading.Thread(target=lambda: opened.append(Store(path)))
    thread.start()
    time_module.sleep(0.5)
    assert not opened and thread.is_alive()  # still waiting for the first connection
    first.execute("COMMIT")
    first.close()
    thread.join(10)
    assert opened, "the store did not open once the lock was released"
    store = opened[0]
    try:
        assert store.positions() == {}
        assert store.record([crossing(1)], {"s": "1-1"}) == 1
    finally:
        store.close()
