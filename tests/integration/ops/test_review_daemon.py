"""The record through the whole daemon (in-process): a real RTSP camera, real Redis, the real endpoint with
basic authentication. Each `crossed` entry of the objects stream is in `GET /api/crossings` once, with the
stream's fields; after the file was deleted and the daemon restarted, again each once."""

from __future__ import annotations

import base64
import http.client
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import bcrypt
import pytest

from tests.support.daemon_harness import InProcessDaemon, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip, RtspServer
from tests.support.waits import wait_until

pytestmark = pytest.mark.slow
USER, PASSWORD = "quality", "why-rejected"
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
LINE = {"id": "mid", "start": [0.5, 0.0], "end": [0.5, 1.0]}
CONTRACT = ("camera", "line", "direction", "label", "track", "count", "at_ms", "snapshot", "clip", "clip_offset_ms")


def get(port: int, path: str, *, auth: bool = True) -> tuple[int, Any]:
    headers = {"Authorization": "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()} if auth else {}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        body = response.read()
        return response.status, json.loads(body) if response.getheader("Content-Type", "").startswith(
            "application/json"
        ) else body
    finally:
        conn.close()


def crossed(redis: RedisServer) -> dict[str, dict[str, str]]:
    """The objects stream's `crossed` entries by the API's id, with the contract's fields."""
    client = redis.client()
    try:
        entries = cast(list[tuple[str, dict[str, str]]], client.xrange("beltsight:objects:belt"))
    finally:
        client.close()
    return {
        f"belt/{eid}": {k: str(v) for k, v in fields.items() if k in CONTRACT}
        for eid, fields in entries
        if fields.get("event") == "crossed"
    }


def recorded(port: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor = ""
    while True:
        status, page = get(port, f"/api/crossings?camera=belt&limit=7{'&cursor=' + cursor if cursor else ''}")
        assert status == 200, page
        out += page["crossings"]
        if page["next"] is None:
            return out
        cursor = page["next"]


def as_stream(c: dict[str, Any]) -> dict[str, str]:
    return {k: str(c[k]) for k in CONTRACT if c[k] is not None}


def check_once(d: InProcessDaemon, redis: RedisServer, at_least: int) -> list[dict[str, Any]]:
    """Wait until the stream holds `at_least` crossings and the record every one of them; each once."""
    wait_until(lambda: len(crossed(redis)) >= at_least, 120, f"{at_least} crossings in the stream", d)
    assert d.daemon.health is not None
    port = d.daemon.health.port
    want = crossed(redis)
    wait_until(lambda: want.keys() <= {c["id"] for c in recorded(port)}, 60, "every crossing recorded", d)
    got = recorded(port)
    assert len(got) == len({c["id"] for c in got})
    stream_now = crossed(redis)
    for c in got:
        assert as_stream(c) == stream_now[c["id"]]
    return got


def test_each_crossing_once_also_after_the_file_was_deleted_and_the_daemon_restarted(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    rtsp_server: Callable[..., RtspServer],
    clip_factory: Callable[..., Clip],
) -> None:
    clip = clip_factory(640, 480, fps=10, seconds=6.0, seed=5, synthetic=True)
    server = rtsp_server({"belt": clip.path})
    redis = redis_server()
    db = tmp_path / "state" / "review.sqlite3"
    config = write_config(
        tmp_path / "b.toml",
        redis_url=redis.url,
        cameras=[{"id": "belt", "url": server.url("belt"), "lines": [LINE]}],
        health={"basic_auth_users": {USER: HASH}},
        extra=f'[snapshots]\nenabled = true\ndir = "{tmp_path / "snaps"}"\n'
        f'[review]\nenabled = true\ndb = "{db}"\nshifts = ["06:00", "18:00"]\n',
    )
    with InProcessDaemon(config) as d:
        first = check_once(d, redis, 3)
        assert d.daemon.health is not None
        port = d.daemon.health.port
        assert get(port, "/api/crossings", auth=False)[0] == 401
        assert all(c["snapshot"] for c in first) and all(c["box"] is not None for c in first)
        status, counts = get(port, "/api/counts?camera=belt&line=mid&bucket=shift")
        assert status == 200
        assert sum(b["in"] + b["out"] for b in counts["buckets"]) >= len(first)  # the record reads on meanwhile
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    with InProcessDaemon(config) as d:
        again = check_once(d, redis, len(crossed(redis)) + 1)
    assert {c["id"] for c in first} < {c["id"] for c in again}
