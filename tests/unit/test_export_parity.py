"""Decoding details where the daemon must do what Ultralytics' and YOLOv5's own
`non_max_suppression` do (found running real third-party exports: tools/check_exports.py).

The outputs are YOLOv8-layout arrays `[1, 4 + C, A]` as an ONNX session returns them.
"""

from __future__ import annotations

import numpy as np

from daemon.model_layout import ModelLayout
from daemon.postprocess import decode_batch

CLASSES = 2


def _output(*anchors: tuple[float, float, float, float, int, float]) -> np.ndarray:
    """cx, cy, w, h, class, score per anchor; 16 anchors, the rest score 0."""
    out = np.zeros((1, 4 + CLASSES, 16), np.float32)
    out[0, :4, :] = 8.0
    for a, (cx, cy, w, h, cls, score) in enumerate(anchors):
        out[0, :4, a] = (cx, cy, w, h)
        out[0, 4 + cls, a] = score
    return out


def _decode(out: np.ndarray, max_det: int = 300) -> np.ndarray:
    layout = ModelLayout("yolov8", "channels-first", ("output0",), CLASSES, out.shape[2], 416, (8, 16, 32))
    return decode_batch(np, out, conf_threshold=0.25, iou_threshold=0.7, max_det=max_det, layout=layout)[0]


def test_an_empty_box_counts_toward_max_det_and_is_dropped_after_the_cut() -> None:
    """Ultralytics keeps a zero-width box through NMS and `max_det`, and a YOLO26 export makes some:
    the best two rows here are one empty box and one real box, so one row is published, not two."""
    out = _output((50, 50, 0, 20, 0, 0.9), (150, 50, 20, 20, 0, 0.8), (250, 50, 20, 20, 1, 0.7))
    rows = _decode(out, max_det=2)
    assert rows.shape == (1, 6)
    np.testing.assert_allclose(rows[0], [140, 40, 160, 60, 0.8, 0])
    assert _decode(out).shape[0] == 2  # without the cut both real boxes, never the empty one


def test_an_inverted_box_never_suppresses_the_box_it_covers() -> None:
    """w < 0: area negative, IoU = 0 / (a negative union); torchvision keeps the other box."""
    out = _output((100, 100, -60, 40, 0, 0.9), (100, 100, 40, 40, 0, 0.8))
    rows = _decode(out)
    np.testing.assert_allclose(rows, [[80, 80, 120, 120, 0.8, 0]])


def test_score_ties_keep_the_anchor_order_across_classes() -> None:
    """Equal scores (common in fp16 exports) at the `max_det` cut: torchvision's NMS keeps them in
    anchor order, so the earlier anchor wins whatever its class."""
    out = _output((300, 300, 10, 10, 1, 0.5), (20, 20, 10, 10, 0, 0.5), (60, 20, 10, 10, 0, 0.4))
    rows = _decode(out, max_det=1)
    np.testing.assert_allclose(rows, [[295, 295, 305, 305, 0.5, 1]])
    both = _decode(out, max_det=2)
    assert both[:, 5].tolist() == [1, 0]
