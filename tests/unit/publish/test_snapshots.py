"""Snapshots: path safety, crop math, retention, the writer's queue policy and the JPEG it writes."""

from __future__ import annotations

import io
import os
from functools import partial
from pathlib import Path

import av
import numpy as np
import pytest
from PIL import Image

from daemon.config.snapshots import SnapshotsConfig
from daemon.core.frames import Detection, Frame, FrameResult, Letterbox
from daemon.core.metrics import Metrics
from daemon.core.objects import ObjectEvent, parse_fields
from daemon.core.yuv import YuvFrame, yuv_frame
from daemon.ingest.decoding import scale, scale_yuv
from daemon.publish.files.jpeg import crop_rect, decoded_of, picture_of, render
from daemon.publish.files.retention import Retention
from daemon.publish.snapshots import SnapshotWriter, resolve, snapshot_path
from tests.support.h264_frames import decoded_frames


def crossed(track: int = 7, at_ms: int = 1_700_000_000_123, camera: str = "cam1") -> ObjectEvent:
    return ObjectEvent(camera, track, "bolt", 0, 0.9, "crossed", at_ms, "L1", "in", 1, 120.0)


# -- paths -----------------------------------------------------------------------------------
def test_path_is_relative_and_named_by_camera_day_and_crossing() -> None:
    assert snapshot_path(crossed()) == "cam1/2023-11-14/1700000000123-7-L1-in.jpg"


def test_resolve_finds_a_file_inside(tmp_path: Path) -> None:
    (tmp_path / "cam1" / "d").mkdir(parents=True)
    (tmp_path / "cam1" / "d" / "a.jpg").write_bytes(b"x")
    assert resolve(tmp_path, "cam1/d/a.jpg") == (tmp_path / "cam1" / "d" / "a.jpg").resolve()


@pytest.mark.parametrize(
    "requested",
    ["../secret.jpg", "cam1/../../secret.jpg", "/etc/passwd", "cam1//a.jpg", "./a.jpg", "cam1/.hidden.jpg",
     "a.txt", "cam1\\..\\a.jpg", "cam1/d/missing.jpg", "cam1/d", "", "a/b/c/d.jpg"],
)  # fmt: skip
def test_resolve_refuses_anything_else(tmp_path: Path, requested: str) -> None:
    root = tmp_path / "snaps"
    (root / "cam1" / "d").mkdir(parents=True)
    (root / "cam1" / "d" / "a.jpg").write_bytes(b"x")
    (root / "cam1" / ".hidden.jpg").write_bytes(b"x")
    (tmp_path / "secret.jpg").write_bytes(b"secret")
    assert resolve(root, requested) is None


def test_resolve_refuses_symlinks_that_escape(tmp_path: Path) -> None:
    root = tmp_path / "snaps"
    (root / "cam1").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.jpg").write_bytes(b"secret")
    os.symlink(outside / "x.jpg", root / "cam1" / "file.jpg")
    os.symlink(outside, root / "cam2")
    (root / "cam1" / "real.jpg").write_bytes(b"ok")
    os.symlink(root / "cam1" / "real.jpg", root / "cam1" / "inside.jpg")
    assert resolve(root, "cam1/file.jpg") is None
    assert resolve(root, "cam2/x.jpg") is None
    assert resolve(root, "cam1/inside.jpg") == (root / "cam1" / "real.jpg").resolve()


# -- crop ------------------------------------------------------------------------------------
def test_crop_grows_the_box_by_a_quarter_with_even_edges() -> None:
    assert crop_rect((100.0, 200.0, 180.0, 240.0), 1280, 720) == (80, 190, 200, 250)


def test_crop_is_clipped_to_the_frame_and_keeps_a_minimum_margin() -> None:
    assert crop_rect((0.0, 0.0, 10.0, 10.0), 641, 481) == (0, 0, 18, 18)
    assert crop_rect((630.0, 470.0, 641.0, 481.0), 641, 481) == (622, 462, 641, 481)


def test_a_degenerate_box_gives_the_whole_frame() -> None:
    assert crop_rect((50.0, 40.0, 50.0, 40.0), 64, 48) == (42, 32, 58, 48)
    assert crop_rect((900.0, 900.0, 950.0, 950.0), 64, 48) == (0, 0, 64, 48)


# -- retention ---------------------------------------------------------------------------------
def _file(root: Path, name: str, size: int, mtime: float) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    os.utime(path, (mtime, mtime))
    return path


