"""Our tracker against the `trackers` package's ByteTrack (Roboflow, Apache-2.0) on the same detections.

`trackers` is a dev-only reference (it pulls `supervision` and `opencv-python`); the daemon never imports it.
On a clean scene both must find one track per part and the same identity partition of the detections.
"""

from __future__ import annotations

import numpy as np
import pytest

from daemon.tracking import CameraTracker
from tests.support.tracking_scenes import Scene, lane_parts

trackers = pytest.importorskip("trackers", reason="the reference ByteTrack (`pip install trackers`) is not installed")
sv = pytest.importorskip("supervision", reason="`trackers` comes with `supervision`; it is missing")


def _co_assignments(scene: Scene) -> tuple[dict[tuple[int, int], int], dict[int, set[int]], dict[int, set[int]]]:
    """(our id, their id) -> detections both gave those ids; part -> their ids; part -> our ids."""
    ref = trackers.ByteTrackTracker(frame_rate=scene.fps)
    ours = CameraTracker("cam1", [])
    pairs: dict[tuple[int, int], int] = {}
    theirs_per_part: dict[int, set[int]] = {}
    ours_per_part: dict[int, set[int]] = {}
    for ms, boxes, scores, classes, who in scene.frames():
        det = sv.Detections(
            xyxy=boxes.astype(np.float32), confidence=scores.astype(np.float32), class_id=classes.astype(int)
        )
        out = ref.update(det, timestamp=ms / 1000.0)
        upd = ours.update(ms, 1280, 720, boxes, scores, classes, ["bolt"] * len(scores))
        for i, tid in enumerate(upd.track_ids):
            if tid is not None:
                ours_per_part.setdefault(who[i], set()).add(tid)
        for box, their in zip(out.xyxy, out.tracker_id, strict=True):  # their output order is their own
            dist = np.abs(boxes - box).max(axis=1)
            i = int(np.argmin(dist))
            assert dist[i] < 1e-2
            if their < 0:
                continue
            theirs_per_part.setdefault(who[i], set()).add(int(their))
            mine = upd.track_ids[i]
            if mine is not None:
                pairs[(mine, int(their))] = pairs.get((mine, int(their)), 0) + 1
    return pairs, theirs_per_part, ours_per_part


@pytest.mark.parametrize("speed", [150.0, 300.0])
def test_same_tracks_and_identity_partition_as_reference_bytetrack(speed: float) -> None:
    parts = lane_parts(10, speed=speed, spacing=110.0)
    scene = Scene(parts, duration_s=(1280 + 100 + 10 * 110) / speed + 1.0, seed=7)
    pairs, theirs, ours = _co_assignments(scene)
    assert len(theirs) == len(ours) == len(parts)
    assert all(len(ids) == 1 for ids in theirs.values()) and all(len(ids) == 1 for ids in ours.values())
    # the partition: each of our ids pairs with exactly one of theirs and vice versa
    mine = [m for m, _ in pairs]
    their = [t for _, t in pairs]
    assert len(set(mine)) == len(set(their)) == len(pairs) == len(parts)
