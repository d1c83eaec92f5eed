"""Which track takes which detection: the tracker's four association stages, in order.

1. The high-score detections (``high_score`` and up) with every track (tracked, lost and tentative) by IoU.
2. The low-score detections with every track still unmatched (ByteTrack: only the tracked ones; here also lost
   and tentative ones, so a part the detector scores low all along, as it does a part cut by the frame's edge,
   still becomes one track, and a lost track comes back on a weak sighting instead of a new id).
3. (An addition for conveyors) a tentative track seen only once with the nearest unmatched high detection,
   within ``jump_diag`` box diagonals.
4. (Also for conveyors) the tracks still unmatched by a common belt shift (`daemon.tracking.belt_shift`).

Pure: the tracker passes its tracks, their predicted boxes and a way to learn the belt's direction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from daemon.tracking import belt_shift
from daemon.tracking.association import FloatArray, IntArray, assign, indices, iou_matrix, xywh_to_xyxy, xyxy_to_xywh
from daemon.tracking.specs import MIN_DIAG_PX, TrackerParams
from daemon.tracking.track import Track

Pairs = list[tuple[int, int]]
BeltDirection = Callable[[], tuple[float, float] | None]


def associate(
    tracks: Sequence[Track],
    pred: FloatArray,
    boxes: FloatArray,
    scores: FloatArray,
    *,
    params: TrackerParams,
    belt_dir: BeltDirection,
) -> Pairs:
    """The four stages over ``tracks`` (their predicted boxes ``pred``, cx,cy,w,h) and one frame's detections
    (``boxes`` x1,y1,x2,y2); returns (track row, detection) pairs. ``belt_dir`` is asked only when stage 4 has
    a candidate pair; it returns the belt's unit direction, or None while none is known."""
    p = params
    high = indices(scores >= p.high_score)
    low = indices((scores >= p.low_score) & (scores < p.high_score))
    cost = 1.0 - iou_matrix(xywh_to_xyxy(pred), boxes)
    m1, free_rows, free_high = assign(cost[:, high], 1.0 - p.match_iou)
    pairs = list(zip(m1[:, 0].tolist(), high[m1[:, 1]].tolist(), strict=True))
    taken: set[int] = set()  # every track the high detections left: tracked, lost and tentative alike
    if free_rows.size and low.size:
        m2, _, _ = assign(cost[free_rows][:, low], 1.0 - p.low_match_iou)
        pairs += zip(free_rows[m2[:, 0]].tolist(), low[m2[:, 1]].tolist(), strict=True)
        taken = set(free_rows[m2[:, 0]].tolist())
    once = np.array(
        [r for r in free_rows.tolist() if r not in taken and tracks[r].track_id is None and tracks[r].hits == 1],
        dtype=np.intp,
    )
    if once.size and free_high.size:
        last = xyxy_to_xywh(np.array([tracks[r].box for r in once], dtype=np.float64))
        dets = xyxy_to_xywh(boxes[high[free_high]])
        diag = np.hypot(last[:, 2], last[:, 3])
        dist = np.hypot(last[:, None, 0] - dets[None, :, 0], last[:, None, 1] - dets[None, :, 1])
        m3, _, _ = assign(dist / np.maximum(diag[:, None], MIN_DIAG_PX), p.jump_diag)
        pairs += zip(once[m3[:, 0]].tolist(), high[free_high[m3[:, 1]]].tolist(), strict=True)
    if len(pairs) < len(tracks) and free_high.size:
        pairs += _belt_shift(pairs, high, pred, boxes, params=params, belt_dir=belt_dir)
    return pairs


def _belt_shift(
    pairs: Pairs, high: IntArray, pred: FloatArray, boxes: FloatArray, *, params: TrackerParams, belt_dir: BeltDirection
) -> Pairs:
    """Stage 4 (`daemon.tracking.belt_shift`) over the tracks and high detections still unmatched.
    Nothing while no belt direction is known yet."""
    used_rows = {r for r, _ in pairs}
    used_dets = {d for _, d in pairs}
    rows = np.array([r for r in range(pred.shape[0]) if r not in used_rows], dtype=np.intp)
    dets = np.array([d for d in high.tolist() if d not in used_dets], dtype=np.intp)
    if not rows.size or not dets.size:
        return []
    moved = pred[rows]
    near = belt_shift.near(moved, boxes[dets], params.jump_diag)
    if near is None:  # the usual case: parts leaving and entering the frame far apart
        return []
    direction = belt_dir()
    if direction is None:
        return []
    m = belt_shift.match(moved, boxes[dets], near, direction, params.match_iou)
    return list(zip(rows[m[:, 0]].tolist(), dets[m[:, 1]].tolist(), strict=True))
