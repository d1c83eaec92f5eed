"""Hand-made YOLOv8 outputs and an independent greedy NMS, to check decode_batch / greedy_nms against."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

NAMES = ["bolt", "hex_nut", "washer", "l_bracket"]
C = len(NAMES)
A = 64  # anchors: decode does not care how many, only the model check does


def make_output(
    batch: int, boxes: list[list[tuple[float, float, float, float, int, float]]], anchors: int = A
) -> npt.NDArray[np.float32]:
    """[B, 4 + C, A] with the given (x1, y1, x2, y2, cls, score) boxes per image, zeros elsewhere."""
    out = np.zeros((batch, 4 + C, anchors), dtype=np.float32)
    out[:, 0:2, :] = 100.0
    out[:, 2:4, :] = 10.0
    for b, image_boxes in enumerate(boxes):
        for a, (x1, y1, x2, y2, cls, score) in enumerate(image_boxes):
            out[b, 0:4, a] = ((x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1)
            out[b, 4 + cls, a] = score
    return out


def reference_nms(boxes: npt.NDArray[np.float32], scores: npt.NDArray[np.float32], iou: float) -> list[int]:
    """Plain O(n^2) greedy NMS, one box at a time."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    kept: list[int] = []
    for i in order:
        ok = True
        for j in kept:
            xx1, yy1 = max(boxes[i, 0], boxes[j, 0]), max(boxes[i, 1], boxes[j, 1])
            xx2, yy2 = min(boxes[i, 2], boxes[j, 2]), min(boxes[i, 3], boxes[j, 3])
            inter = max(0.0, xx2 - xx1) * max(0.0, yy2 - yy1)
            area_i = (boxes[i, 2] - boxes[i, 0]) * (boxes[i, 3] - boxes[i, 1])
            area_j = (boxes[j, 2] - boxes[j, 0]) * (boxes[j, 3] - boxes[j, 1])
            if inter / (area_i + area_j - inter) > iou:
                ok = False
                break
        if ok:
            kept.append(i)
    return kept


def random_boxes(rng: np.random.Generator, n: int) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """`n` random xyxy boxes in a 380 px square, with distinct scores (a well-defined order)."""
    xy = rng.uniform(0, 300, (n, 2))
    wh = rng.uniform(5, 80, (n, 2))
    boxes = np.concatenate([xy, xy + wh], axis=1).astype(np.float32)
    scores = rng.permutation(n).astype(np.float32) / n + 0.001  # distinct: a well-defined order
    return boxes, scores
