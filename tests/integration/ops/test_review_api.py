"""The per-part record end to end: crossings written to real objects streams, recorded by the recorder
off Redis, answered by `GET /api/crossings` and `GET /api/counts` on a real endpoint; rebuilt exactly
once after its file was deleted; read on from its positions after a restart."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, time
from pathlib import Path
from typing import Any

import pytest

from daemon.core.shifts import bucket_start
from tests.support.daemon_harness import http_get
from tests.support.fixtures_redis import RedisServer, RedisServerFactory
from tests.support.review_harness import Belt, ReviewEndpoint, review_endpoint
from tests.support.waits import wait_until

T0 = 1_765_000_000_000
CONTRACT = ("camera", "line", "direction", "label", "track", "count", "at_ms", "snapshot", "clip", "clip_offset_ms")


def fill(belt: Belt, n: int, seed: int, start_ms: int = T0) -> None:
    rng = random.Random(seed)
    at = start_ms
    for i in range(n):
        at += rng.randrange(0, 40_000)  # ties on one camera are at distinct entries; across cameras, at equal at_ms
        camera = rng.choice(["cam1", "cam2"])
        clip = f"{camera}/c{i}.mp4" if i % 5 == 0 else None
        belt.crossing(
            camera,
            at,
            line=rng.choice(["count", "reject"]),
            direction=rng.choice(["in", "out"]),
            label=rng.choice(["bolt", "nut"]),
            track=i + 1,
            snapshot=f"{camera}/s{i}.jpg" if i % 2 else None,
            clip=clip,
            clip_offset_ms=rng.randrange(1000, 6000) if clip else None,
        )
        if i % 50 == 0:
            belt.other(camera, at + 1, {"v": "1", "camera": camera, "event": "new", "track": str(i + 1)})
    belt.other("cam1", at + 5, {"event": "crossed", "camera": "cam1"})  # malformed: read past, not recorded


def as_stream(crossing: dict[str, Any]) -> dict[str, str]:
    """A crossing of the API in the objects stream's shape (strings; fields the stream lacks left out)."""
    return {k: str(crossing[k]) for k in CONTRACT if crossing[k] is not None}


def expected(belt: Belt) -> dict[str, dict[str, str]]:
    keys = set(CONTRACT)
    return {f"{f['camera']}/{eid}": {k: v for k, v in f.items() if k in keys} for eid, f in belt.written}


def recorded(api: ReviewEndpoint, n: int) -> list[dict[str, Any]]:
    wait_until(lambda: api.recorder.recorded >= n, 60, f"{n} crossings recorded")
    return api.all_crossings(limit=37)


@pytest.fixture
def server(redis_server: RedisServerFactory) -> RedisServer:
    return redis_server()


def test_each_crossing_once_with_the_stream_fields_newest_first(server: RedisServer, tmp_path: Path) -> None:
    belt = Belt(server.client())
    fill(belt, 400, seed=1)
    with review_endpoint(server, tmp_path / "review.sqlite3", ["cam1", "cam2"]) as api:
        got = recorded(api, 400)
        assert api.recorder.malformed == 1
    assert {c["id"]: as_stream(c) for c in got} == expected(belt)
    assert len(got) == 400
    order = [(c["at_ms"], c["camera"], c["entry"]) for c in got]
    assert [k[0] for k in order] == sorted((k[0] for k in order), reverse=True)
    first = next(c for c in got if c["clip"] is not None)
    assert isinstance(first["clip_offset_ms"], int)
    assert first["box"] == [100.0, 80.0, 180.0, 160.0]
    assert (first["w"], first["h"]) == (640, 480)
    assert first["line_xy"] in ([[0.5, 0.05], [0.5, 0.95]], [[0.2, 0.1], [0.2, 0.9]])
    assert first["eta"] == {"gate1": first["at_ms"] + 900}


