"""The measuring code of tools/tracking/eval.py: crossing GT and matching, IDF1 and HOTA on known cases."""

from __future__ import annotations

import numpy as np
import pytest

from daemon.core.objects import ObjectEvent
from tools.kit.synth.crossings import Crossing, gt_crossings
from tools.kit.synth.video import belt_shift
from tools.tracking import metrics
from tools.tracking.daemon_run import Published, load_published, save_published
from tools.tracking.metrics import id_metrics, match_crossings, track_parts, without_ignored


def _box(x: float) -> list[float]:
    return [x, 10.0, x + 20.0, 30.0]


def _frames(track_of_frame) -> list:
    """One GT part (id 7) moving 5 px a frame for 10 frames; the tracker's box is exact, its id per frame."""
    return [([(7, _box(5.0 * k))], [(track_of_frame(k), _box(5.0 * k))]) for k in range(10)]


def test_perfect_tracks_score_one() -> None:
    pytest.importorskip("trackeval")
    m = id_metrics(_frames(lambda k: 1))
    assert m["IDF1"] == pytest.approx(1.0) and m["HOTA"] == pytest.approx(1.0)


def test_one_id_switch_halfway() -> None:
    """IDTP 5 of 10 GT and 10 tracker detections: IDF1 = 2*5 / (10 + 10) = 0.5; AssA = 0.5 at every
    threshold (each TP's association: 5 TPA / (5 + 5 FNA + 0 FPA)), DetA = 1, so HOTA = sqrt(0.5)."""
    pytest.importorskip("trackeval")
    m = id_metrics(_frames(lambda k: 1 if k < 5 else 2))
    assert m["IDF1"] == pytest.approx(0.5)
    assert m["DetA"] == pytest.approx(1.0) and m["AssA"] == pytest.approx(0.5)
    assert m["HOTA"] == pytest.approx(0.5**0.5)


def test_crossings_matched_by_time_and_double_counts_found() -> None:
    gt = [Crossing(1, "in", 1.0), Crossing(2, "in", 2.0), Crossing(3, "in", 3.0)]
    counted = [Crossing(10, "in", 1.04), Crossing(11, "in", 2.1), Crossing(12, "in", 2.15), Crossing(13, "out", 3.0)]
    r = match_crossings(gt, counted, tol_s=0.5, track_to_part={10: 1, 11: 2, 12: 2, 13: 3})
    assert (r["gt"], r["counted"], r["matched"], r["missed"], r["extra"], r["double"]) == (3, 4, 2, 1, 2, 1)
    assert r["count_error"] == pytest.approx(1 / 3)
    assert sorted(round(e, 3) for e in r["time_errors_s"]) == [0.04, 0.1]


def test_a_crossing_is_matched_to_its_own_parts_crossing_before_a_nearer_one() -> None:
    # parts 0.3 s apart, part 2 never counted; the tracks of parts 3..5 cross 0.28 s early, so by time alone
    # they would take the GT crossings of parts 2..4 (0.02 s off each) and hide their real error
    gt = [Crossing(p, "in", 0.3 * p) for p in range(1, 6)]
    counted = [Crossing(11, "in", 0.32), *(Crossing(10 + p, "in", 0.3 * p - 0.28) for p in (3, 4, 5))]
    r = match_crossings(gt, counted, tol_s=1.0, track_to_part={11: 1, 13: 3, 14: 4, 15: 5})
    assert (r["matched"], r["missed"], r["extra"]) == (4, 1, 0)
    assert sorted(round(e, 3) for e in r["time_errors_s"]) == [-0.28, -0.28, -0.28, 0.02]


def test_a_pair_cut_by_the_windows_end_is_neither_missed_nor_extra() -> None:
    # part 2 crosses at 9.99 (inside 0..10), its track 12 ms later (outside); part 3 the other way round;
    # part 4's track counts nothing (missed); track 15 is on no part (extra); part 1 is whole inside
    gt = [Crossing(1, "in", 5.0), Crossing(2, "in", 9.99), Crossing(3, "in", 10.01), Crossing(4, "in", 7.0)]
    counted = [Crossing(11, "in", 5.02), Crossing(12, "in", 10.002), Crossing(13, "in", 9.995), Crossing(15, "in", 8.0)]
    truth, kept = metrics.in_window(gt, counted, 0.0, 10.0, {11: 1, 12: 2, 13: 3})
    assert [c.key for c in truth] == [1, 4] and [c.key for c in kept] == [11, 15]
    r = match_crossings(truth, kept, tol_s=0.5, track_to_part={11: 1, 12: 2, 13: 3})
    assert (r["matched"], r["missed"], r["extra"]) == (1, 1, 1)


def test_a_track_on_no_part_is_extra_even_near_a_missed_parts_crossing() -> None:
    # part 2 is never counted; track 20 followed belt debris (on no GT part) and crossed 0.3 s after part 2
    gt = [Crossing(1, "in", 1.0), Crossing(2, "in", 3.0)]
    counted = [Crossing(10, "in", 1.01), Crossing(20, "in", 3.3)]
    r = match_crossings(gt, counted, tol_s=1.0, track_to_part={10: 1})
    assert (r["matched"], r["missed"], r["extra"], r["missed_parts"]) == (1, 1, 1, [2])
    # without a track-to-part map, matching is by time alone
    assert match_crossings(gt, counted, tol_s=1.0)["matched"] == 2


