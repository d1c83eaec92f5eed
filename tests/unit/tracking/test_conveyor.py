"""Synthetic conveyor scenes: every part counted exactly once, no id switches, interpolated crossing times."""

from __future__ import annotations

import math

import numpy as np
import pytest

from daemon.tracking import CameraTracker, LineSpec, TrackerParams
from tests.support.tracking_scenes import (
    Part,
    Run,
    Scene,
    belt_stop_and_go,
    crossings,
    lane_parts,
    part_of,
    run_scene,
    vertical_line_at,
)

LINE_X = 640.0
W_PX = 1280


def _tracker(params: TrackerParams | None = None, line_x: float = LINE_X) -> CameraTracker:
    start, end = vertical_line_at(line_x)
    return CameraTracker("cam1", [LineSpec("L", start, end)], params or TrackerParams())


def _assert_clean(
    run: Run, scene: Scene, *, line_x: float = LINE_X, max_err_frames: float = 0.4, loose: frozenset[int] = frozenset()
) -> None:
    """Each part crossing the line counted once, one id per part, one part per id, times interpolated."""
    end_ms = scene.t0_ms + scene.duration_s * 1000.0 - 300.0  # later crossings may not clear the band in time
    expected = {i for i in range(len(scene.parts)) if (scene.crossing_ms(i, line_x) or math.inf) < end_ms}
    assert expected, "the scene must make parts cross"
    counted: dict[int, int] = {}
    errors = []
    for e in crossings(run, "L"):
        part = part_of(run, e.track)
        counted[part] = counted.get(part, 0) + 1
        truth = scene.crossing_ms(part, line_x)
        assert truth is not None
        if part not in loose:
            errors.append(abs(e.at_ms - truth))
    assert counted == dict.fromkeys(expected, 1) | {p: 1 for p in counted if p not in expected}
    assert all(len(ids) == 1 for ids in run.ids_per_part.values()), run.ids_per_part
    assert all(len(parts) == 1 for parts in run.parts_per_id.values()), run.parts_per_id
    frame_ms = 1000.0 / scene.fps
    assert max(errors) <= max_err_frames * frame_ms, (max(errors), frame_ms)


@pytest.mark.parametrize("speed", [100.0, 250.0, 500.0])
@pytest.mark.parametrize("spacing", [150.0, 80.0])
def test_constant_speed_lanes(speed: float, spacing: float) -> None:
    parts = lane_parts(12, speed=speed, spacing=spacing)
    scene = Scene(parts, duration_s=(W_PX + 100 + 12 * spacing) / speed + 1.0, seed=int(speed + spacing))
    tracker = _tracker()
    run = run_scene(tracker, scene)
    _assert_clean(run, scene)
    news = [e for e in run.events if e.event == "new"]
    ends = [e for e in run.events if e.event == "end"]
    assert len(news) == len(ends) == len(parts)
    assert tracker.counts == {("L", "in"): len(parts), ("L", "out"): 0}
    assert tracker.belt_speed_px_s is not None and math.isclose(tracker.belt_speed_px_s, speed, rel_tol=0.03)


def test_two_identical_parts_side_by_side_cross_together() -> None:
    scene = Scene([Part(-30.0, 300.0, 200.0), Part(-30.0, 345.0, 200.0)], duration_s=8.0)
    run = run_scene(_tracker(), scene)
    _assert_clean(run, scene)
    times = [e.at_ms for e in crossings(run, "L")]
    assert len(times) == 2 and abs(times[0] - times[1]) < 15


def test_fast_part_jumping_60_px_per_frame_over_the_line() -> None:
    scene = Scene([Part(-30.0, 300.0, 1800.0), Part(-700.0, 500.0, 1800.0)], duration_s=1.5, noise_px=0.5)
    run = run_scene(_tracker(), scene)
    _assert_clean(run, scene, max_err_frames=0.1)


@pytest.mark.parametrize("keep", ["every_third", "irregular"])
def test_dropped_frames_cost_accuracy_not_correctness(keep: str) -> None:
    mask = np.random.default_rng(5).random(1000) < 0.4
    keeps = {"every_third": lambda k: k % 3 == 0, "irregular": lambda k: bool(mask[k])}
    scene = Scene(lane_parts(12, speed=250.0, spacing=100.0), duration_s=11.0, keep=keeps[keep], seed=3)
    run = run_scene(_tracker(), scene)
    _assert_clean(run, scene, max_err_frames=0.4)