def test_retention_removes_the_oldest_by_size_then_by_age(tmp_path: Path) -> None:
    old = _file(tmp_path, "c/2024-01-01/a.jpg", 100, 1000.0)
    mid = _file(tmp_path, "c/2024-01-02/b.jpg", 100, 2000.0)
    new = _file(tmp_path, "c/2024-01-02/c.jpg", 100, 3000.0)
    (tmp_path / "c" / "notes.txt").write_text("not a snapshot")
    retention = Retention(tmp_path, retain_s=10_000.0, max_bytes=250)
    retention.scan()
    assert (len(retention), retention.total_bytes) == (3, 300)
    assert retention.expire(3500.0) == (0, 1)
    assert not old.exists() and not old.parent.exists()  # its day's folder went with it
    assert mid.exists() and new.exists()
    assert retention.expire(12_500.0) == (1, 0)  # mid is older than 10,000 s now
    assert not mid.exists() and new.exists() and new.parent.exists()
    retention.added(tmp_path / "c/2024-01-02/d.jpg", 200, 12_600.0)
    assert retention.expire(12_600.0, incoming=0) == (0, 1)  # 300 > 250: the oldest goes, not the new one
    assert not new.exists() and retention.total_bytes == 200


# -- the writer ---------------------------------------------------------------------------------
def _vframes(width: int = 320, height: int = 240, count: int = 2) -> list[av.VideoFrame]:
    """Real decoded yuv420p frames: a mid-grey picture with a white square, through libx264 and back."""
    return decoded_frames(count, width, height, (slice(100, 140), slice(100, 160)))


def _frame(vframe: av.VideoFrame, mono: float = 1.0) -> Frame:
    lb = Letterbox.fit(vframe.width, vframe.height, 640)
    return Frame("cam1", 0, 1_700_000_000_000, mono, lb, partial(scale, vframe, lb))  # as the reader makes it


def _result(
    frame: Frame, events: tuple[ObjectEvent, ...], box: tuple[float, ...] = (100, 100, 160, 140)
) -> FrameResult:
    det = Detection(0, "bolt", 0.9, (box[0], box[1], box[2], box[3]), track=7)
    return FrameResult("cam1", frame.seq, frame.captured_ms, frame.captured_mono, frame.width, frame.height, 640, "m",
                       (det,), objects=events)  # fmt: skip


def test_the_decoded_frame_is_found_behind_the_cpu_paths_scaler() -> None:
    vframe = _vframes()[0]
    lb = Letterbox.fit(320, 240, 640)
    assert decoded_of(Frame("c", 0, 0, 0.0, lb, partial(scale, vframe, lb))) is vframe
    picture = picture_of(Frame("c", 0, 0, 0.0, lb, partial(scale, vframe, lb)))
    assert picture.y is not None and picture.rgb is None and (picture.width, picture.height) == (320, 240)


def test_a_decoder_processs_yuv_slot_is_the_picture_as_the_decoded_frame_is() -> None:
    """Lanes on the device fed by decoder processes: `Frame.decoded` is a host `YuvFrame` (the slot's
    planes); the snapshot's picture is made from its planes as from the decoded frame's."""
    vframe = _vframes()[0]
    lb = Letterbox.fit(320, 240, 640)
    yuv = yuv_frame(vframe, np)
    copied = YuvFrame(320, 240, np.array(yuv.y[:, :320]), *(np.array(p) for p in yuv.chroma_planes()))
    frame = Frame("c", 0, 0, 0.0, lb, partial(scale_yuv, copied, lb), decoded=copied)
    assert decoded_of(frame) is copied
    got, want = picture_of(frame), picture_of(Frame("c", 0, 0, 0.0, lb, partial(scale, vframe, lb)))
    for a, b in ((got.y, want.y), (got.u, want.u), (got.v, want.v)):
        assert a is not None and b is not None
        np.testing.assert_array_equal(a, b)
    assert (got.width, got.height, got.rgb, got.full_range) == (320, 240, None, want.full_range)


@pytest.mark.parametrize(("crop", "size"), [(False, (320, 240)), (True, (92, 60))])
def test_render_from_yuv_is_a_faithful_jpeg(crop: bool, size: tuple[int, int]) -> None:
    vframe = _vframes()[0]
    lb = Letterbox.fit(320, 240, 640)
    picture = picture_of(Frame("c", 0, 0, 0.0, lb, partial(scale, vframe, lb)))
    jpeg = render(picture, (100.0, 100.0, 160.0, 140.0), 1, crop=crop, draw_box=False, quality=90)
    image = np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB")).astype(int)
    assert (image.shape[1], image.shape[0]) == size
    cy, cx = (120, 130) if not crop else (120 - 90, 130 - 84)
    assert abs(image[cy, cx] - 255).max() <= 12  # the white square stays white (levels stretched to full range)
    assert abs(image[5, 5] - 128).max() <= 12  # and the grey stays grey


def test_render_draws_the_box_in_its_class_colour() -> None:
    vframe = _vframes()[0]
    lb = Letterbox.fit(320, 240, 640)
    picture = picture_of(Frame("c", 0, 0, 0.0, lb, partial(scale, vframe, lb)))
    jpeg = render(picture, (40.0, 40.0, 200.0, 200.0), 1, crop=False, draw_box=True, quality=95)  # cyan
    image = np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB")).astype(int)
    r, g, b = image[120, 41]
    assert r < 80 and g > 180 and b > 180
    assert abs(image[60, 60] - 128).max() <= 12  # inside the box: untouched


