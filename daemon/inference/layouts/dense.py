"""What the dense families (yolov8, yolov5, yolox: one row per anchor, NMS still to do) share:
the classes among the channels, the best class per anchor, and candidates from scores and boxes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from daemon.core.xp import ArrayModule
from daemon.inference.layouts.base import Candidates, Decode, Found, LayoutError


def split_classes(total: int, found: Found, what: str) -> tuple[int, int, str]:
    """(classes, ignored trailing values, note) from the class+extra channel count."""
    names, extra_hint, task = found.names, found.masks, found.task
    if names is not None:
        if names == total:
            return names, 0, ""
        if 0 < names < total and (task in ("segment", "pose") or extra_hint):
            what_kind = "mask" if extra_hint or task == "segment" else "keypoint"
            return names, total - names, f"; {total - names} {what_kind} values after the classes ignored"
        raise LayoutError(f"{found.names_from} has {names} labels but the output has {total} classes ({what})")
    if extra_hint and total > extra_hint:
        return total - extra_hint, extra_hint, f"; {extra_hint} mask coefficients after the classes ignored"
    return total, 0, ""


def origin(found: Found) -> str:
    """Why this family was tried: recognised, or named by the config or metadata."""
    return f"layout {found.override!r} from {found.override_from}" if found.override != "auto" else "recognised"


def masked_scores(xp: ArrayModule, scores: Any, class_axis: int, class_mask: Any | None) -> Any:
    """`scores` with the classes `class_mask` leaves out at 0, so that they never win."""
    if class_mask is None:
        return scores
    mask = xp.asarray(class_mask, dtype=bool)
    if class_axis == 1:
        mask = mask.reshape(1, -1, 1) if mask.ndim == 1 else mask[:, :, None]
    else:
        mask = mask.reshape(1, 1, -1) if mask.ndim == 1 else mask[:, None, :]
    return xp.where(mask, scores, xp.zeros((), dtype=scores.dtype))


CxCyWh = Callable[[Any, Any], Any]
"""(image indices, anchor indices) -> (N, 4) cx, cy, w, h in input pixels of those anchors."""


def candidates(xp: ArrayModule, scores: Any, class_axis: int, cxcywh: CxCyWh, how: Decode) -> Candidates:
    """Flat candidates over the batch from class scores (objectness already multiplied in) and the
    anchors' boxes: the best allowed class per anchor at or above its image's threshold, finite boxes.
    Empty boxes stay until after max_det, as in Ultralytics/YOLOv5."""
    scores = masked_scores(xp, scores, class_axis, how.class_mask)
    # The best score per anchor over the whole grid, the best class only for the anchors that pass:
    # an arg-max across a handful of classes strided over every anchor cost a third of decoding.
    best = scores.max(axis=class_axis)
    img, anchor = nonzero_2d(xp, best >= how.thresholds)
    picked = scores[img, :, anchor] if class_axis == 1 else scores[img, anchor, :]  # (N, C) either way
    cls = picked.argmax(axis=1)  # the first of equal scores, as an arg-max over the grid
    return anchor_candidates(xp, img, anchor, score=best[img, anchor], cls=cls, cxcywh=cxcywh)


def nonzero_2d(xp: ArrayModule, mask: Any) -> tuple[Any, Any]:
    """`xp.nonzero` of a 2-D mask (row, then column indices, in row-major order) through its flat
    indices (`xp.unravel_index`): NumPy's 2-D `nonzero` costs ten times its 1-D one (143 against
    13 µs for a batch of 8 x 8400 anchors on the 2-core machine the benches run on)."""
    rows, cols = xp.unravel_index(xp.nonzero(mask.reshape(-1))[0], mask.shape)
    return rows, cols


def anchor_candidates(xp: ArrayModule, img: Any, anchor: Any, *, score: Any, cls: Any, cxcywh: CxCyWh) -> Candidates:
    """The chosen anchors (image and anchor indices, their score and class) as candidates: boxes
    from centre and size to corners, the non-finite ones dropped."""
    box = cxcywh(img, anchor)
    half_w = box[:, 2] * 0.5
    half_h = box[:, 3] * 0.5
    boxes = xp.stack((box[:, 0] - half_w, box[:, 1] - half_h, box[:, 0] + half_w, box[:, 1] + half_h), axis=1)
    ok = xp.isfinite(boxes).all(axis=1)
    return Candidates(img[ok], boxes[ok], score[ok].astype(xp.float32, copy=False), cls[ok])


def rows_last_mismatch(layout_rows: int, width: int, shape: tuple[int, ...], batch: int) -> str:
    """`[batch, rows, width]` expected (anchors first)."""
    expected = (batch, layout_rows, width)
    return "" if shape == expected else f"expected {list(expected)}"