def test_stop_and_go_keeps_tracks_and_counts_once() -> None:
    """The belt halts for 6 s with a part standing just past the line, then restarts: no new ids."""
    travel = belt_stop_and_go(3.0, 6.0)
    parts = lane_parts(12, speed=250.0, spacing=100.0)
    line_x = parts[4].x0 + 250.0 * 3.0 - 1.0  # part 4 stops with its centre 1 px past the line
    scene = Scene(parts, duration_s=18.0, travel=travel, noise_px=1.5, seed=11)
    tracker = _tracker(line_x=line_x)
    reborn: list[int] = []
    for ms, boxes, scores, classes, _ in scene.frames():
        upd = tracker.update(ms, 1280, 720, boxes, scores, classes, ["bolt"] * len(scores))
        t_s = (ms - scene.t0_ms) / 1000.0
        if 3.0 < t_s <= 11.0:
            assert not [e for e in upd.events if e.event == "end"], t_s
            # no part enters while the belt stands: a track first seen after the stop would be a re-birth
            reborn += [
                e.track for e in upd.events if e.event == "new" and scene.t0_ms + 3_050 < e.at_ms <= scene.t0_ms + 9_000
            ]
        if 5.0 < t_s <= 9.0:
            assert tracker.belt_speed_px_s is not None and tracker.belt_speed_px_s < 5.0
    assert not reborn
    assert tracker.belt_speed_px_s is not None and math.isclose(tracker.belt_speed_px_s, 250.0, rel_tol=0.05)
    run = run_scene(_tracker(line_x=line_x), scene)
    _assert_clean(run, scene, line_x=line_x, loose=frozenset({4}))
    # part 4 dithered across the line (detector noise) for the whole stop: its crossing is the last cut before
    # it cleared the hysteresis band, somewhere between reaching the line and the restart
    (at_ms,) = [e.at_ms for e in crossings(run, "L") if part_of(run, e.track) == 4]
    assert scene.t0_ms + 2_990 <= at_ms <= scene.t0_ms + 9_100


def test_belt_speed_falls_to_zero_while_stopped() -> None:
    scene = Scene(lane_parts(6, speed=250.0, spacing=100.0), duration_s=8.0, travel=belt_stop_and_go(2.0, 10.0))
    tracker = _tracker()
    run_scene(tracker, scene, finish=False)
    assert tracker.belt_speed_px_s is not None and tracker.belt_speed_px_s < 5.0
    visible = sum(1 for i in range(len(scene.parts)) if 0.0 <= scene.x(i, 8.0) <= 1280.0)
    assert visible == 9 and tracker.active_tracks == visible


@pytest.mark.parametrize("amplitude", [4.0, 9.0])
def test_jitter_on_the_line_counts_once(amplitude: float) -> None:
    """A part dithering back and forth across the line for 2 s (under the 12.5 px hysteresis) counts once."""
    part = Part(LINE_X - 200.0, 300.0, 200.0)
    arrive = 1.0

    def travel(t: float) -> float:
        return t if t < arrive else (arrive if t < arrive + 2.0 else t - 2.0)

    scene = Scene(
        [part],
        duration_s=6.0,
        travel=travel,
        seed=2,
        jitter=lambda i, t: amplitude * math.sin(2 * math.pi * 3.0 * t) if arrive <= t < arrive + 2 else 0.0,
    )
    run = run_scene(_tracker(), scene)
    assert len(crossings(run, "L")) == 1
    assert [e.direction for e in crossings(run, "L")] == ["in"]


def test_jitter_without_hysteresis_would_count_back_and_forth() -> None:
    """The same dithering, with hysteresis off, produces an "out" crossing too: the hysteresis test can fail."""
    part = Part(LINE_X - 200.0, 300.0, 200.0)

    def travel(t: float) -> float:
        return t if t < 1.0 else (1.0 if t < 3.0 else t - 2.0)

    scene = Scene(
        [part],
        duration_s=6.0,
        travel=travel,
        noise_px=0.0,
        jitter=lambda i, t: 20.0 * math.sin(2 * math.pi * 2.0 * t) if 1.0 <= t < 3.0 else 0.0,
    )
    run = run_scene(_tracker(TrackerParams(line_hysteresis=0.0)), scene)
    assert sorted(e.direction or "" for e in crossings(run, "L")) == ["in", "out"]


def test_reverse_motion_counts_out() -> None:
    scene = Scene([Part(1300.0, 300.0, -250.0), Part(1400.0, 500.0, -250.0)], duration_s=7.0)
    tracker = _tracker()
    run = run_scene(tracker, scene)
    assert [e.direction for e in crossings(run, "L")] == ["out", "out"]
    assert tracker.counts == {("L", "in"): 0, ("L", "out"): 2}
    assert all(e.speed_px_s is not None and e.speed_px_s < -200.0 for e in crossings(run, "L"))


