"""`[engine] processes = 2`: cameras decoded in a decoder process, frames through shared memory.

The real daemon against a real redis-server, with recorded files (frame-exact replays, so the two
paths can be compared entry by entry) and real RTSP cameras (a decoder process killed mid-stream).
"""

from __future__ import annotations

import io
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

from PIL import Image

from daemon.ingest.decoder_proc import NICE
from tests.support.daemon_harness import InProcessDaemon, http_get, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip, RtspServer
from tests.support.http_api import events
from tests.support.streams import entries, stream
from tests.support.waits import wait_until


def _replay(
    tmp_path: Path, redis: RedisServer, clips: dict[str, Clip], processes: int
) -> dict[str, list[dict[str, str]]]:
    config = write_config(
        tmp_path / f"beltsight-{processes}.toml",
        redis_url=redis.url,
        cameras=[{"id": cam, "url": str(clip.path), "realtime": False} for cam, clip in clips.items()],
        processes=processes,
    )
    with InProcessDaemon(config) as d:
        wait_until(
            lambda: all(len(entries(redis, cam)) >= clip.frames for cam, clip in clips.items()),
            120,
            "every frame of every replay in Redis",
            d,
        )
        live = _live_view(d, next(iter(clips)))
        decoders = d.daemon.pipeline.decoders if d.daemon.pipeline is not None else None
        assert (decoders is not None) == (processes > 1)
        if decoders is not None:
            assert len(decoders.pids()) == processes - 1
            # every thread of a decoder process yields a contended core to the daemon's own (decoder_proc.NICE)
            for pid in decoders.pids():
                assert {_nice(pid, tid) for tid in os.listdir(f"/proc/{pid}/task")} == {_nice(os.getpid()) + NICE}
        registry = d.metrics.registry
        wait_until(
            lambda: all(
                (registry.get_sample_value("beltsight_frames_decoded_total", {"camera": cam}) or 0) >= clip.frames
                for cam, clip in clips.items()
            ),
            30,
            "the reader's counters in the daemon's registry",
            d,
        )
        for stage in ("demux", "decode"):  # the readers' CPU, relayed from a decoder process or counted here
            assert (registry.get_sample_value("beltsight_stage_cpu_seconds_total", {"stage": stage}) or 0) > 0, stage
    got = {cam: entries(redis, cam) for cam in clips}
    redis.client().flushall()
    assert live in {e["seq"] for e in got[next(iter(clips))]}, "the live view shows a published frame"
    return got


def _nice(pid: int, tid: int | str | None = None) -> int:
    """A process's (or one of its threads') nice value, from /proc (field 19 of stat)."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    with open(path, encoding="ascii") as f:
        return int(f.read().rpartition(")")[2].split()[16])


def _live_view(d: InProcessDaemon, camera: str) -> str:
    """The live view's JPEG of `camera` (drawn from the frame's planes, a shared-memory slot with
    processes): its seq, once it decodes as an image."""
    assert d.daemon.health is not None
    reply = http_get(d.daemon.health.port, f"/cameras/{camera}/snapshot.jpg")
    assert reply.status == 200
    with Image.open(io.BytesIO(reply.body)) as image:
        image.load()
        assert image.width > 0 and image.height > 0
    return reply.headers["X-Beltsight-Seq"]


def test_two_processes_publish_what_one_process_publishes(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    """Every frame once, seq = frame index, the same detections as the single-process path."""
    clips = {
        "a": clip_factory(640, 480, fps=10, seconds=2, seed=31, synthetic=True),
        "b": clip_factory(1280, 720, fps=10, seconds=2, seed=32, synthetic=True),
    }
    redis = redis_server()
    single = _replay(tmp_path, redis, clips, 1)
    multi = _replay(tmp_path, redis, clips, 2)
    for cam, clip in clips.items():
        assert [int(e["seq"]) for e in multi[cam]] == list(range(clip.frames))
        assert [int(e["seq"]) for e in single[cam]] == list(range(clip.frames))
        for one, two in zip(single[cam], multi[cam], strict=True):
            assert (one["w"], one["h"], one["model"], one["n"]) == (two["w"], two["h"], two["model"], two["n"])
            dets_one, dets_two = json.loads(one["dets"]), json.loads(two["dets"])
            assert [(d["cls"], d["label"]) for d in dets_one] == [(d["cls"], d["label"]) for d in dets_two]
            for d1, d2 in zip(dets_one, dets_two, strict=True):
                assert abs(d1["score"] - d2["score"]) <= 1e-3
                assert all(abs(a - b) <= 0.1 for a, b in zip(d1["box"], d2["box"], strict=True))
        assert sum(int(e["n"]) for e in multi[cam]) > 0, "detections at all"


def test_a_killed_decoder_process_is_replaced_and_its_cameras_reconnect(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    rtsp_server: Callable[..., RtspServer],
    clip_factory: Callable[..., Clip],
) -> None:
    clip = clip_factory(640, 480, fps=10, seconds=3, seed=41, synthetic=True)
    rtsp = rtsp_server({"s1": clip.path, "s2": clip.path})
    redis = redis_server()
    cams = ("live-1", "live-2")
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[
            {"id": cam, "url": rtsp.url(name), "read_timeout_s": 2.0, "reconnect_max_s": 1.0}
            for cam, name in zip(cams, ("s1", "s2"), strict=True)
        ],
        processes=2,
    )
    with InProcessDaemon(config) as d:
        wait_until(lambda: all(len(entries(redis, c)) >= 5 for c in cams), 90, "entries from both cameras", d)
        pool = d.daemon.pipeline.decoders if d.daemon.pipeline is not None else None
        assert pool is not None
        (pid,) = pool.pids()
        before = {c: len(entries(redis, c)) for c in cams}
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: len(events(redis, "camera_down")) >= len(cams), 60, "camera_down for both cameras", d)
        wait_until(lambda: pool.pids() not in ([], [pid]), 60, "a new decoder process", d)
        wait_until(lambda: len(events(redis, "camera_up")) >= 2 * len(cams), 60, "camera_up again for both", d)
        wait_until(lambda: all(len(entries(redis, c)) >= before[c] + 5 for c in cams), 90, "entries after it", d)
        assert d.daemon.state == "running"
        health = d.daemon.health_report()
    downs = events(redis, "camera_down")
    assert {e["camera"] for e in downs} >= set(cams)
    assert any("decoder process exited" in e["detail"] for e in downs)
    for cam in cams:
        got = stream(redis, cam)
        ids = [eid for eid, _f in got]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        keys = [(int(f["seq"]), int(f["captured_ms"])) for _eid, f in got]
        assert len(set(keys)) == len(keys), "no frame published twice"
        assert any(seq == 0 for seq, _ms in keys[before[cam] :]), "seq starts again after the reconnect"
        assert health["cameras"][cam]["state"] == "up"
