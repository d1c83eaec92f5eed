"""Clips: the packet ring's bounds, the recorder's choices (open, extend, drop on a full queue, never an
event), the MP4 the writer remuxes (H.264 and H.265, PyAV), retention and crash recovery."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import av
import numpy as np
import pytest
from av.video.stream import VideoStream

from daemon.config.clips import ClipsConfig
from daemon.core.frames import FrameResult
from daemon.core.metrics import Metrics
from daemon.core.objects import ObjectEvent, parse_fields
from daemon.core.packets import PacketRing
from daemon.publish.clips import ClipRecorder, resolve
from daemon.publish.clips.writer import QUEUE
from tests.support.clip_contract import check_contract, clip_facts
from tests.support.clip_ring import fill_ring
from tests.support.waits import wait_until
from tools.kit.synth.video import h264_writer

FPS = 10  # the kit's writer: a keyframe every second
KEY_MS = 1000


@pytest.fixture(scope="module")
def stream_file(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    made: dict[str, Path] = {}

    def make(codec: str) -> Path:
        if codec not in made:
            path = tmp_path_factory.mktemp("clips") / f"{codec}.mp4"
            with h264_writer(path, 320, 240, FPS, codec=codec, crf=30, preset="ultrafast") as write:
                for i in range(30 * FPS):
                    img = np.full((240, 320, 3), 40, np.uint8)
                    img[:, (i * 4) % 280 : (i * 4) % 280 + 40] = 255
                    write(img)
            made[codec] = path
        return made[codec]

    return make


def crossed(at_ms: int, track: int = 1, *, line: str = "L1", label: str = "bolt") -> ObjectEvent:
    return ObjectEvent("cam1", track, label, 0, 0.9, "crossed", at_ms, line, "in", track, 120.0)


def result(*events: ObjectEvent) -> FrameResult:
    return FrameResult("cam1", 0, events[0].at_ms, 0.0, 320, 240, 416, "m", (), objects=events)


def recorder(tmp_path: Path, ring: PacketRing, **cfg: object) -> tuple[ClipRecorder, Metrics]:
    metrics = Metrics()
    config = ClipsConfig.model_validate({"enabled": True, "dir": tmp_path / "clips", **cfg})
    return ClipRecorder(config, {"cam1": ring}, metrics), metrics


# -- the ring ---------------------------------------------------------------------------------
def test_the_ring_starts_at_a_keyframe_and_holds_keep_ms_plus_at_most_one_keyframe_interval(
    stream_file: Callable[[str], Path],
) -> None:
    ring = PacketRing("cam1", keep_ms=4000, max_bytes=2**30)
    _first, last = fill_ring(ring, stream_file("libx264"))
    _info, packets = ring.since(-1)
    assert packets[0].keyframe
    covered = last - packets[0].wall_ms
    assert 4000 <= covered <= 4000 + KEY_MS
    assert ring.nbytes == sum(len(p.data) for p in packets) + 120 * len(packets)


def test_the_byte_bound_drops_whole_groups_of_pictures(stream_file: Callable[[str], Path]) -> None:
    whole = PacketRing("cam1", keep_ms=60_000, max_bytes=2**30)
    fill_ring(whole, stream_file("libx264"))
    bound = whole.nbytes // 5
    ring = PacketRing("cam1", keep_ms=60_000, max_bytes=bound)
    fill_ring(ring, stream_file("libx264"))
    _info, packets = ring.since(-1)
    assert packets[0].keyframe
    assert ring.nbytes <= bound
    assert len(packets) < len(whole.since(-1)[1])


# -- the recorder -----------------------------------------------------------------------------
def test_a_crossing_inside_an_open_clip_extends_it_and_a_later_one_opens_another(
    tmp_path: Path, stream_file: Callable[[str], Path]
) -> None:
    ring = PacketRing("cam1", keep_ms=60_000, max_bytes=2**30)
    first, _last = fill_ring(ring, stream_file("libx264"))
    rec, _metrics = recorder(tmp_path, ring, pre_s=3, post_s=2)
    a = rec.attach(result(crossed(first + 10_000, 1))).objects[0]
    b = rec.attach(result(crossed(first + 11_000, 2))).objects[0]
    c = rec.attach(result(crossed(first + 20_000, 3))).objects[0]
    assert a.clip is not None and a.clip == b.clip != c.clip
    assert a.clip_offset_ms is not None and b.clip_offset_ms is not None
    assert 3000 <= a.clip_offset_ms <= 3000 + KEY_MS
    assert b.clip_offset_ms - a.clip_offset_ms == pytest.approx(1000, abs=60)
    assert parse_fields(b.to_fields()) == b  # the objects stream carries both fields


def test_lines_and_labels_narrow_which_crossings_get_clips(tmp_path: Path, stream_file: Callable[[str], Path]) -> None:
    ring = PacketRing("cam1", keep_ms=60_000, max_bytes=2**30)
    first, _last = fill_ring(ring, stream_file("libx264"))
    rec, _metrics = recorder(tmp_path, ring, lines=["L1"], labels=["bolt"])
    events = rec.attach(
        result(
            crossed(first + 10_000, 1),
            crossed(first + 10_000, 2, line="L2"),
            crossed(first + 10_000, 3, label="nut"),
        )
    ).objects
    assert [e.clip is not None for e in events] == [True, False, False]


def test_a_full_queue_drops_clips_never_an_event(tmp_path: Path, stream_file: Callable[[str], Path]) -> None:
    ring = PacketRing("cam1", keep_ms=60_000, max_bytes=2**30)
    first, _last = fill_ring(ring, stream_file("libx264"))
    rec, metrics = recorder(tmp_path, ring, pre_s=0.5, post_s=0.2, max_s=1)  # the thread never started
    sent = [crossed(first + 3000 + 1000 * i, i + 1) for i in range(QUEUE + 5)]
    out = [e for r in sent for e in rec.attach(result(r)).objects]
    assert [e.track for e in out] == [e.track for e in sent]  # every event, in order
    assert sum(e.clip is not None for e in out) == QUEUE
    assert all(e.clip is None and e.clip_offset_ms is None for e in out[QUEUE:])
    assert metrics.registry.get_sample_value("beltsight_clips_dropped_total", {"reason": "queue_full"}) == 5


# -- the writer -------------------------------------------------------------------------------
@pytest.mark.parametrize(("codec", "name", "tag"), [("libx264", "h264", "avc1"), ("libx265", "hevc", "hvc1")])
def test_the_writer_remuxes_a_clip_that_meets_the_contract(
    codec: str, name: str, tag: str, tmp_path: Path, stream_file: Callable[[str], Path]
) -> None:
    ring = PacketRing("cam1", keep_ms=60_000, max_bytes=2**30)
    first, _last = fill_ring(ring, stream_file(codec))
    rec, metrics = recorder(tmp_path, ring)  # pre_s 5, post_s 5: the defaults
    event = rec.attach(result(crossed(first + 12_345))).objects[0]
    assert event.clip is not None and event.clip_offset_ms is not None
    rec.start()
    try:
        wait_until(lambda: resolve(rec.root, str(event.clip)) is not None, 30, "the clip on disk")
    finally:
        rec.stop()
    facts = clip_facts(rec.root / event.clip)
    assert (facts.codec, facts.tag, facts.width, facts.height) == (name, tag, 320, 240)
    assert facts.first_s == 0.0  # rebased
    check_contract(facts, offset_ms=event.clip_offset_ms, pre_s=5, post_s=5, keyframe_interval_ms=KEY_MS)
    assert metrics.registry.get_sample_value("beltsight_clips_written_total", {"camera": "cam1"}) == 1
    assert not list(rec.root.rglob("*.part"))


def test_retention_by_age_and_size_and_unfinished_clips_recovered(
    tmp_path: Path, stream_file: Callable[[str], Path]
) -> None:
    ring = PacketRing("cam1", keep_ms=60_000, max_bytes=2**30)
    first, _last = fill_ring(ring, stream_file("libx264"))
    rec, metrics = recorder(
        tmp_path, ring, pre_s=1, post_s=1, max_s=2, max_mib=0.01, retention_days=1
    )  # clips here: ~3.3 KB
    old = rec.root / "cam1" / "2020-01-01" / "1-2.mp4"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"x" * 1000)
    os.utime(old, (time.time() - 3 * 86400,) * 2)
    crashed = rec.root / "cam1" / "2020-01-02" / ".5-6.mp4.part"
    crashed.parent.mkdir(parents=True)
    crashed.write_bytes(b"y" * 100)
    events = [rec.attach(result(crossed(first + 5000 + 4000 * i, i + 1))).objects[0] for i in range(5)]
    rec.start()
    try:
        wait_until(
            lambda: metrics.registry.get_sample_value("beltsight_clips_written_total", {"camera": "cam1"}) == 5,
            30,
            "five clips written",
        )
    finally:
        rec.stop()
    assert not old.exists()
    assert metrics.registry.get_sample_value("beltsight_clips_removed_total", {"reason": "age"}) == 1
    kept = sorted(rec.root.rglob("*.mp4"))
    assert sum(p.stat().st_size for p in kept) <= 0.01 * 2**20
    removed = metrics.registry.get_sample_value("beltsight_clips_removed_total", {"reason": "size"}) or 0
    assert removed >= 1 and len(kept) == 5 + 1 - removed  # the recovered one counts with the others
    newest = rec.root / str(events[-1].clip)
    assert newest in kept


def test_a_clip_that_cannot_be_written_is_dropped_and_counted_the_event_keeps_its_fields(
    tmp_path: Path, stream_file: Callable[[str], Path]
) -> None:
    ring = PacketRing("cam1", keep_ms=60_000, max_bytes=2**30)
    first, _last = fill_ring(ring, stream_file("libx264"))
    (tmp_path / "clips").write_bytes(b"a file where the clip directory should be")
    rec, metrics = recorder(tmp_path, ring, pre_s=1, post_s=1)
    event = rec.attach(result(crossed(first + 5000))).objects[0]
    assert event.clip is not None  # named when opened; the file then never appears
    rec.start()
    try:
        wait_until(
            lambda: metrics.registry.get_sample_value("beltsight_clips_dropped_total", {"reason": "write_error"}) == 1,
            30,
            "the clip dropped as a write error",
        )
    finally:
        rec.stop()
    assert metrics.registry.get_sample_value("beltsight_clips_written_total", {"camera": "cam1"}) is None
    later = rec.attach(result(crossed(first + 5500, 2))).objects[0]
    assert later.clip != event.clip  # a failed clip takes no more crossings


def test_a_camera_with_b_frames_gets_a_clip_on_the_same_timeline_as_its_offset(tmp_path: Path) -> None:
    """Decode order differs from display order: the clip's zero is its first keyframe's dts, so its first
    frame shows a little after 0 and `clip_offset_ms` is on that same timeline."""
    path = tmp_path / "bframes.mp4"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=FPS)
        assert isinstance(stream, VideoStream)
        stream.width, stream.height, stream.pix_fmt = 320, 240, "yuv420p"
        stream.options = {"bf": "2", "g": str(FPS), "crf": "30", "preset": "ultrafast"}
        for i in range(20 * FPS):
            img = np.full((240, 320, 3), 40, np.uint8)
            img[:, (i * 4) % 280 : (i * 4) % 280 + 40] = 255
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            frame.pts = i
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    ring = PacketRing("cam1", keep_ms=60_000, max_bytes=2**30)
    first, _last = fill_ring(ring, path)
    assert any(p.pts != p.dts for p in ring.since(-1)[1])
    rec, _metrics = recorder(tmp_path, ring)
    event = rec.attach(result(crossed(first + 9_000))).objects[0]
    assert event.clip is not None and event.clip_offset_ms is not None
    rec.start()
    try:
        wait_until(lambda: resolve(rec.root, str(event.clip)) is not None, 30, "the clip on disk")
    finally:
        rec.stop()
    facts = clip_facts(rec.root / event.clip)
    assert facts.first_s > 0
    check_contract(facts, offset_ms=event.clip_offset_ms, pre_s=5, post_s=5, keyframe_interval_ms=KEY_MS)
