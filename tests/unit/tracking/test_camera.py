"""CameraTracker: event order and content, ids and counts across restarts, ETAs, the time-based life."""

from __future__ import annotations

import numpy as np
import pytest

from daemon.core.objects import ObjectEvent, parse_fields
from daemon.tracking import CameraTracker, GateSpec, LineSpec, TrackerParams
from daemon.tracking.speed import BeltSpeed, eta_speed_px_s, gate_etas
from tests.support.tracking_scenes import Part, Scene, crossings, lane_parts, run_scene, vertical_line_at

T0 = 1_700_000_000_000
LINE = LineSpec("L", *vertical_line_at(640.0))


def _one(
    tracker: CameraTracker,
    ms: int,
    x: float,
    score: float = 0.9,
    *,
    y: float = 300.0,
    size: tuple[int, int] = (1280, 720),
) -> tuple[int | None, tuple[ObjectEvent, ...]]:
    upd = tracker.update(
        ms, size[0], size[1], np.array([[x - 25, y - 20, x + 25, y + 20]]), np.array([score]), np.array([2]), ["washer"]
    )
    (tid,) = upd.track_ids
    return tid, upd.events


def test_events_in_order_with_contract_fields() -> None:
    tracker = CameraTracker("cam1", [LINE])
    scene = Scene([Part(-30.0, 300.0, 250.0, cls=3)], duration_s=7.0, noise_px=0.5)
    run = run_scene(tracker, scene)
    kinds = [e.event for e in run.events]
    assert kinds == ["new", "crossed", "end"]
    new, crossed, end = run.events
    assert new.track == crossed.track == end.track == 1
    assert new.at_ms == T0 + 133  # first frame with the centre inside the frame: k = 4 (x = 3.3)
    assert new.label == "l_bracket" and new.cls == 3
    assert crossed.count == 1 and crossed.direction == "in" and crossed.line == "L"
    assert end.first_ms == new.at_ms and end.last_ms == end.at_ms
    assert end.frames == sum(1 for k in range(210) if 0 <= -30 + 250 * k / 30 <= 1280)
    assert [parse_fields(e.to_fields()) for e in run.events] == run.events


def test_first_track_id_and_counts_continue_across_restarts() -> None:
    parts = lane_parts(3, speed=300.0, spacing=150.0)
    scene = Scene(parts, duration_s=8.0)
    tracker = CameraTracker("cam1", [LINE], first_track_id=1000, counts={("L", "in"): 41, ("L", "out"): 3})
    run = run_scene(tracker, scene)
    assert sorted(e.track for e in run.events if e.event == "new") == list(range(1000, 1006))
    assert tracker.next_track_id == 1006
    assert sorted(e.count or 0 for e in crossings(run, "L")) == list(range(42, 48))
    assert [e.count for e in sorted(crossings(run, "L"), key=lambda e: e.at_ms)] == list(range(42, 48))
    assert tracker.counts == {("L", "in"): 47, ("L", "out"): 3}
    with pytest.raises(ValueError, match="counts"):
        CameraTracker("cam1", [LINE], counts={("M", "in"): 1})


def test_eta_arithmetic_uses_the_track_speed() -> None:
    gates = (GateSpec("flap-a", 500.0), GateSpec("flap-b", 1250.0))
    line = LineSpec("L", *vertical_line_at(640.0), gates=gates)
    tracker = CameraTracker("cam1", [line], mm_per_px=0.5)
    run = run_scene(tracker, Scene([Part(-30.0, 300.0, 250.0)], duration_s=7.0, noise_px=0.3))
    (e,) = crossings(run, "L")
    assert e.speed_px_s is not None and abs(e.speed_px_s - 250.0) < 5.0
    assert e.speed_mm_s == pytest.approx(e.speed_px_s * 0.5, abs=0.06)
    assert e.eta is not None
    eta = dict(e.eta)
    # 500 mm at ~125 mm/s is ~4 s after the crossing; 1250 mm ~10 s
    assert abs(eta["flap-a"] - (e.at_ms + 4000)) < 80 and abs(eta["flap-b"] - (e.at_ms + 10_000)) < 200
    speed_mm_s = e.speed_px_s * 0.5
    assert abs(eta["flap-a"] - (e.at_ms + 500.0 / speed_mm_s * 1000.0)) <= 2
    assert '"flap-a":' in e.to_fields()["eta"]


