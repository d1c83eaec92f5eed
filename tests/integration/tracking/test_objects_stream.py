"""Tracking through the whole daemon (in-process) against real Redis: the objects stream's contract,
track ids in the detections, and exactly-once objects through a Redis outage and a daemon restart.

Assertions are on what reached Redis: every entry parses as the contract says, counts run 1..N
per line and direction without a gap or a repeat, ids never repeat, and they continue across a
restart.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.support.daemon_harness import InProcessDaemon, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip
from tests.support.metrics import drops, inferred, total
from tests.support.objects import assert_objects_exactly_once, objects
from tests.support.streams import assert_exactly_once_in_order, stream
from tests.support.waits import wait_until

LINE = {"id": "mid", "start": [0.5, 0.0], "end": [0.5, 1.0], "gates": [{"id": "reject1", "distance_mm": 300}]}


def parts_clip(clip_factory: Callable[..., Clip], seed: int, seconds: float = 8.0) -> Clip:
    """Synthetic conveyor parts moving across the frame (640x480: the 640 model's lane)."""
    return clip_factory(640, 480, fps=10, seconds=seconds, seed=seed, synthetic=True)


def camera(clip: Clip, **extra: object) -> dict[str, object]:
    return {"id": "belt", "url": str(clip.path), "mm_per_px": 0.5, "lines": [LINE], **extra}


def test_every_frame_tracked_gives_new_crossed_end_and_track_ids_in_dets(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    clip = parts_clip(clip_factory, seed=5)
    redis = redis_server()
    config = write_config(tmp_path / "b.toml", redis_url=redis.url, cameras=[camera(clip, realtime=False)])
    with InProcessDaemon(config) as d:
        wait_until(lambda: d.daemon.sources and d.daemon.sources[0].finished, 120, "the clip to play through", d)
        d.stop()
        frames = inferred(d, "belt")
        crossed = total(d, "beltsight_crossings_total", camera="belt")
    entries = stream(redis, "belt")
    assert_exactly_once_in_order(entries, frames)
    events = objects(redis, "belt")
    assert_objects_exactly_once(events)
    kinds = [e.event for _i, e in events]
    assert kinds.count("new") >= 5 and kinds.count("crossed") >= 3, kinds
    assert kinds.count("crossed") == crossed
    new_ids = {e.track for _i, e in events if e.event == "new"}
    in_dets = {d["track"] for _i, f in entries for d in json.loads(f["dets"]) if "track" in d}
    assert in_dets and in_dets <= new_ids, "a detection carries a track id that never had its `new`"
    speeds = sorted(e.speed_mm_s for _i, e in events if e.event == "crossed" and e.speed_mm_s)
    belt_mm_s = speeds[len(speeds) // 2]
    for _i, e in events:
        if e.event == "crossed" and e.direction == "in" and e.eta is not None:
            ((gate, eta_ms),) = e.eta
            assert gate == "reject1"
            assert e.speed_mm_s is not None and e.speed_mm_s > 0
            assert eta_ms > e.at_ms
            # distance / speed: the track's own (rounded to 0.1 mm/s in the field), or the belt's
            implied_mm_s = 300 / ((eta_ms - e.at_ms) / 1000)
            own = abs(implied_mm_s / e.speed_mm_s - 1) <= 0.05
            belt = abs(implied_mm_s / belt_mm_s - 1) <= 0.5
            assert own or belt, (implied_mm_s, e.speed_mm_s, belt_mm_s)
    assert any(e.eta for _i, e in events if e.event == "crossed"), "no crossing carried a gate arrival time"


def test_objects_exactly_once_through_a_redis_outage_and_a_restart_during_it(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    clip = parts_clip(clip_factory, seed=6, seconds=6.0)
    redis = redis_server(appendonly=True)
    config = write_config(
        tmp_path / "b.toml",
        redis_url=redis.url,
        redis={"spool_dir": str(tmp_path / "spool")},
        cameras=[camera(clip, realtime=True, loop=True)],
    )
    with InProcessDaemon(config) as a:
        wait_until(lambda: sum(e.event == "crossed" for _i, e in objects(redis, "belt")) >= 2, 90, "crossings", a)
        redis.kill()
        start = total(a, "beltsight_crossings_total", camera="belt")
        wait_until(
            lambda: total(a, "beltsight_crossings_total", camera="belt") >= start + 3, 60, "crossings in the outage", a
        )
        a.stop()  # what Redis did not take goes to the spool
        a_frames = inferred(a, "belt")
        assert drops(a, "belt", "buffer_full", "shutdown", "engine_error") == 0

    with InProcessDaemon(config) as b:  # restarted while Redis is still down
        wait_until(lambda: total(b, "beltsight_crossings_total", camera="belt") >= 3, 60, "B's crossings", b)
        redis.restart()
        wait_until(lambda: len(stream(redis, "belt")) >= a_frames + inferred(b, "belt"), 60, "A's and B's entries", b)
        b.stop()
        b_frames = inferred(b, "belt")
    assert_exactly_once_in_order(stream(redis, "belt"), a_frames + b_frames)
    events = objects(redis, "belt")
    assert_objects_exactly_once(events)  # counts 1..N across both runs: they continued
    tracks = [e.track for _i, e in events if e.event == "new"]
    assert len(tracks) == len(set(tracks)), "a track id was given twice (across the restart)"
