"""Reading the daemon's detection streams back out of a real Redis, and checking them."""

from __future__ import annotations

import itertools

import redis

from tests.support.fixtures_redis import RedisServer

STREAM = "beltsight:detections:{}"

Entry = tuple[tuple[int, int], dict[str, str]]
"""One stream entry: its ID as (ms, n), and its fields."""


def stream(server: RedisServer, camera: str) -> list[Entry]:
    """(entry ID as (ms, n), fields) in stream order; [] while Redis is down."""
    client = server.client()
    try:
        raw = client.xrange(STREAM.format(camera))
    except (redis.ConnectionError, redis.TimeoutError):  # a killed server is part of these tests
        return []
    finally:
        client.close()
    return [(entry_id(str(eid)), {str(k): str(v) for k, v in (fields or {}).items()}) for eid, fields in raw or []]


def entry_id(text: str) -> tuple[int, int]:
    ms, _, n = text.partition("-")
    return int(ms), int(n)


def entries(server: RedisServer, camera: str) -> list[dict[str, str]]:
    """The fields of every entry of a camera's stream, in order; [] while Redis is down."""
    return [fields for _id, fields in stream(server, camera)]


def assert_exactly_once_in_order(entries: list[Entry], expected: int) -> None:
    """`expected` entries, no (seq, captured_ms) twice, IDs increasing, in capture order."""
    keys = [(int(f["seq"]), int(f["captured_ms"])) for _id, f in entries]
    assert len(entries) == expected, f"{len(entries)} entries in Redis, {expected} frames inferred"
    assert len(set(keys)) == len(keys), "duplicate (seq, captured_ms) entries"
    ids = [eid for eid, _f in entries]
    assert all(a < b for a, b in itertools.pairwise(ids)), "entry IDs not increasing"
    captured = [ms for _seq, ms in keys]
    assert all(a <= b for a, b in itertools.pairwise(captured)), "entries out of capture order"
