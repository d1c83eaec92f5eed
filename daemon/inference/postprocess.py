"""Decode by model layout and class-aware NMS, written once against an array module (`xp`).

`decode_batch` runs on NumPy or CuPy (the same code: `daemon.core.xp.choose_device` picks the module
once at startup in `app.py`; the stage decodes where the batch's output lies) and
returns one (N, 6) float32 host array per image: x1, y1, x2, y2, score, class, in model-input
pixels, best score first. `to_detections` maps those rows to camera pixels through the frame's
letterbox and applies the camera's own confidence threshold and class filter.

Policy: a score must be >= its threshold; NaN scores and non-finite or empty boxes are
dropped, never published. At most `max_candidates` boxes per image and class enter NMS (the
best ones), and at most `max_det` per image leave it. As in Ultralytics' and YOLOv5's
`non_max_suppression`, empty boxes take part (suppressing nothing) and count towards `max_det`;
they are dropped after that cut, and score ties keep the anchor order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from daemon.core.frames import Detection, Letterbox
from daemon.core.xp import ArrayModule, to_host
from daemon.inference.layouts.base import Decode, ModelLayout
from daemon.inference.layouts.registry import family_of

Rows = npt.NDArray[np.float32]
"""(N, 6) float32: x1, y1, x2, y2, score, class (model-input pixels)."""

ROW_WIDTH = 6
DEFAULT_MAX_CANDIDATES = 1024
_NMS_BUDGET = 4 * 1024 * 1024
"""Most (image, box, box) IoU entries held at once: 16 MiB per float32 temporary."""


def _empty_rows() -> Rows:
    return np.zeros((0, ROW_WIDTH), dtype=np.float32)


def _thresholds(xp: ArrayModule, conf_threshold: float | Any, batch: int) -> Any:
    """Per-image thresholds as a (B, 1) array (a scalar is broadcast)."""
    thr = xp.asarray(conf_threshold, dtype=xp.float32).reshape(-1, 1)
    if thr.shape[0] not in (1, batch):
        raise ValueError(f"conf_threshold has {thr.shape[0]} values for a batch of {batch}")
    return thr


def _suppression(xp: ArrayModule, boxes: Any, iou_threshold: float, offset: Any | None = None) -> Any:
    """(g, K, K) float32: 1 where box i outranks box j of its group (i < j) with IoU > threshold.

    `offset` (g,): added to every width and height of that group (YOLOX demo's `+ 1` pixel areas)."""
    x1, y1, x2, y2 = boxes[..., 0], boxes[..., 1], boxes[..., 2], boxes[..., 3]
    if offset is not None:
        x2, y2 = x2 + offset[:, None], y2 + offset[:, None]
    area = (x2 - x1) * (y2 - y1)
    iw = xp.minimum(x2[:, :, None], x2[:, None, :]) - xp.maximum(x1[:, :, None], x1[:, None, :])
    ih = xp.minimum(y2[:, :, None], y2[:, None, :]) - xp.maximum(y1[:, :, None], y1[:, None, :])
    xp.maximum(iw, 0, out=iw)
    xp.maximum(ih, 0, out=ih)
    inter = xp.multiply(iw, ih, out=iw)
    limit = xp.add(area[:, :, None], area[:, None, :], out=ih)
    limit -= inter
    limit *= iou_threshold  # IoU > t  <=>  inter > t * union (union > 0)
    k = int(boxes.shape[1])
    # inter > 0: an empty (inverted) box has a negative area, which must not make "0 > t x union" true
    return ((inter > limit) & (inter > 0) & xp.triu(xp.ones((k, k), dtype=bool), 1)).astype(xp.float32)


def nms_keep(xp: ArrayModule, boxes: Any, valid: Any, iou_threshold: float, offset: Any | None = None) -> Any:
    """Greedy NMS for g groups at once; returns (g, K) bool, True where kept.

    `boxes` (g, K, 4) xyxy, best first within each group; `valid` (g, K) marks real boxes
    (the rest is padding). Greedy NMS keeps box j iff no *kept* box i < j overlaps it by more
    than the threshold. That rule has exactly one solution (fix it box by box in score order),
    so iterating `keep = valid & ~any_i(keep_i & S_ij)` from "all kept" until nothing changes
    gives exactly the greedy result. It settles after a few iterations (the depth of
    suppression chains), each one a batched mat-vec over all boxes of all groups: no per-box
    Python loop, and one GPU sync per iteration rather than per kept box.
    """
    suppress = _suppression(xp, boxes, iou_threshold, offset)
    keep = valid
    for _ in range(int(boxes.shape[1]) + 1):
        hit = xp.matmul(keep.astype(xp.float32)[:, None, :], suppress)[:, 0, :] > 0
        new_keep = valid & ~hit
        if bool((new_keep == keep).all()):
            break
        keep = new_keep
    return keep


def _rank_within(xp: ArrayModule, sorted_keys: Any) -> Any:
    """Position of each element within its run of equal keys (keys sorted)."""
    return xp.arange(sorted_keys.shape[0]) - xp.searchsorted(sorted_keys, sorted_keys, side="left")


def _group_best_first(xp: ArrayModule, groups: Any, scores: Any) -> Any:
    """Indices ordered by group, then by descending score (stable)."""
    order = xp.argsort(-scores, kind="stable")
    return order[xp.argsort(groups[order], kind="stable")]


def grouped_nms(
    xp: ArrayModule, boxes: Any, scores: Any, groups: Any, *, iou_threshold: float, cap: int, offset: Any | None = None
) -> Any:
    """Greedy NMS where boxes only suppress boxes of their own group (image x class).

    The per-class offset trick, done exactly: every group is padded into its own row of a
    (G, K) layout instead of shifting coordinates by group x max_wh (which costs float32
    precision and makes every pair of boxes a candidate). At most `cap` best boxes per group
    enter; memory is bounded by running the groups in chunks. Returns kept indices, ordered
    by group then best first. `offset`: per box (the same within a group), added to widths and
    heights in the IoU (YOLOX demo's `+ 1` pixel areas, in model-input pixels).
    """
    order = _group_best_first(xp, groups, scores)
    rank = _rank_within(xp, groups[order])
    order, rank = order[rank < cap], rank[rank < cap]
    _, dense = xp.unique(groups[order], return_inverse=True)
    dense = dense.reshape(-1)
    n_groups, width = int(dense.max()) + 1, int(rank.max()) + 1
    padded = xp.zeros((n_groups, width, 4), dtype=xp.float32)
    padded[dense, rank] = boxes[order]
    valid = xp.zeros((n_groups, width), dtype=bool)
    valid[dense, rank] = True
    keep = xp.zeros((n_groups, width), dtype=bool)
    per_group = None
    if offset is not None:
        per_group = xp.zeros((n_groups,), dtype=xp.float32)
        per_group[dense] = offset[order]
    chunk = max(1, _NMS_BUDGET // (width * width))
    for lo in range(0, n_groups, chunk):
        part = per_group[lo : lo + chunk] if per_group is not None else None
        keep[lo : lo + chunk] = nms_keep(xp, padded[lo : lo + chunk], valid[lo : lo + chunk], iou_threshold, part)
    return order[keep[dense, rank]]


def greedy_nms(xp: ArrayModule, boxes: Any, groups: Any, iou_threshold: float) -> Any:
    """NMS of (N, 4) boxes already sorted best first, per group; kept indices, ascending."""
    n = int(boxes.shape[0])
    if n == 0:
        return xp.zeros((0,), dtype=xp.int64)
    rank_score = -xp.arange(n, dtype=xp.float32)
    kept = grouped_nms(xp, boxes, rank_score, xp.asarray(groups), iou_threshold=iou_threshold, cap=n)
    return xp.sort(kept)


def decode_batch(
    xp: ArrayModule,
    output: Any,
    *,
    conf_threshold: float | Any,
    iou_threshold: float,
    max_det: int,
    class_mask: Any | None = None,
    layout: ModelLayout,
    max_candidates: int = DEFAULT_MAX_CANDIDATES,
    images: int | None = None,
    class_agnostic: bool = False,
    iou_offset: float | Any | None = None,
) -> list[Rows]:
    """Decode a model output (as its `layout` says) into per-image rows.

    Dense layouts: best class per anchor (objectness x class score for yolov5/yolox), boxes
    decoded (a YOLOX raw head with its grid and strides), then class-aware NMS. End-to-end
    layouts already had NMS in the graph: rows are only filtered and ordered.
    `conf_threshold`: one float, or one per image (e.g. the lowest threshold of that image's
    camera). `class_mask`: optional bool (C,) or (B, C); False classes can never be reported
    (in dense layouts they do not win the argmax either). At most `max_candidates` per image
    and class enter NMS. `images`: how many leading images of the batch are real (a static-batch
    model runs padded batches). `class_agnostic`: one NMS across the classes of an image (YOLOX's
    demo) instead of one per class. `iou_offset`: one value per image (or one for all) added to box
    widths and heights in the IoU only: YOLOX's demo NMS computes areas as (x2 - x1 + 1) x (y2 - y1 + 1)
    in camera pixels, i.e. + the letterbox scale in model-input pixels. Returns that many host arrays
    (N <= max_det, 6) float32, best first.
    """
    batch = images if images is not None else int(output.shape[0])
    family = family_of(layout)
    img, boxes, scores, cls = family.decode(
        xp, output, layout, Decode(_thresholds(xp, conf_threshold, batch), class_mask, batch)
    )
    if int(img.shape[0]) == 0:
        return [_empty_rows() for _ in range(batch)]
    if family.nms_in_graph:
        kept = _group_best_first(xp, img, scores)
    else:
        groups = img if class_agnostic else img * max(layout.num_classes, 1) + cls
        offset = None
        if iou_offset is not None:
            offset = xp.broadcast_to(xp.asarray(iou_offset, dtype=xp.float32).reshape(-1), (batch,))[img]
        kept = grouped_nms(xp, boxes, scores, groups, iou_threshold=iou_threshold, cap=max_candidates, offset=offset)
        kept = xp.sort(kept)
        kept = kept[_group_best_first(xp, img[kept], scores[kept])]  # image-major, best first, ties by anchor
    kept = kept[_rank_within(xp, img[kept]) < max_det]
    kept = kept[(boxes[kept, 2] > boxes[kept, 0]) & (boxes[kept, 3] > boxes[kept, 1])]  # after the max_det cut
    rows = xp.empty((int(kept.shape[0]), ROW_WIDTH), dtype=xp.float32)
    rows[:, :4] = boxes[kept]
    rows[:, 4] = scores[kept]
    rows[:, 5] = cls[kept]
    host_rows: Rows = to_host(rows)
    bounds = np.searchsorted(to_host(img[kept]), np.arange(batch + 1), side="left")
    return [host_rows[bounds[b] : bounds[b + 1]] for b in range(batch)]


def join_outputs(xp: ArrayModule, outputs: Sequence[Any], layout: ModelLayout) -> Any:
    """The model's outputs as the one array post-processing reads (the layout's family joins them:
    the four-output NMS form becomes `[N, K, 6]` rows, see `daemon.inference.layouts.end2end`)."""
    return family_of(layout).join(xp, outputs, layout)


@dataclass(frozen=True, slots=True)
class RatioMapping:
    """Boxes back to camera pixels as YOLOX's demo (`/ ratio`, content at the top-left) or YOLOv5's
    `scale_boxes` (less the fractional centred padding, `/ gain`) map them: where the scaled frame is
    not a whole number of pixels this differs from the content the daemon fed by up to a pixel."""

    letterbox: Letterbox
    centred: bool

    def to_source(self, boxes_xyxy: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        lb, ratio = self.letterbox, self.letterbox.scale
        pad_x = (lb.size - lb.src_w * ratio) / 2 if self.centred else 0.0
        pad_y = (lb.size - lb.src_h * ratio) / 2 if self.centred else 0.0
        pad = np.array([pad_x, pad_y, pad_x, pad_y], dtype=np.float64)
        out = ((boxes_xyxy - pad) / ratio).astype(np.float32)
        np.clip(out[:, 0::2], 0.0, float(lb.src_w), out=out[:, 0::2])
        np.clip(out[:, 1::2], 0.0, float(lb.src_h), out=out[:, 1::2])
        return out


def source_mapping(letterbox: Letterbox, boxes: str) -> Letterbox | RatioMapping:
    """The frame's way back to camera pixels for a convention's `boxes` (`daemon.inference.layouts.BoxMapping`)."""
    return letterbox if boxes == "content" else RatioMapping(letterbox, centred=boxes == "ratio-centred")


def to_detections(
    rows: Rows,
    letterbox: Letterbox | RatioMapping,
    names: list[str] | tuple[str, ...],
    *,
    conf_threshold: float,
    classes: frozenset[int] | None = None,
) -> tuple[Detection, ...]:
    """Rows of one image (model-input pixels) -> detections in camera pixels, clipped.

    Keeps rows with score >= `conf_threshold` and (when `classes` is given) a class in it;
    drops rows with NaN values and boxes that are empty once clipped to the frame
    (e.g. a box entirely in the letterbox padding).
    """
    if rows.shape[0] == 0:
        return ()
    keep = np.isfinite(rows).all(axis=1) & (rows[:, 4] >= conf_threshold)
    if classes is not None:
        keep &= np.isin(rows[:, 5].astype(np.int64), np.fromiter(classes, dtype=np.int64, count=len(classes)))
    if not keep.any():
        return ()
    kept = rows[keep]
    boxes = letterbox.to_source(np.ascontiguousarray(kept[:, :4], dtype=np.float32))
    visible = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    known = len(names)
    out: list[Detection] = []
    for (x1, y1, x2, y2), (score, cls_f) in zip(boxes[visible].tolist(), kept[visible, 4:6].tolist(), strict=True):
        cls = int(cls_f)
        out.append(Detection(cls, names[cls] if 0 <= cls < known else str(cls), score, (x1, y1, x2, y2)))
    return tuple(out)
