"""Reading the daemon's objects streams (tracked parts) back out of a real Redis, and checking them."""

from __future__ import annotations

import itertools
from collections import Counter

import redis

from daemon.core.objects import ObjectEvent, parse_fields
from tests.support.fixtures_redis import RedisServer
from tests.support.streams import entry_id

OBJECTS = "beltsight:objects:{}"


def objects(server: RedisServer, camera: str) -> list[tuple[tuple[int, int], ObjectEvent]]:
    """(entry ID as (ms, n), the parsed event) in stream order; [] while Redis is down.
    Every entry must parse (the contract's field checks)."""
    client = server.client()
    try:
        raw = client.xrange(OBJECTS.format(camera))
    except (redis.ConnectionError, redis.TimeoutError):
        return []
    finally:
        client.close()
    return [(entry_id(str(eid)), parse_fields({str(k): str(v) for k, v in f.items()})) for eid, f in raw or []]


def assert_objects_exactly_once(events: list[tuple[tuple[int, int], ObjectEvent]]) -> None:
    """IDs increasing; each track `new` once and before its other events, `end` at most once and last;
    each (line, direction)'s counts exactly 1..N in stream order; a track crosses a line in a
    direction at most once."""
    ids = [eid for eid, _e in events]
    assert all(a < b for a, b in itertools.pairwise(ids)), "objects entry IDs not increasing"
    seen_new: set[int] = set()
    ended: set[int] = set()
    counts: dict[tuple[str, str], list[int]] = {}
    crossings = Counter()
    for _eid, e in events:
        assert e.track not in ended, f"track {e.track}: an event after its end"
        if e.event == "new":
            assert e.track not in seen_new, f"track {e.track}: new twice"
            seen_new.add(e.track)
            continue
        assert e.track in seen_new, f"track {e.track}: {e.event} before new"
        if e.event == "end":
            ended.add(e.track)
        else:
            assert e.line is not None and e.direction is not None and e.count is not None
            counts.setdefault((e.line, e.direction), []).append(e.count)
            crossings[(e.track, e.line, e.direction)] += 1
    for key, seq in counts.items():
        assert seq == list(range(seq[0], seq[0] + len(seq))) and seq[0] == 1, f"{key}: counts {seq}"
    twice = [k for k, n in crossings.items() if n > 1]
    assert not twice, f"tracks counted twice: {twice}"
