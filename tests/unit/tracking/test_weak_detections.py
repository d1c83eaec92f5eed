"""The tracking stage with a tracked camera's weak detections (under `conf_threshold`, from
`[tracking] low_score`): they keep a track alive through the second stage, and are never passed on."""

from __future__ import annotations

import dataclasses

from daemon.config.cameras import CameraConfig
from daemon.config.tracking import TrackingConfig
from daemon.core.frames import Detection, FrameResult
from daemon.core.metrics import Metrics
from daemon.tracking.stage import TrackingStage

W, H, FPS, SPEED = 640, 480, 25, 100.0  # px/s: the part crosses x = 320 at t = 2.7 s


def stage() -> TrackingStage:
    line = {"id": "gate", "start": (0.5, 0.0), "end": (0.5, 1.0)}
    camera = CameraConfig.model_validate({"id": "cam", "url": "rtsp://h/s", "lines": [line]})
    return TrackingStage([camera], TrackingConfig(), Metrics())


def frames(*, weak_gap: bool) -> list[FrameResult]:
    """A part moving right; from 2.0 to 3.5 s (longer than `lost_s`) the detector scores it 0.18,
    under a 0.25 threshold: weak when `weak_gap`, else not seen at all (what the tracker got before)."""
    out = []
    for i in range(int(6 * FPS)):
        t = i / FPS
        x = 50 + SPEED * t
        det = Detection(0, "bolt", 0.85, (x - 20, 220.0, x + 20, 260.0))
        faint = 2.0 <= t < 3.5
        weak = (Detection(0, "bolt", 0.18, det.box),) if faint and weak_gap else ()
        out.append(
            FrameResult(
                "cam", i, 1_796_000_000_000 + round(t * 1000), 0.0, W, H, 640, "m", () if faint else (det,), weak=weak
            )
        )
    return out


def run(results: list[FrameResult]) -> tuple[set[int], list[str], list[FrameResult]]:
    s = stage()
    out = [s.process(r) for r in results]
    ids = {d.track for r in out for d in r.detections if d.track is not None}
    crossed = [e.direction for r in out for e in r.objects if e.event == "crossed"]
    return ids, crossed, out


def test_weak_sightings_carry_a_track_across_the_line_with_one_id() -> None:
    ids, crossed, out = run(frames(weak_gap=True))
    assert len(ids) == 1 and crossed == ["in"]
    assert all(r.weak == () for r in out)  # consumed here: the sink never sees them
    assert all(d.score > 0.5 for r in out for d in r.detections)  # and none of them is published


def test_without_them_the_track_is_lost_and_the_part_gets_a_second_id() -> None:
    ids, crossed, _ = run(frames(weak_gap=False))
    assert len(ids) == 2 and crossed == []  # the control: what the weak ones fix


def test_an_out_of_order_frame_passes_untracked_without_its_weak_ones() -> None:
    s = stage()
    results = frames(weak_gap=True)
    s.process(results[60])
    late = s.process(results[59])
    assert late.weak == () and late.objects == ()


def test_a_part_seen_only_weakly_never_starts_a_track() -> None:
    """Weak detections extend tracks but start none: a part published in no frame is never counted."""
    results = [
        FrameResult("cam", r.seq, r.captured_ms, 0.0, W, H, 640, "m", (), weak=r.weak or r.detections)
        for r in frames(weak_gap=True)
    ]
    s = stage()
    out = [s.process(r) for r in results]
    assert [e for r in out for e in r.objects] == [] and s.snapshot()["cam"].next_track_id == 1


def _published_then_weak(published: int) -> list[FrameResult]:
    """The part's first `published` frames at 0.3 (published, not high), then only weak sightings."""
    out = []
    for r in frames(weak_gap=True)[:40]:
        det = Detection(0, "bolt", 0.3, (r.detections + r.weak)[0].box)
        faint = r.seq >= published
        out.append(dataclasses.replace(r, detections=() if faint else (det,), weak=(det,) if faint else ()))
    return out


def test_only_published_sightings_confirm_a_track() -> None:
    """Weak sightings keep a track alive but do not count towards `min_hits`: 2 published ones never confirm it."""
    s = stage()
    assert [e for r in _published_then_weak(2) for e in s.process(r).objects] == []
    s = stage()
    assert [e.event for r in _published_then_weak(3) for e in s.process(r).objects] == ["new"]
