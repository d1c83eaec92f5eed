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


def best_class(xp: ArrayModule, scores: Any, class_axis: int, class_mask: Any | None) -> tuple[Any, Any]:
    """(B, A) best score and its class per anchor; classes masked out never win.

    `scores` is (B, C, A) (`class_axis` 1) or (B, A, C) (`class_axis` 2)."""
    if class_mask is not None:
        mask = xp.asarray(class_mask, dtype=bool)
        if class_axis == 1:
            mask = mask.reshape(1, -1, 1) if mask.ndim == 1 else mask[:, :, None]
        else:
            mask = mask.reshape(1, 1, -1) if mask.ndim == 1 else mask[:, None, :]
        scores = xp.where(mask, scores, xp.zeros((), dtype=scores.dtype))
    cls = scores.argmax(axis=class_axis)
    best = xp.take_along_axis(scores, xp.expand_dims(cls, class_axis), axis=class_axis)
    return xp.squeeze(best, axis=class_axis), cls


CxCyWh = Callable[[Any, Any], Any]
"""(image indices, anchor indices) -> (N, 4) cx, cy, w, h in input pixels of those anchors."""


def candidates(xp: ArrayModule, scores: Any, class_axis: int, cxcywh: CxCyWh, how: Decode) -> Candidates:
    """Flat candidates over the batch from class scores (objectness already multiplied in) and the
    anchors' boxes: the best allowed class per anchor at or above its image's threshold, finite boxes.
    Empty boxes stay until after max_det, as in Ultralytics/YOLOv5."""
    best, cls = best_class(xp, scores, class_axis, how.class_mask)
    img, anchor = xp.nonzero(best >= how.thresholds)
    box = cxcywh(img, anchor)
    half_w = box[:, 2] * 0.5
    half_h = box[:, 3] * 0.5
    boxes = xp.stack((box[:, 0] - half_w, box[:, 1] - half_h, box[:, 0] + half_w, box[:, 1] + half_h), axis=1)
    ok = xp.isfinite(boxes).all(axis=1)
    return Candidates(img[ok], boxes[ok], best[img, anchor][ok].astype(xp.float32, copy=False), cls[img, anchor][ok])


def rows_last_mismatch(layout_rows: int, width: int, shape: tuple[int, ...], batch: int) -> str:
    """`[batch, rows, width]` expected (anchors first)."""
    expected = (batch, layout_rows, width)
    return "" if shape == expected else f"expected {list(expected)}"