def test_render_from_rgb_planes_when_there_is_no_decoded_frame() -> None:
    planes = np.full((3, 48, 64), 200, np.uint8)
    lb = Letterbox.fit(128, 96, 64)
    frame = Frame("c", 0, 0, 0.0, lb, (planes[0], planes[1], planes[2]))
    picture = picture_of(frame)
    jpeg = render(picture, (0.0, 0.0, 64.0, 48.0), 0, crop=True, draw_box=False, quality=90)
    assert Image.open(io.BytesIO(jpeg)).size == (
        40,
        32,
    )  # box scaled by 1/2 (32 x 24), grown by 8 px (the minimum margin), clipped


def _writer(tmp_path: Path, **kw: object) -> tuple[SnapshotWriter, Metrics]:
    metrics = Metrics()
    cfg = SnapshotsConfig(enabled=True, dir=tmp_path / "snaps", **kw)  # type: ignore[arg-type]
    return SnapshotWriter(cfg, metrics), metrics


def _value(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_attach_queues_and_names_the_snapshot_then_the_thread_writes_it(tmp_path: Path) -> None:
    writer, metrics = _writer(tmp_path, crop=True)
    frame = _frame(_vframes()[0])
    writer.observe([frame], [_result(frame, ())])
    out = writer.attach(_result(frame, (crossed(),)))
    event = out.objects[0]
    assert event.snapshot == snapshot_path(crossed())
    assert parse_fields(event.to_fields()).snapshot == event.snapshot  # through the stream and back
    writer.start()
    writer.stop()
    path = resolve(writer.root, event.snapshot)
    assert path is not None
    with Image.open(path) as image:
        assert (image.format, image.size) == ("JPEG", (92, 60))  # crop = true: the part with its margin
    assert _value(metrics, "beltsight_snapshots_written_total", camera="cam1") == 1
    assert _value(metrics, "beltsight_snapshots_bytes") == path.stat().st_size


def test_a_full_queue_drops_the_snapshot_not_the_event(tmp_path: Path) -> None:
    writer, metrics = _writer(tmp_path, queue=1)  # not started: nothing takes jobs
    frames = [_frame(v, mono=float(i)) for i, v in enumerate(_vframes(count=2))]
    writer.observe(frames, [_result(f, ()) for f in frames])
    first = writer.attach(_result(frames[0], (crossed(1),)))
    second = writer.attach(_result(frames[1], (crossed(2), ObjectEvent("cam1", 3, "nut", 1, 0.5, "new", 5))))
    assert first.objects[0].snapshot is not None
    assert second.objects[0].snapshot is None and second.objects[0].track == 2
    assert len(second.objects) == 2 and second.objects[1].event == "new"
    assert _value(metrics, "beltsight_snapshots_dropped_total", reason="queue_full") == 1


def test_a_result_whose_frame_is_gone_gets_no_snapshot_and_older_frames_are_freed(tmp_path: Path) -> None:
    writer, metrics = _writer(tmp_path)
    frames = [_frame(v, mono=float(i)) for i, v in enumerate(_vframes(count=2))]
    writer.observe(frames, [_result(f, ()) for f in frames])
    writer.attach(_result(frames[1], ()))  # frame 0's result never came (an engine error): freed too
    late = writer.attach(_result(frames[0], (crossed(),)))
    assert late.objects[0].snapshot is None
    assert _value(metrics, "beltsight_snapshots_dropped_total", reason="no_frame") == 1


def test_a_write_that_fails_is_counted_and_leaves_no_file(tmp_path: Path) -> None:
    writer, metrics = _writer(tmp_path)
    frame = _frame(_vframes()[0])
    writer.observe([frame], [_result(frame, ())])
    event = writer.attach(_result(frame, (crossed(),))).objects[0]
    writer.root.mkdir(parents=True)
    (writer.root / "cam1").write_text("a file where the camera's folder should be")
    writer.start()
    writer.stop()
    assert event.snapshot is not None and resolve(writer.root, event.snapshot) is None
    assert _value(metrics, "beltsight_snapshots_dropped_total", reason="write_error") == 1


def test_snapshot_is_only_allowed_on_crossed_events() -> None:
    with pytest.raises(ValueError, match="snapshot"):
        ObjectEvent("cam1", 1, "bolt", 0, 0.9, "new", 5, snapshot="x.jpg")
    fields = crossed().to_fields()
    assert "snapshot" not in fields
    fields_new = ObjectEvent("cam1", 1, "bolt", 0, 0.9, "new", 5).to_fields() | {"snapshot": "x.jpg"}
    with pytest.raises(ValueError, match="snapshot"):
        parse_fields(fields_new)


def test_config_needs_a_dir_when_enabled() -> None:
    with pytest.raises(ValueError, match="dir"):
        SnapshotsConfig(enabled=True)
    assert SnapshotsConfig().enabled is False