def test_eta_policy_functions() -> None:
    assert gate_etas(1000, (GateSpec("g", 300.0),), 200.0, 0.5) == (("g", 4000),)
    assert eta_speed_px_s(200.0, True, 150.0, 20.0) == 200.0
    assert eta_speed_px_s(200.0, False, 150.0, 20.0) == 150.0  # young track: the belt
    assert eta_speed_px_s(5.0, True, 150.0, 20.0) == 150.0  # too slow: the belt
    assert eta_speed_px_s(5.0, True, 10.0, 20.0) is None  # belt stopped too
    assert eta_speed_px_s(-200.0, True, None, 20.0) is None
    belt = BeltSpeed(tau_s=0.5)
    assert belt.update(0, [], 20.0) is None
    assert belt.update(0, [100.0, 110.0, 1.0, 400.0, 105.0], 20.0) == 107.5  # median of the moving four
    assert belt.update(500, [0.0, 1.0], 20.0) == pytest.approx(107.5 * np.exp(-1.0))  # stopped: decays to 0


def test_uncalibrated_crossings_have_no_mm_or_eta() -> None:
    line = LineSpec("L", *vertical_line_at(640.0), gates=(GateSpec("g", 100.0),))
    run = run_scene(CameraTracker("cam1", [line]), Scene([Part(-30.0, 300.0, 250.0)], duration_s=7.0))
    (e,) = crossings(run, "L")
    assert e.speed_mm_s is None and e.eta is None and "eta" not in e.to_fields()


def test_lost_track_ends_after_lost_s_of_capture_time_not_frames() -> None:
    tracker = CameraTracker("cam1", [LINE], TrackerParams(lost_s=1.0))
    for k in range(10):
        tid, _ = _one(tracker, T0 + k * 33, 100.0 + 5 * k)
    assert tid == 1
    last_seen = T0 + 9 * 33
    for ms in (last_seen + 500, last_seen + 1000):  # two empty frames, 1 s after: still lost, not ended
        upd = tracker.update(ms, 1280, 720, np.zeros((0, 4)), np.zeros(0), np.zeros(0, dtype=int), [])
        assert upd.events == () and tracker.active_tracks == 1
    upd = tracker.update(last_seen + 1001, 1280, 720, np.zeros((0, 4)), np.zeros(0), np.zeros(0, dtype=int), [])
    (end,) = upd.events
    assert end.event == "end" and end.at_ms == last_seen and end.frames == 10 and tracker.active_tracks == 0


def test_a_lost_track_is_recovered_within_lost_s() -> None:
    tracker = CameraTracker("cam1", [LINE])
    for k in range(10):
        _one(tracker, T0 + k * 33, 100.0 + 5 * k)
    tid, events = _one(tracker, T0 + 9 * 33 + 800, 100.0 + 5 * 9 + 5 * 800 / 33)  # 0.8 s gap, predicted on
    assert tid == 1 and events == ()


@pytest.mark.parametrize(("low_score", "survives"), [(0.1, True), (0.4, False)])
def test_low_score_detections_keep_a_track_alive(low_score: float, survives: bool) -> None:
    """Second association stage: 0.3 detections (under high_score) extend the track; ignored, it ends."""
    tracker = CameraTracker("cam1", [LINE], TrackerParams(low_score=low_score, lost_s=0.5))
    ids, ends = [], []
    for k in range(60):
        score = 0.9 if k < 10 or k >= 50 else 0.3
        tid, events = _one(tracker, T0 + k * 33, 100.0 + 5 * k, score)
        ids.append(tid)
        ends += [e for e in events if e.event == "end"]
    if survives:
        assert set(ids) == {None, 1} and not ends
    else:
        assert len(ends) == 1 and ids[-1] == 2


def test_a_part_scored_under_high_score_all_along_becomes_one_track_after_low_confirm_s() -> None:
    """A part cut by the frame's edge scores ~0.3 in every frame: the second stage extends its tentative
    track (ByteTrack would start a new tentative track each frame and never count it)."""
    tracker = CameraTracker("cam1", [LINE], TrackerParams(low_confirm_s=0.3))
    ids, events = [], []
    for k in range(60):
        tid, ev = _one(tracker, T0 + k * 33, 500.0 + 5 * k, 0.3)  # crosses x = 640 at k = 28
        ids.append(tid)
        events += ev
    assert ids == [None] * 10 + [1] * 50  # 0.33 s after the first sighting
    assert [e.event for e in events] == ["new", "crossed"] and events[1].count == 1
    assert abs(events[1].at_ms - (T0 + 28 * 33)) <= 1


