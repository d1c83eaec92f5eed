"""The soak's end checks of the objects stream (`tools.soak.checks`) on a real Redis: what they call a gap,
a repeat, a track new/ended/counted twice, and when a gap is allowed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from tests.support.fixtures_redis import RedisServer
from tools.soak.checks import check_detections, check_objects, objects_ok


@pytest.fixture
def client(redis_server: Callable[..., RedisServer]) -> Iterator[redis.Redis]:
    c = redis_server().client()
    try:
        yield c
    finally:
        c.close()


def event(kind: str, track: int, count: int | None = None, direction: str = "in") -> dict[str, Any]:
    fields: dict[str, Any] = {"v": "1", "camera": "cam0", "track": str(track), "event": kind}
    if kind == "crossed":
        fields |= {"line": "mid", "direction": direction, "count": str(count)}
    return fields


def publish(client: redis.Redis, events: list[dict[str, Any]]) -> None:
    for e in events:
        client.xadd("beltsight:objects:cam0", e)


def test_clean_objects_pass_and_count_per_line_and_direction(client: redis.Redis) -> None:
    publish(client, [event("new", 1), event("crossed", 1, 1), event("new", 2), event("crossed", 2, 1, "out"),
                     event("crossed", 2, 2), event("end", 1), event("end", 2)])  # fmt: skip
    result = check_objects(client, "cam0")
    assert result["counts"] == {"mid/in": 2, "mid/out": 1}
    assert (result["count_gaps"], result["count_repeats"], result["crossed_twice"]) == (0, 0, 0)
    assert objects_ok(result, lost=False)


def test_a_gap_fails_unless_the_daemon_counted_drops(client: redis.Redis) -> None:
    publish(client, [event("crossed", 1, 3), event("crossed", 2, 4), event("crossed", 3, 7)])
    result = check_objects(client, "cam0")  # 3: the head trimmed by MAXLEN is no gap; 5 and 6 are
    assert result["count_gaps"] == 2 and result["count_repeats"] == 0 and result["last_counts"] == {"mid/in": 7}
    assert not objects_ok(result, lost=False)
    assert objects_ok(result, lost=True)


def test_a_repeat_or_a_second_count_of_one_track_always_fails(client: redis.Redis) -> None:
    publish(client, [event("crossed", 1, 1), event("crossed", 2, 2), event("crossed", 2, 2)])
    result = check_objects(client, "cam0")
    assert result["count_repeats"] == 1 and result["crossed_twice"] == 1
    assert not objects_ok(result, lost=True)


def test_a_track_new_or_ended_twice_fails(client: redis.Redis) -> None:
    publish(client, [event("new", 1), event("new", 1), event("crossed", 1, 1), event("end", 1), event("end", 1)])
    result = check_objects(client, "cam0")
    assert (result["new_twice"], result["end_twice"]) == (1, 1)
    assert not objects_ok(result, lost=True)


def test_no_crossing_at_all_fails(client: redis.Redis) -> None:
    publish(client, [event("new", 1), event("end", 1)])
    assert not objects_ok(check_objects(client, "cam0"), lost=False)


def test_detections_duplicates_and_order(client: redis.Redis) -> None:
    for seq, ms in ((1, 1000), (2, 1100), (2, 1100)):
        client.xadd("beltsight:detections:cam0", {"camera": "cam0", "seq": str(seq), "captured_ms": str(ms)})
    result = check_detections(client, "cam0")
    assert result["entries"] == 3 and result["duplicates"] == 1
    assert result["ids_increasing"] and result["captured_non_decreasing"]