def test_filters_pages_and_iso_times(server: RedisServer, tmp_path: Path) -> None:
    belt = Belt(server.client())
    fill(belt, 300, seed=2)
    everything = expected(belt)
    with review_endpoint(server, tmp_path / "review.sqlite3", ["cam1", "cam2"]) as api:
        recorded(api, 300)
        times = sorted(int(f["at_ms"]) for f in everything.values())
        since, until = times[50], times[200]
        iso_since = datetime.fromtimestamp(since / 1000, UTC).isoformat(timespec="milliseconds")
        filters: tuple[tuple[str, Callable[[dict[str, str]], bool]], ...] = (
            ("camera=cam2&line=reject", lambda f: f["camera"] == "cam2" and f["line"] == "reject"),
            ("label=nut&direction=out", lambda f: f["label"] == "nut" and f["direction"] == "out"),
            (f"since={iso_since}&until={until}", lambda f: since <= int(f["at_ms"]) < until),
            (f"line=count&since={since}", lambda f: f["line"] == "count" and int(f["at_ms"]) >= since),
        )
        for query, keep in filters:
            for limit in (1, 16, 1000):
                if limit == 1 and "since" not in query:
                    continue
                ids = [c["id"] for c in api.all_crossings(query, limit=limit)]
                assert len(ids) == len(set(ids))
                assert set(ids) == {i for i, f in everything.items() if keep(f)}, query
        bad = http_get(api.port, "/api/crossings?since=yesterday&limit=0&direction=up&cursor=xyz")
        assert bad.status == 400
        assert [p.split(":")[0] for p in bad.json()["problems"]] == ["since", "direction", "limit", "cursor"]


@pytest.mark.parametrize("bucket", ["15m", "1h", "shift"])
def test_counts_add_up_to_each_lines_crossings(server: RedisServer, tmp_path: Path, bucket: str) -> None:
    belt = Belt(server.client())
    fill(belt, 300, seed=3)
    shifts = (time(6), time(14), time(22))
    with review_endpoint(server, tmp_path / "review.sqlite3", ["cam1", "cam2"]) as api:
        recorded(api, 300)
        for camera in ("cam1", "cam2"):
            for line in ("count", "reject"):
                buckets = api.get(f"/api/counts?camera={camera}&line={line}&bucket={bucket}")["buckets"]
                want = Counter(
                    (bucket_start(int(f["at_ms"]), bucket, shifts), f["direction"])  # type: ignore[arg-type]
                    for _e, f in belt.written
                    if f["camera"] == camera and f["line"] == line
                )
                got = {(b["start"], d): b[d] for b in buckets for d in ("in", "out") if b[d]}
                assert got == dict(want)
                for d in ("in", "out"):
                    assert sum(b[d] for b in buckets) == belt.counts.get((camera, line, d), 0)
        assert http_get(api.port, "/api/counts?bucket=2h").status == 400


def test_rebuilt_exactly_once_after_the_file_was_deleted(server: RedisServer, tmp_path: Path) -> None:
    belt = Belt(server.client())
    db = tmp_path / "state" / "review.sqlite3"
    fill(belt, 200, seed=4)
    with review_endpoint(server, db, ["cam1", "cam2"]) as api:
        first = {c["id"] for c in recorded(api, 200)}
    fill(
        belt, 50, seed=5, start_ms=T0 + 30 * 86_400_000
    )  # written while the record is down: read on from its positions
    with review_endpoint(server, db, ["cam1", "cam2"]) as api:
        again = recorded(api, 50)
        assert api.recorder.recorded == 50
    assert len(again) == 250 and len({c["id"] for c in again}) == 250 and first < {c["id"] for c in again}
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    with review_endpoint(server, db, ["cam1", "cam2"]) as api:
        rebuilt = recorded(api, 250)
        counts = api.get("/api/counts?line=count&bucket=1h")["buckets"]
    assert {c["id"]: as_stream(c) for c in rebuilt} == expected(belt)
    assert len(rebuilt) == 250
    assert sum(b["in"] + b["out"] for b in counts) == sum(1 for _e, f in belt.written if f["line"] == "count")


def test_retention_keeps_no_crossing_older_than_configured(server: RedisServer, tmp_path: Path) -> None:
    belt = Belt(server.client())
    now = int(datetime.now(UTC).timestamp() * 1000)
    for i, age_days in enumerate((9.0, 8.0, 6.0, 1.0, 0.0)):
        belt.crossing("cam1", now - int(age_days * 86_400_000) - 120_000, track=i + 1)
    with review_endpoint(server, tmp_path / "review.sqlite3", ["cam1"], retention_days=7.0) as api:
        wait_until(lambda: len(api.all_crossings()) == 3, 60, "the crossings within 7 days")
        assert sorted(c["track"] for c in api.all_crossings()) == [3, 4, 5]