def test_a_low_score_flicker_shorter_than_low_confirm_s_never_becomes_a_track() -> None:
    tracker = CameraTracker("cam1", [LINE], TrackerParams(low_confirm_s=0.3))
    for k in range(8):  # 0.23 s of 0.3 detections, then nothing
        tid, events = _one(tracker, T0 + k * 33, 630.0 + 5 * k, 0.3)
        assert tid is None and events == ()
    for k in range(8, 60):
        upd = tracker.update(T0 + k * 33, 1280, 720, np.zeros((0, 4)), np.zeros(0), np.zeros(0, dtype=int), [])
        assert upd.events == ()
    assert tracker.next_track_id == 1 and tracker.counts[("L", "in")] == 0


def test_a_lost_track_is_taken_back_by_a_low_score_detection() -> None:
    tracker = CameraTracker("cam1", [LINE], TrackerParams(lost_s=1.0))
    for k in range(10):
        _one(tracker, T0 + k * 33, 100.0 + 5 * k)
    for k in range(10, 20):  # 0.33 s unseen: lost, not ended
        tracker.update(T0 + k * 33, 1280, 720, np.zeros((0, 4)), np.zeros(0), np.zeros(0, dtype=int), [])
    tid, events = _one(tracker, T0 + 20 * 33, 100.0 + 5 * 20, 0.3)  # where it was predicted, under high_score
    assert tid == 1 and events == () and tracker.next_track_id == 2


def test_a_part_never_scored_new_track_score_is_confirmed_after_low_confirm_s() -> None:
    tracker = CameraTracker("cam1", [LINE], TrackerParams(low_confirm_s=0.3))
    ids = [_one(tracker, T0 + k * 33, 100.0 + 5 * k, 0.55)[0] for k in range(14)]  # high, under 0.6
    assert ids == [None] * 10 + [1] * 4  # 0.33 s after the first sighting, not at 3 hits / 0.1 s


def test_a_second_box_on_a_tracked_part_never_starts_a_second_track() -> None:
    """The detector's same box under a second class (class-aware NMS) must not become a second track."""
    tracker = CameraTracker("cam1", [LINE])
    events: list[ObjectEvent] = []
    for k in range(60):
        x = 500.0 + 10 * k
        box = [x - 25, 280.0, x + 25, 320.0]
        second = [x - 24, 281.0, x + 25, 320.0]
        dets = [box, second] if k >= 5 else [box]
        upd = tracker.update(
            T0 + k * 33,
            1280,
            720,
            np.array(dets),
            np.array([0.9, 0.8][: len(dets)]),
            np.array([2, 1][: len(dets)]),
            ["washer", "bolt"][: len(dets)],
        )
        events += upd.events
        assert upd.track_ids[0] == (1 if k >= 4 else None)  # confirmed at 0.13 s
        assert all(t is None for t in upd.track_ids[1:])
    assert [e.event for e in events] == ["new", "crossed"]


def test_a_tentative_track_lives_through_a_missed_frame() -> None:
    tracker = CameraTracker("cam1", [LINE])
    ids = []
    for k in range(9):
        if k == 2:  # seen twice, then missed once: it stays
            tracker.update(T0 + k * 33, 1280, 720, np.zeros((0, 4)), np.zeros(0), np.zeros(0, dtype=int), [])
            continue
        ids.append(_one(tracker, T0 + k * 33, 100.0 + 5 * k)[0])
    assert ids == [None] * 3 + [1] * 5 and tracker.next_track_id == 2  # confirmed at k = 4 (0.13 s, 4 hits)


def test_confirmation_needs_confirm_s_and_min_hits() -> None:
    tracker = CameraTracker("cam1", [LINE], TrackerParams(confirm_s=0.5, min_hits=3))
    ids = [_one(tracker, T0 + k * 100, 100.0 + 10 * k)[0] for k in range(8)]
    assert ids == [None] * 5 + [1, 1, 1]  # hits 3 at k=2, but 0.5 s only at k=5
    tracker = CameraTracker("cam1", [LINE], TrackerParams(confirm_s=0.0, min_hits=4))
    ids = [_one(tracker, T0 + k * 100, 100.0 + 10 * k)[0] for k in range(6)]
    assert ids == [None] * 3 + [1, 1, 1]


def test_crossing_while_tentative_is_emitted_after_new() -> None:
    tracker = CameraTracker("cam1", [LINE], TrackerParams(confirm_s=0.3))
    events: list[ObjectEvent] = []
    for k in range(20):
        events += _one(tracker, T0 + k * 33, 620.0 + 10 * k)[1]  # first seen 20 px before the line
    assert [e.event for e in events] == ["new", "crossed"]
    assert abs(events[1].at_ms - (T0 + 66)) <= 1  # 620 + 20 at k=2


