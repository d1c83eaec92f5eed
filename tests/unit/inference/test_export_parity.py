"""Decoding details where the daemon must do what Ultralytics' and YOLOv5's own
`non_max_suppression` do (found running real third-party exports: tools/checks/exports.py).

The outputs are YOLOv8-layout arrays `[1, 4 + C, A]` as an ONNX session returns them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from daemon.core.frames import Letterbox
from daemon.core.model_spec import ModelOverrides
from daemon.inference.layouts import ModelLayout
from daemon.inference.model_file import load_model_info
from daemon.inference.postprocess import decode_batch, source_mapping
from tests.support.onnx_models import wrap_demo

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


def _yolox_demo_nms(boxes: np.ndarray, scores: np.ndarray, thr: float) -> list[int]:
    """YOLOX's `yolox/utils/demo_utils.py` `nms`, transcribed: areas and overlaps + 1 pixel."""
    x1, y1, x2, y2 = boxes.T
    areas = (x2 - x1 + 1) * (y2 - y1 + 1)
    order, keep = scores.argsort()[::-1], []
    while order.size > 0:
        i = order[0]
        keep.append(int(i))
        w = np.maximum(0.0, np.minimum(x2[i], x2[order[1:]]) - np.maximum(x1[i], x1[order[1:]]) + 1)
        h = np.maximum(0.0, np.minimum(y2[i], y2[order[1:]]) - np.maximum(y1[i], y1[order[1:]]) + 1)
        inter = w * h
        order = order[np.nonzero(inter / (areas[i] + areas[order[1:]] - inter) <= thr)[0] + 1]
    return keep


def test_iou_offset_is_yolox_demo_nms_in_camera_pixels() -> None:
    """Small boxes whose plain IoU is under the threshold but YOLOX's `+ 1` IoU is over it: in
    camera pixels (letterbox scale 0.5: + 0.5 model-input pixels) the daemon keeps what YOLOX keeps."""
    rng = np.random.default_rng(3)
    anchors = []
    for k in range(8):
        cx, cy = 40.0 + 60 * k, 100.0
        anchors += [(cx, cy, 4.0, 4.0, k % 2, 0.9 - 0.01 * k), (cx + 1.6, cy + rng.uniform(0, 1), 4.0, 4.0, 0, 0.5)]
    out = np.zeros((1, 4 + CLASSES, len(anchors)), np.float32)
    for a, (cx, cy, w, h, cls, score) in enumerate(anchors):
        out[0, :4, a], out[0, 4 + cls, a] = (cx, cy, w, h), score
    layout = ModelLayout("yolov8", "channels-first", ("o",), CLASSES, len(anchors), 416, (8,))
    scale, thr = 0.5, 0.45
    plain = decode_batch(
        np, out, conf_threshold=0.25, iou_threshold=thr, max_det=300, layout=layout, class_agnostic=True
    )[0]
    yolox = decode_batch(
        np,
        out,
        conf_threshold=0.25,
        iou_threshold=thr,
        max_det=300,
        layout=layout,
        class_agnostic=True,
        iou_offset=scale,
    )[0]
    cam = (
        np.stack(
            [
                out[0, 0] - out[0, 2] / 2,
                out[0, 1] - out[0, 3] / 2,
                out[0, 0] + out[0, 2] / 2,
                out[0, 1] + out[0, 3] / 2,
            ],
            axis=1,
        )
        / scale
    )
    want = sorted(_yolox_demo_nms(cam, out[0, 4:].max(0), thr))
    got = sorted(
        int(np.argmin(np.abs(out[0, 0] - (r[0] + r[2]) / 2) + np.abs(out[0, 1] - (r[1] + r[3]) / 2))) for r in yolox
    )
    assert got == want
    assert len(plain) > len(yolox)  # the + 1 pixel decides here


def test_a_yolox_file_gets_yolox_demo_nms_unless_configured(tmp_path: Path) -> None:
    """YOLOX's ONNX demo (`multiclass_nms`, class_agnostic=True by default) suppresses across
    classes with its + 1 pixel IoU; Ultralytics-layout files keep per-class NMS with plain IoU."""
    yolox = wrap_demo(tmp_path / "yolox.onnx", "yolox-raw", 416, metadata={})
    info = load_model_info(yolox, 416)
    assert (info.class_agnostic_nms, info.iou_plus_one) == (True, True)
    assert "class-agnostic, IoU with YOLOX demo's +1 pixel areas" in info.lines()[0]
    aware = load_model_info(yolox, 416, ModelOverrides(nms="class-aware"))
    assert (aware.class_agnostic_nms, aware.iou_plus_one) == (False, True)
    v8 = load_model_info(wrap_demo(tmp_path / "v8.onnx", "yolov8", 416), 416)
    assert (v8.class_agnostic_nms, v8.iou_plus_one) == (False, False)


def test_boxes_go_back_to_the_camera_as_each_ecosystem_maps_them(tmp_path: Path) -> None:
    """A 1000x562 frame at 416 scales to 233.79 rows: YOLOX's demo divides by the ratio (content at the
    top-left), YOLOv5's `scale_boxes` subtracts the fractional padding (91.1) first, Ultralytics 8.x
    maps through the content fed (234 rows at 91); the daemon follows the file's own ecosystem."""
    lb = Letterbox.fit(1000, 562, 416)
    assert (lb.new_h, lb.pad_y) == (234, 91)
    box = np.array([[100.0, 120.0, 300.0, 200.0]], np.float32)
    gain = min(416 / 562, 416 / 1000)
    top_left = Letterbox(416, 1000, 562, lb.scale, lb.new_w, lb.new_h, 0, 0)
    np.testing.assert_allclose(source_mapping(top_left, "ratio").to_source(box), box / gain, rtol=1e-6)
    v5_pad = (416 - 562 * gain) / 2  # yolov5 utils/general.py scale_boxes
    v5 = (box - np.array([0, v5_pad, 0, v5_pad], np.float32)) / gain
    np.testing.assert_allclose(source_mapping(lb, "ratio-centred").to_source(box), v5, rtol=1e-6)
    assert source_mapping(lb, "content") is lb
    conv = {
        kind: load_model_info(wrap_demo(tmp_path / f"{kind}.onnx", kind, 416, metadata={}), 416).convention.boxes
        for kind in ("yolox-raw", "yolov5", "yolov8")
    }
    assert conv == {"yolox-raw": "ratio", "yolov5": "ratio-centred", "yolov8": "content"}
    centred = load_model_info(tmp_path / "yolox-raw.onnx", 416, ModelOverrides(padding="symmetric"))
    assert centred.convention.boxes == "content"