def test_line_segment_extent_is_respected() -> None:
    """A line covering only the top half of the frame does not count parts in the bottom lane."""
    lines = [LineSpec("top", (0.5, 0.0), (0.5, 0.4))]
    tracker = CameraTracker("cam1", lines)
    scene = Scene([Part(-30.0, 200.0, 300.0), Part(-30.0, 500.0, 300.0)], duration_s=6.0)
    run = run_scene(tracker, scene)
    assert [part_of(run, e.track) for e in crossings(run, "top")] == [0]


def test_bottom_center_anchor_crosses_a_horizontal_line_earlier() -> None:
    """Parts moving down (+y) cross y = 360: the bottom edge gets there h/2 / v = 20 px / 200 px/s sooner."""
    line = LineSpec("H", (0.0, 0.5), (1.0, 0.5), direction=(0.0, 1.0))
    t_center: list[int] = []
    t_bottom: list[int] = []
    for anchor, sink in (("center", t_center), ("bottom_center", t_bottom)):
        tracker = CameraTracker("cam1", [line], TrackerParams(anchor=anchor))  # type: ignore[arg-type]
        t0 = 1_000_000
        for k in range(150):
            y = 100.0 + 200.0 * k / 30
            boxes = np.array([[600.0, y - 20.0, 650.0, y + 20.0]])
            upd = tracker.update(t0 + round(k * 1000 / 30), 1280, 720, boxes, np.array([0.9]), np.array([1]), ["nut"])
            sink += [e.at_ms for e in upd.events if e.event == "crossed"]
    assert len(t_center) == len(t_bottom) == 1
    assert abs((t_center[0] - t_bottom[0]) - 100.0) <= 2.0
    assert abs(t_center[0] - (1_000_000 + 1300.0)) <= 2.0


def test_new_parts_start_at_the_belt_velocity() -> None:
    """Dense, fast, 2 of 3 frames dropped: a part moves 60 px between kept frames and the next one is 90-160 px
    behind, so a new track predicted standing still would often take its follower's box (IoU up to 0.25, and
    report the wrong first sighting). Seeded with the belt's velocity, each ``new`` is its own part's first frame."""
    gaps = np.random.default_rng(4).uniform(90.0, 160.0, 30)
    parts = [Part(x0=-35.0 - 300.0 - float(gaps[:k].sum()), y=300.0, speed=600.0) for k in range(30)]
    scene = Scene(parts, duration_s=5.0, keep=lambda k: k % 3 == 0, noise_px=0.5, seed=9)
    run = run_scene(_tracker(), scene)
    first_seen: dict[int, int] = {}
    for ms, _, _, _, who in scene.frames():
        for part in who:
            first_seen.setdefault(part, ms)
    news = {part_of(run, e.track): e.at_ms for e in run.events if e.event == "new"}
    assert len(news) >= 18  # the parts seen long enough to confirm within the 5 s
    assert {p: first_seen[p] for p in news} == news
    _assert_clean(run, scene, max_err_frames=0.4)


def test_every_part_counted_once_on_each_of_two_lines() -> None:
    lines = [LineSpec("A", *vertical_line_at(400.0)), LineSpec("B", *vertical_line_at(900.0))]
    tracker = CameraTracker("cam1", lines)
    scene = Scene(lane_parts(10, speed=300.0, spacing=120.0), duration_s=10.0, seed=21)
    run = run_scene(tracker, scene)
    for line, x in (("A", 400.0), ("B", 900.0)):
        per_part = sorted(part_of(run, e.track) for e in crossings(run, line))
        assert per_part == sorted(i for i in range(len(scene.parts)) if scene.crossing_ms(i, x) is not None)
        assert tracker.counts[(line, "in")] == len(per_part) == 20


@pytest.mark.parametrize(
    ("speed", "keep", "stop"),
    [
        (200.0, 6, (4.0, 3.0)),  # 40 px a processed frame: the belt halts for 3 s
        (250.0, 8, (4.0, 3.0)),  # 67 px, more than a box width
        (250.0, 6, (3.0, 0.5)),  # a short halt: stop and start two processed frames apart
    ],
)
def test_belt_that_stops_and_starts_between_processed_frames_keeps_every_id(
    speed: float, keep: int, stop: tuple[float, float]
) -> None:
    """At a few processed frames a second a belt that stops (or starts) between two of them leaves every
    prediction a whole box off: the moving tracks' run on past their stopped parts (the box ahead is the next
    part's), the stopped tracks' stand still while their parts move on. The common belt shift matches them all
    again: no new ids, no part taking its neighbour's id, every part counted once."""
    parts = lane_parts(10, speed=speed, spacing=120.0)
    scene = Scene(
        parts, duration_s=14.0, travel=belt_stop_and_go(*stop), keep=lambda k: k % keep == 0, seed=keep + int(speed)
    )
    run = run_scene(_tracker(), scene)
    _assert_clean(run, scene, max_err_frames=keep)
    assert len(crossings(run, "L")) == 20