def test_first_seen_is_the_first_frame_a_detection_overlaps_the_part() -> None:
    # part 7 boxed from frame 3 on (a loose box at frame 2, IoU 0.33, does not count); part 8 never boxed
    frames = [
        (
            0.1 * k,
            [(7, _box(5.0 * k)), (8, [200.0, 10.0, 220.0, 30.0])],
            [_box(5.0 * k + (10.0 if k == 2 else 0.0))] if k >= 2 else [],
        )
        for k in range(6)
    ]
    assert metrics.first_seen(frames) == {7: pytest.approx(0.3)}


def test_track_parts_majority() -> None:
    frames = _frames(lambda k: 1 if k < 7 else 2)
    assert track_parts(frames) == {1: 7, 2: 7}


def test_gt_crossing_time_from_the_belt_travel() -> None:
    """A part at x0 = 100 (box centre 4 px right of it) on a belt at 50 px/s crosses x = 160 when
    100 + 4 + 50 t = 160: t = 1.12 s; with a 1 s stop from 0.5 s (0.3 s ramps: 0.7 s of travel lost) 1.82 s."""

    def clip(stops: list) -> dict:
        shift = belt_shift(np.arange(40) / 10, 50.0, stops).tolist()
        ann = {
            str(i): [{"id": 0, "cls": 2, "box": [100 + 4 - 10 + s, 50, 100 + 4 + 10 + s, 70]}]
            for i, s in enumerate(shift)
        }
        return {
            "width": 320,
            "height": 240,
            "fps": 10,
            "frames": 40,
            "annotations": ann,
            "parts": [{"id": 0, "cls": 2, "x0": 100.0, "cy": 60.0}],
            "belt": {"speed_px_s": 50.0, "stops": stops, "shift_px": shift},
        }

    (c,) = gt_crossings(clip([]), 0.5)
    assert (c.key, c.direction) == (0, "in") and c.t_s == pytest.approx(1.12, abs=2e-3)
    (c,) = gt_crossings(clip([[0.5, 1.0]]), 0.5)
    assert c.t_s == pytest.approx(1.82, abs=2e-3)


def test_a_crossing_counted_on_a_hardly_visible_part_is_ignored_not_extra_and_doubles_still_count() -> None:
    gt = [Crossing(1, "in", 1.0)]
    counted = [
        Crossing(10, "in", 1.0),
        Crossing(11, "in", 2.0),
        Crossing(12, "in", 3.0),
        Crossing(13, "in", 3.5),
        Crossing(14, "in", 4.0),
    ]
    # 11: on part 5, never 40 % visible (ignored); 12 and 13: both on ignored part 6 (a double); 14: on no part
    r = match_crossings(gt, counted, tol_s=0.5, track_to_part={10: 1, 11: 5, 12: 6, 13: 6}, ignored_parts={5, 6})
    assert (r["gt"], r["counted"], r["matched"], r["missed"], r["extra"], r["ignored"], r["double"]) == (
        1,
        2,
        1,
        0,
        1,
        3,
        1,
    )


def test_without_ignored_drops_the_tracked_boxes_on_ignored_parts_only() -> None:
    part, faint, fp = [0.0, 0.0, 20.0, 20.0], [100.0, 0.0, 120.0, 8.0], [300.0, 300.0, 320.0, 320.0]
    frames = [
        ([(1, part)], [(2, faint)], [(10, part), (11, faint), (12, fp)]),
        ([(1, part)], [], [(10, part), (11, faint)]),
    ]
    out = without_ignored(frames)
    assert out == [([(1, part)], [(10, part), (12, fp)]), ([(1, part)], [(10, part), (11, faint)])]


def test_what_a_run_published_is_scored_again_as_it_was(tmp_path) -> None:
    crossed = ObjectEvent(
        "cam",
        4,
        "bolt",
        0,
        0.9,
        "crossed",
        1_000,
        line="mid",
        direction="in",
        count=3,
        speed_px_s=120.5,
        speed_mm_s=60.25,
        eta=(("reject1", 3_000), ("reject2", 4_500)),
    )
    end = ObjectEvent("cam", 4, "bolt", 0, 0.9, "end", 2_000, first_ms=500, last_ms=2_000, frames=22)
    entries = [
        {
            "seq": 0,
            "captured_ms": 500,
            "w": 640,
            "h": 480,
            "dets": [{"box": [1.0, 2.0, 30.0, 40.0], "score": 0.9, "cls": 0, "label": "bolt", "track": 4}],
        }
    ]
    save_published(tmp_path / "p.json", {"cam": Published(entries, [crossed, end])}, model=416, wall_s=12.5)
    pubs, meta = load_published(tmp_path / "p.json")
    assert meta == {"model": 416, "wall_s": 12.5}
    assert pubs["cam"].entries == entries and pubs["cam"].objects == [crossed, end]