def test_out_of_order_and_repeated_times_break_nothing() -> None:
    tracker = CameraTracker("cam1", [LINE])
    for k in range(10):
        _one(tracker, T0 + k * 33, 100.0 + 5 * k)
    for ms in (T0 + 9 * 33, T0 + 5 * 33, T0 - 60_000):  # repeat, back, far back (a camera clock reset)
        tid, events = _one(tracker, ms, 145.0)
        assert tid == 1 and events == ()
    tid, events = _one(tracker, T0 - 60_000 + 33, 150.0)
    assert tid == 1 and events == ()
    (end,) = tracker.finish(T0 - 60_000 + 33)  # its last sighting is now before its first: clamped, no error
    assert end.event == "end" and end.first_ms == end.last_ms == T0 - 60_000 + 33 and end.frames == 14


def test_resolution_change_rescales_without_fake_crossings() -> None:
    """The stream drops from 1280x720 to 640x360 with a part 10 px before the line: no crossing, same id."""
    tracker = CameraTracker("cam1", [LINE])
    events: list[ObjectEvent] = []
    for k in range(20):
        tid, ev = _one(tracker, T0 + k * 33, 440.0 + 10 * k)
        events += ev
    for k in range(20, 23):  # x = 640 + 10 (k - 21) - 10 in the big frame, half of it in the small one
        tid, ev = _one(tracker, T0 + k * 33, (440.0 + 10 * k - 20) / 2, y=150.0, size=(640, 360))
        events += ev
        assert tid == 1
    assert [e.event for e in events] == ["new"]
    for k in range(23, 30):
        tid, ev = _one(tracker, T0 + k * 33, (440.0 + 10 * k - 20) / 2, y=150.0, size=(640, 360))
        events += ev
    assert [e.event for e in events] == ["new", "crossed"] and tid == 1


def test_finish_ends_every_live_track() -> None:
    tracker = CameraTracker("cam1", [LINE])
    scene = Scene(lane_parts(3, speed=250.0, spacing=150.0), duration_s=2.5)
    run = run_scene(tracker, scene, finish=False)
    live = tracker.active_tracks
    assert live > 0
    ends = tracker.finish(T0 + 2500)
    assert len(ends) == live and all(e.event == "end" and e.at_ms <= T0 + 2500 for e in ends)
    assert tracker.active_tracks == 0 and tracker.finish(T0 + 3000) == ()
    assert {e.track for e in ends} <= {e.track for e in run.events if e.event == "new"}


def test_input_validation() -> None:
    tracker = CameraTracker("cam1", [LINE])
    with pytest.raises(ValueError, match="boxes"):
        tracker.update(T0, 1280, 720, np.zeros((2, 3)), np.zeros(2), np.zeros(2, dtype=int), ["a", "b"])
    with pytest.raises(ValueError, match="labels"):
        tracker.update(T0, 1280, 720, np.zeros((2, 4)), np.zeros(2), np.zeros(2, dtype=int), ["a"])
    with pytest.raises(ValueError, match="classes"):
        tracker.update(T0, 1280, 720, np.zeros((1, 4)), np.ones(1), np.array([-1]), ["a"])
    with pytest.raises(ValueError, match="frame size"):
        tracker.update(T0, 0, 720, np.zeros((0, 4)), np.zeros(0), np.zeros(0, dtype=int), [])
    with pytest.raises(ValueError, match="mm_per_px"):
        CameraTracker("cam1", [LINE], mm_per_px=0.0)
    with pytest.raises(ValueError, match="duplicate"):
        CameraTracker("cam1", [LINE, LINE])
    with pytest.raises(ValueError, match="new_track_score"):
        TrackerParams(new_track_score=0.4)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"start": (0.5, 0.5), "end": (0.5, 0.5)}, "same point"),
        ({"start": (1.5, 0.0), "end": (0.5, 1.0)}, "start"),
        ({"start": (0.5, 0.0), "end": (0.5, 1.0), "direction": (0.0, 0.0)}, "direction"),
        ({"start": (0.5, 0.0), "end": (0.5, 1.0), "direction": (0.0, 1.0)}, "runs along the line"),
        ({"start": (0.5, 0.0), "end": (0.5, 1.0), "gates": (GateSpec("g", 1.0), GateSpec("g", 2.0))}, "used twice"),
    ],
)
def test_line_spec_sanity(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LineSpec("L", **kwargs)  # type: ignore[arg-type]
