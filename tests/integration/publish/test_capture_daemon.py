"""Frame capture through the whole daemon (in-process), real Redis: from a real RTSP camera the
captured images decode at the camera's size, their labels are the detections published for that
frame, and a strategy's limit holds; with a one-place queue, a disk that hangs and four replayed
cameras, a full queue drops captures and never a frame."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from PIL import Image

from daemon.publish.capture import writer as capture_writer
from tests.support.daemon_harness import InProcessDaemon, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip, RtspServer
from tests.support.metrics import inferred
from tests.support.streams import assert_exactly_once_in_order, stream
from tests.support.waits import wait_until

pytestmark = pytest.mark.slow
PER_HOUR = 4
"""The strategy's limit in the first test: the hourly one, which no run can outlast (the per-minute one
would let a run slower than a minute capture more, and the sliding window is unit-tested)."""


def capture_toml(root: Path, *, queue: int = 8, per_minute: int = 10**6, per_hour: int = 10**6) -> str:
    return (
        f'[capture]\ndir = "{root}"\nqueue = {queue}\n'
        f'[[capture.strategies]]\ntype = "random"\nprobability = 1.0\n'
        f"per_minute = {per_minute}\nper_hour = {per_hour}\n"
    )


def labels(text: str) -> list[tuple[int, float, float, float, float]]:
    rows = [line.split() for line in text.splitlines()]
    return [(int(r[0]), float(r[1]), float(r[2]), float(r[3]), float(r[4])) for r in rows]


def test_captured_frames_decode_carry_the_published_detections_and_respect_the_limit(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    rtsp_server: Callable[..., RtspServer],
    clip_factory: Callable[..., Clip],
) -> None:
    clip = clip_factory(640, 480, fps=10, seconds=8.0, seed=5, synthetic=True)
    server = rtsp_server({"belt": clip.path})
    redis = redis_server()
    root = tmp_path / "capture"
    config = write_config(
        tmp_path / "b.toml",
        redis_url=redis.url,
        cameras=[{"id": "belt", "url": server.url("belt")}],
        extra=capture_toml(root, per_hour=PER_HOUR),
    )
    with InProcessDaemon(config) as d:
        wait_until(lambda: inferred(d, "belt") >= 30, 120, "30 frames inferred", d)
        d.stop()
        frames = inferred(d, "belt")
        written = d.counter("beltsight_capture_written_total", camera="belt", strategy="random")
        limited = d.counter("beltsight_capture_limited_total", camera="belt", strategy="random", limit="per_hour")
    entries = stream(redis, "belt")
    assert_exactly_once_in_order(entries, frames)  # capture took no frame
    images = sorted((root / "images" / "belt").glob("*.jpg"))
    assert written == len(images) == PER_HOUR  # the limit is what stopped it
    assert limited == frames - PER_HOUR
    by_time = {int(f["captured_ms"]): f for _id, f in entries}
    boxes_seen = 0
    for image in images:
        with Image.open(image) as decoded:
            decoded.load()
            assert (decoded.format, decoded.size) == ("JPEG", (640, 480))
        entry = by_time[int(image.stem)]
        dets = json.loads(entry["dets"])
        got = labels((root / "labels" / "belt" / f"{image.stem}.txt").read_text())
        assert len(got) == len(dets) == int(entry["n"])
        for (cls, cx, cy, w, h), det in zip(got, dets, strict=True):
            x1, y1, x2, y2 = det["box"]
            assert cls == det["cls"]
            assert abs(cx - (x1 + x2) / 2 / 640) < 1e-3 and abs(cy - (y1 + y2) / 2 / 480) < 1e-3
            assert abs(w - (x2 - x1) / 640) < 1e-3 and abs(h - (y2 - y1) / 480) < 1e-3
            boxes_seen += 1
    assert boxes_seen > 0, "no captured frame had a detection to compare"
    data = yaml.safe_load((root / "data.yaml").read_text())
    assert data["names"] == {0: "bolt", 1: "hex_nut", 2: "washer", 3: "l_bracket"}
    assert (Path(data["path"]) / data["train"]).resolve() == (root / "images").resolve()


def test_a_full_queue_drops_captures_never_frames(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    clip_factory: Callable[..., Clip],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_write = capture_writer.write_atomic
    disk_back = threading.Event()

    def stuck_disk(target: Path, data: bytes) -> None:  # the disk hangs until the queue was found full
        disk_back.wait(180)
        real_write(target, data)

    monkeypatch.setattr(capture_writer, "write_atomic", stuck_disk)
    clip = clip_factory(640, 480, fps=10, seconds=3.0, seed=6, synthetic=True)
    redis = redis_server()
    root = tmp_path / "capture"
    cameras = [{"id": f"c{i}", "url": str(clip.path), "realtime": True, "loop": True} for i in range(4)]
    config = write_config(tmp_path / "b.toml", redis_url=redis.url, cameras=cameras, extra=capture_toml(root, queue=1))
    with InProcessDaemon(config) as d:
        ids = [str(c["id"]) for c in cameras]
        try:
            wait_until(
                lambda: d.counter("beltsight_capture_dropped_total", reason="queue_full") > 0,
                120,
                "a capture to find the one-place queue full while the disk hangs",
                d,
            )
        finally:
            disk_back.set()
        wait_until(lambda: sum(inferred(d, c) for c in ids) >= 24, 120, "24 frames inferred", d)
        d.stop()
        frames = {c: inferred(d, c) for c in ids}
        written = sum(d.counter("beltsight_capture_written_total", camera=c, strategy="random") for c in ids)
        full = d.counter("beltsight_capture_dropped_total", reason="queue_full")
        gone = d.counter("beltsight_capture_dropped_total", reason="no_frame")
    for c in ids:
        assert_exactly_once_in_order(stream(redis, c), frames[c])  # every frame published, once
    assert gone == 0
    assert written + full == sum(frames.values())  # every frame was picked: written or dropped for the queue
    assert full > 0
    assert written == len(list((root / "images").rglob("*.jpg"))) == len(list((root / "labels").rglob("*.txt")))
