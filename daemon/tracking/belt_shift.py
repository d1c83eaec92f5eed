"""Association's stage 4, the common belt shift: a belt that starts, stops or changes speed between two
processed frames leaves every prediction off by about the same shift along the belt (a stopped track's
prediction stands still while its part moves on; a moving one's runs on past its stopped part). The
shift along the belt's direction that the most unmatched tracks agree on (each within `specs.SHIFT_TOL` box
diagonals of some unmatched high detection, at most `jump_diag` diagonals from its prediction; ties: the
smallest shift) moves their predictions, which then take the unmatched high detections by IoU as in the
first stage.
"""

from __future__ import annotations

import numpy as np

from daemon.tracking.association import FloatArray, IntArray, assign, indices, iou_matrix, xywh_to_xyxy, xyxy_to_xywh
from daemon.tracking.specs import MIN_DIAG_PX, SHIFT_TOL


def near(pred: FloatArray, det_boxes: FloatArray, jump_diag: float) -> np.ndarray | None:
    """Which (prediction cx,cy,w,h; detection x1,y1,x2,y2) pairs lie within `jump_diag` box diagonals;
    None when none does."""
    det = xyxy_to_xywh(det_boxes)
    dist = np.hypot(det[None, :, 0] - pred[:, None, 0], det[None, :, 1] - pred[:, None, 1])
    close = dist <= jump_diag * _diag(pred)
    return close if close.any() else None


def match(
    pred: FloatArray, det_boxes: FloatArray, close: np.ndarray, belt_dir: tuple[float, float], match_iou: float
) -> IntArray:
    """(prediction row, detection column) pairs matched by IoU after moving every prediction by the shift
    along `belt_dir` that most of them agree on; none when no pair lies across the belt within tolerance."""
    det = xyxy_to_xywh(det_boxes)
    dx, dy = det[None, :, 0] - pred[:, None, 0], det[None, :, 1] - pred[:, None, 1]
    ux, uy = belt_dir
    along, across = dx * ux + dy * uy, np.abs(dy * ux - dx * uy)
    tol = SHIFT_TOL * _diag(pred)
    close = close & (across <= tol)
    if not close.any():
        return np.empty((0, 2), dtype=np.intp)
    cand = np.unique(along[close])
    # support of each candidate shift: the tracks with a near detection within their tolerance of it
    agree = close[None, :, :] & (np.abs(along[None, :, :] - cand[:, None, None]) <= tol[None, :, :])
    support = agree.any(axis=2).sum(axis=1)
    best = indices(support == support.max())
    shift = float(cand[best[np.argmin(np.abs(cand[best]))]])
    moved = pred.copy()
    moved[:, 0] += shift * ux
    moved[:, 1] += shift * uy
    m, _, _ = assign(1.0 - iou_matrix(xywh_to_xyxy(moved), det_boxes), 1.0 - match_iou)
    return m


def _diag(pred: FloatArray) -> FloatArray:
    return np.maximum(np.hypot(pred[:, 2], pred[:, 3]), MIN_DIAG_PX)[:, None]
