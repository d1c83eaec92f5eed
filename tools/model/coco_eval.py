"""Small COCO-style detection evaluation helpers on top of faster-coco-eval.

Boxes everywhere are ``[x1, y1, x2, y2]`` in pixels; class ids are 0-based indices into ``names``.

    from tools.model.coco_eval import evaluate
    res = evaluate({0: [(cls, box), ...]}, {0: [(cls, score, box), ...]}, names, width, height)
    res["mAP50"], res["mAP50_95"], res["per_class_AP50"]  # {"bolt": 0.97, ...}
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from faster_coco_eval import COCO, COCOeval_faster

GtBox = tuple[int, Sequence[float]]  # (cls, xyxy)
DetBox = tuple[int, float, Sequence[float]]  # (cls, score, xyxy)


def evaluate(
    gt_by_image: Mapping[int, Sequence[GtBox]],
    dets_by_image: Mapping[int, Sequence[DetBox]],
    names: Sequence[str],
    width: int,
    height: int,
) -> dict[str, Any]:
    """COCO bbox mAP of detections against ground truth.

    Args:
        gt_by_image: image id -> list of ``(cls, [x1, y1, x2, y2])``. Every evaluated image must be a key
            (an image without objects maps to an empty list).
        dets_by_image: image id -> list of ``(cls, score, [x1, y1, x2, y2])``; missing ids = no detections.
        names: class names, index = class id.
        width, height: image size (only recorded in the COCO image entries).

    Returns:
        ``{"mAP50": float, "mAP50_95": float, "per_class_AP50": {name: float}, "per_class_AP50_95": {...},
        "n_gt": int, "n_det": int}``.  Classes without any ground truth get ``nan`` and are left out of the
        means (COCO convention).  With no ground truth at all, the means are ``nan``.
    """
    images = [{"id": int(i), "width": int(width), "height": int(height)} for i in gt_by_image]
    anns = _annotations(gt_by_image)
    cats = [{"id": k + 1, "name": n} for k, n in enumerate(names)]
    dets = _detections(dets_by_image, gt_by_image)
    nan = float("nan")
    result: dict[str, Any] = {
        "mAP50": nan,
        "mAP50_95": nan,
        "per_class_AP50": {n: nan for n in names},
        "per_class_AP50_95": {n: nan for n in names},
        "n_gt": len(anns),
        "n_det": len(dets),
    }
    if not anns:
        return result
    quiet = logging.getLogger("faster_coco_eval").debug
    gt = COCO({"images": images, "annotations": anns, "categories": cats}, print_function=quiet)
    if not dets:
        result.update({"mAP50": 0.0, "mAP50_95": 0.0})
        for k, n in enumerate(names):
            if any(a["category_id"] == k + 1 for a in anns):
                result["per_class_AP50"][n] = result["per_class_AP50_95"][n] = 0.0
        return result
    dt = gt.loadRes(dets)
    ev = COCOeval_faster(gt, dt, iouType="bbox", print_function=quiet)
    ev.params.maxDets = [1, 10, 300]
    ev.evaluate()
    ev.accumulate()
    _average_precision(ev, names, result)
    return result


def _annotations(gt_by_image: Mapping[int, Sequence[GtBox]]) -> list[dict[str, Any]]:
    """The ground truth as COCO annotations (xywh, 1-based category ids)."""
    anns: list[dict[str, Any]] = []
    for i, gts in gt_by_image.items():
        for cls, box in gts:
            x1, y1, x2, y2 = (float(v) for v in box)
            anns.append(
                {
                    "id": len(anns) + 1,
                    "image_id": int(i),
                    "category_id": int(cls) + 1,
                    "bbox": [x1, y1, x2 - x1, y2 - y1],
                    "area": (x2 - x1) * (y2 - y1),
                    "iscrowd": 0,
                }
            )
    return anns


def _detections(
    dets_by_image: Mapping[int, Sequence[DetBox]], gt_by_image: Mapping[int, Sequence[GtBox]]
) -> list[dict[str, Any]]:
    """The detections on evaluated images as COCO results (xywh, 1-based category ids)."""
    dets: list[dict[str, Any]] = []
    for i, found in dets_by_image.items():
        if i not in gt_by_image:
            continue
        for cls, score, xyxy in found:
            x1, y1, x2, y2 = (float(v) for v in xyxy)
            dets.append(
                {
                    "image_id": int(i),
                    "category_id": int(cls) + 1,
                    "score": float(score),
                    "bbox": [x1, y1, x2 - x1, y2 - y1],
                }
            )
    return dets


def _average_precision(ev: COCOeval_faster, names: Sequence[str], result: dict[str, Any]) -> None:
    """Fill ``result``'s per-class AP50 / AP50-95 and their means from an accumulated evaluation."""
    nan = float("nan")
    # precision: [T (iou thr), R (recall pts), K (classes), A (area ranges), M (max dets)]; area "all", 300 dets
    prec = np.asarray(ev.eval["precision"])[:, :, :, 0, -1]
    iou_thrs = np.asarray(ev.params.iouThrs)
    t50 = int(np.argmin(np.abs(iou_thrs - 0.5)))

    def ap(p: np.ndarray) -> float:
        v = p[p > -1]
        return float(v.mean()) if v.size else nan

    cat_ids = list(ev.params.catIds)
    ap50, ap5095 = [], []
    for k, n in enumerate(names):
        if k + 1 not in cat_ids:
            continue
        j = cat_ids.index(k + 1)
        a50, a = ap(prec[t50, :, j]), ap(prec[:, :, j])
        result["per_class_AP50"][n], result["per_class_AP50_95"][n] = a50, a
        if not np.isnan(a50):
            ap50.append(a50)
            ap5095.append(a)
    result["mAP50"] = float(np.mean(ap50)) if ap50 else nan
    result["mAP50_95"] = float(np.mean(ap5095)) if ap5095 else nan
