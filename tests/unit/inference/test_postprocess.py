"""decode_batch + NMS and to_detections with NumPy, on hand-made YOLOv8 outputs."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from daemon.core.frames import Letterbox
from daemon.inference.layouts.dense import nonzero_2d
from daemon.inference.layouts.yolov8 import bare_layout
from daemon.inference.postprocess import decode_batch, greedy_nms, to_detections
from tests.support.postprocess_refs import NAMES, A, C, make_output, random_boxes, reference_nms


def decode(output: Any, **kwargs: Any) -> list[npt.NDArray[np.float32]]:
    """YOLOv8 `[B, 4 + C, A]` unless the test names another layout."""
    args: dict[str, Any] = {"conf_threshold": 0.25, "iou_threshold": 0.5, "max_det": 300} | kwargs
    if "layout" not in args:
        args["layout"] = bare_layout(output)
    return decode_batch(np, output, **args)


def test_known_boxes_come_back_in_xyxy_best_first() -> None:
    out = make_output(1, [[(10, 20, 50, 80, 2, 0.6), (200, 200, 260, 230, 0, 0.9)]])
    (rows,) = decode(out)
    assert rows.dtype == np.float32 and rows.shape == (2, 6)
    np.testing.assert_allclose(rows[0], [200, 200, 260, 230, 0.9, 0], rtol=1e-6)
    np.testing.assert_allclose(rows[1], [10, 20, 50, 80, 0.6, 2], rtol=1e-6)


def test_overlapping_same_class_is_suppressed_other_class_kept() -> None:
    out = make_output(
        1,
        [
            [
                (100, 100, 200, 200, 1, 0.9),
                (105, 105, 205, 205, 1, 0.8),  # IoU ~0.82 with the first, same class: suppressed
                (105, 105, 205, 205, 3, 0.7),  # same place, other class: kept (class-aware)
                (150, 100, 250, 200, 1, 0.6),  # IoU 0.33 with the first: kept
            ]
        ],
    )
    (rows,) = decode(out)
    assert rows[:, 4].tolist() == pytest.approx([0.9, 0.7, 0.6])
    assert rows[:, 5].tolist() == [1, 3, 1]


def test_same_place_in_different_images_is_not_suppressed() -> None:
    box = (10, 10, 60, 60, 0, 0.8)
    rows = decode(make_output(3, [[box], [], [box]]))
    assert [len(r) for r in rows] == [1, 0, 1]


def test_thresholds_scalar_and_per_image() -> None:
    out = make_output(2, [[(0, 0, 10, 10, 0, 0.3), (50, 50, 90, 90, 1, 0.5)]] * 2)
    assert [len(r) for r in decode(out, conf_threshold=0.4)] == [1, 1]
    assert [len(r) for r in decode(out, conf_threshold=0.3)] == [2, 2]  # >= threshold is kept
    per_image = decode(out, conf_threshold=np.array([0.2, 0.6], dtype=np.float32))
    assert [len(r) for r in per_image] == [2, 0]
    with pytest.raises(ValueError, match="3 values for a batch of 2"):
        decode(out, conf_threshold=[0.1, 0.2, 0.3])


def test_class_mask_removes_classes_before_the_argmax() -> None:
    out = make_output(2, [[(0, 0, 10, 10, 0, 0.9)], [(0, 0, 10, 10, 0, 0.9)]])
    out[:, 4 + 2, 0] = 0.5  # a weaker class-2 score on the same anchor
    mask = np.array([[True, True, True, True], [False, True, True, True]])
    rows = decode(out, class_mask=mask)
    assert rows[0][:, 5].tolist() == [0] and rows[1][:, 5].tolist() == [2]
    assert rows[1][0, 4] == pytest.approx(0.5)


def test_max_det_keeps_the_best_per_image() -> None:
    boxes = [(i * 20.0, 0.0, i * 20.0 + 10, 10.0, 0, 0.3 + i * 0.01) for i in range(30)]
    rows = decode(make_output(2, [boxes, boxes[:3]]), max_det=5)
    assert [len(r) for r in rows] == [5, 3]
    assert rows[0][:, 4].tolist() == pytest.approx([0.59, 0.58, 0.57, 0.56, 0.55])


def test_max_candidates_caps_what_enters_nms() -> None:
    boxes = [(i * 20.0, 0.0, i * 20.0 + 10, 10.0, 0, 0.3 + i * 0.01) for i in range(30)]
    (rows,) = decode(make_output(1, [boxes]), max_candidates=4)
    assert rows[:, 4].tolist() == pytest.approx([0.59, 0.58, 0.57, 0.56])


def test_empty_output_and_no_candidates() -> None:
    assert [r.shape for r in decode(np.zeros((3, 4 + C, A), np.float32))] == [(0, 6)] * 3
    assert decode(np.zeros((0, 4 + C, A), np.float32)) == []
    with pytest.raises(ValueError, match="expected output"):
        decode(np.zeros((1, 4, A), np.float32))  # no class rows
    with pytest.raises(ValueError, match="expected output"):
        decode(np.zeros((4 + C, A), np.float32))


def test_nan_scores_and_boxes_are_rejected() -> None:
    out = make_output(1, [[(0, 0, 10, 10, 0, 0.9), (50, 50, 60, 60, 1, 0.8), (80, 80, 90, 90, 2, 0.7)]])
    out[0, 4 + 0, 0] = np.nan  # NaN score
    out[0, 2, 1] = np.nan  # NaN width
    out[0, 3, 3] = np.inf  # inf height on an anchor with no score: irrelevant
    (rows,) = decode(out)
    assert rows[:, 5].tolist() == [2]
    assert np.isfinite(rows).all()


def test_zero_size_boxes_are_dropped() -> None:
    out = make_output(1, [[(10, 10, 10, 30, 0, 0.9)]])
    assert decode(out)[0].shape == (0, 6)


@pytest.mark.parametrize("seed", range(5))
def test_vectorised_nms_matches_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    boxes, scores = random_boxes(rng, 300)
    order = np.argsort(-scores)
    kept = greedy_nms(np, boxes[order], np.zeros(300, np.float32), 0.45)
    assert sorted(order[kept].tolist()) == sorted(reference_nms(boxes, scores, 0.45))


@pytest.mark.parametrize("seed", range(3))
def test_decode_batch_matches_reference_per_image_and_class(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    batch, n = 3, 200
    out = np.zeros((batch, 4 + C, n), np.float32)
    expected = []
    for b in range(batch):
        boxes, scores = random_boxes(rng, n)
        cls = rng.integers(0, C, n)
        out[b, 0:4] = np.stack(
            [(boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2, *(boxes[:, 2:] - boxes[:, :2]).T]
        )
        out[b, 4 + cls, np.arange(n)] = scores
        keep = scores >= 0.3
        ref = {
            (round(float(scores[i]), 6), int(c))
            for c in range(C)
            for i in np.flatnonzero(keep & (cls == c))[
                reference_nms(boxes[keep & (cls == c)], scores[keep & (cls == c)], 0.5)
            ]
        }
        expected.append(ref)
    rows = decode(out, conf_threshold=0.3, iou_threshold=0.5)
    for b in range(batch):
        assert {(round(float(s), 6), int(c)) for s, c in rows[b][:, 4:6]} == expected[b]
        assert (np.diff(rows[b][:, 4]) <= 0).all()


# --- to_detections: camera pixels, per-camera threshold and class filter -------------------------


def forward(letterbox: Letterbox, box: tuple[float, float, float, float]) -> tuple[float, ...]:
    """Camera pixels -> model-input pixels, the way the batcher places the frame."""
    sx, sy = letterbox.new_w / letterbox.src_w, letterbox.new_h / letterbox.src_h
    x1, y1, x2, y2 = box
    return (x1 * sx + letterbox.pad_x, y1 * sy + letterbox.pad_y, x2 * sx + letterbox.pad_x, y2 * sy + letterbox.pad_y)


@pytest.mark.parametrize(
    ("src_w", "src_h", "size"), [(640, 480, 640), (1280, 720, 800), (1920, 1080, 800), (480, 640, 640)]
)
def test_letterbox_round_trip_within_one_pixel(src_w: int, src_h: int, size: int) -> None:
    letterbox = Letterbox.fit(src_w, src_h, size)
    camera_boxes = [
        (0.1 * src_w, 0.2 * src_h, 0.3 * src_w, 0.5 * src_h),
        (0.6 * src_w, 0.55 * src_h, 0.95 * src_w, 0.98 * src_h),
        (0.0, 0.0, 0.12 * src_w, 0.1 * src_h),  # touching the frame corner
    ]
    out = make_output(1, [[(*forward(letterbox, b), i % C, 0.9 - 0.1 * i) for i, b in enumerate(camera_boxes)]])
    (rows,) = decode(out)
    dets = to_detections(rows, letterbox, NAMES, conf_threshold=0.25)
    assert len(dets) == 3
    for det, expected in zip(dets, camera_boxes, strict=True):
        np.testing.assert_allclose(det.box, expected, atol=1.0)
        assert det.label == NAMES[det.cls]


def test_boxes_are_clipped_to_the_frame_and_padding_only_boxes_dropped() -> None:
    letterbox = Letterbox.fit(1280, 720, 640)  # 640x360 content, pad_y = 140
    rows = np.array(
        [
            [-20, 100, 100, 200, 0.9, 0],  # left edge outside the frame
            [100, 10, 200, 120, 0.8, 1],  # entirely in the top padding
            [600, 450, 700, 520, 0.7, 2],  # beyond right and bottom
        ],
        dtype=np.float32,
    )
    dets = to_detections(rows, letterbox, NAMES, conf_threshold=0.25)
    assert [d.cls for d in dets] == [0, 2]
    assert dets[0].box[0] == 0.0
    assert dets[1].box[2] == 1280.0 and dets[1].box[3] == 720.0


def test_per_camera_threshold_and_class_filter() -> None:
    letterbox = Letterbox.fit(640, 640, 640)
    rows = np.array(
        [[10, 10, 50, 50, 0.9, 0], [60, 60, 90, 90, 0.5, 1], [100, 100, 150, 150, 0.35, 2]], dtype=np.float32
    )
    assert [d.cls for d in to_detections(rows, letterbox, NAMES, conf_threshold=0.4)] == [0, 1]
    assert [d.cls for d in to_detections(rows, letterbox, NAMES, conf_threshold=0.3, classes=frozenset({1, 2}))] == [
        1,
        2,
    ]
    assert to_detections(rows, letterbox, NAMES, conf_threshold=0.3, classes=frozenset()) == ()
    assert to_detections(np.zeros((0, 6), np.float32), letterbox, NAMES, conf_threshold=0.1) == ()


def test_to_detections_rejects_nan_and_labels_unknown_classes() -> None:
    letterbox = Letterbox.fit(640, 640, 640)
    rows = np.array([[np.nan, 10, 50, 50, 0.9, 0], [60, 60, 90, 90, 0.5, 7]], dtype=np.float32)
    (det,) = to_detections(rows, letterbox, NAMES, conf_threshold=0.25)
    assert (det.cls, det.label, det.score) == (7, "7", pytest.approx(0.5))
    assert det.box == pytest.approx((60.0, 60.0, 90.0, 90.0))
    assert all(isinstance(v, float) for v in det.box)


# --- other layouts: decoded as their own reference code would --------------------------------------


def _layout(name: str, form: str, rows: int, size: int = 64) -> Any:
    from daemon.inference.layouts import ModelLayout  # noqa: PLC0415

    return ModelLayout(name, form, ("output0",), C, rows, size, (8, 16, 32), 0, "test")  # type: ignore[arg-type]


def yolox_reference(raw: npt.NDArray[np.float32], size: int) -> npt.NDArray[np.float32]:
    """YOLOX demo/ONNXRuntime `demo_postprocess` + score = obj x cls, as its onnx_inference.py does."""
    grids, strides = [], []
    for stride in (8, 16, 32):
        n = size // stride
        xv, yv = np.meshgrid(np.arange(n), np.arange(n))
        grids.append(np.stack((xv, yv), 2).reshape(1, -1, 2))
        strides.append(np.full((1, n * n, 1), stride))
    out = raw.copy()
    out[..., :2] = (out[..., :2] + np.concatenate(grids, 1)) * np.concatenate(strides, 1)
    out[..., 2:4] = np.exp(out[..., 2:4]) * np.concatenate(strides, 1)
    return out


def test_yolox_raw_head_decodes_like_yolox_demo_postprocess() -> None:
    size = 64
    anchors = sum((size // s) ** 2 for s in (8, 16, 32))
    rng = np.random.default_rng(5)
    raw = np.zeros((2, anchors, 5 + C), np.float32)
    raw[..., :2] = rng.uniform(-0.5, 1.5, (2, anchors, 2))
    raw[..., 2:4] = rng.uniform(0.0, 1.5, (2, anchors, 2))
    raw[..., 4] = rng.uniform(0, 1, (2, anchors))
    raw[..., 5:] = rng.uniform(0, 1, (2, anchors, C)) ** 4
    ref = yolox_reference(raw, size)
    got = decode(raw, layout=_layout("yolox", "raw-head", anchors), conf_threshold=0.3, iou_threshold=1.0)
    for b in range(2):
        scores = ref[b, :, 4:5] * ref[b, :, 5:]
        cls = scores.argmax(1)
        best = scores[np.arange(anchors), cls]
        keep = np.flatnonzero(best >= 0.3)
        order = keep[np.argsort(-best[keep], kind="stable")]
        cx, cy, w, h = ref[b, order, :4].T
        want = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2, best[order], cls[order]], 1)
        np.testing.assert_allclose(got[b], want, rtol=1e-5, atol=1e-4)
    decoded = ref.copy()  # the same head exported with decode_in_inference: same rows
    same = decode(decoded, layout=_layout("yolox", "decoded", anchors), conf_threshold=0.3, iou_threshold=1.0)
    for a, b in zip(got, same, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)


def test_yolov5_score_is_objectness_times_class() -> None:
    out = np.zeros((1, 6, 5 + C), np.float32)
    out[0, :, :4] = (30, 30, 10, 10)
    out[0, 0, 4], out[0, 0, 5 + 2] = 0.5, 0.8  # 0.4: kept at 0.3
    out[0, 1, 4], out[0, 1, 5 + 1] = 0.4, 0.6  # 0.24: below
    (rows,) = decode(out, layout=_layout("yolov5", "decoded", 6), conf_threshold=0.3)
    np.testing.assert_allclose(rows, [[25, 25, 35, 35, 0.4, 2]], rtol=1e-6)


def test_end2end_rows_are_filtered_not_suppressed_again() -> None:
    out = np.zeros((2, 5, 6), np.float32)
    out[0, 0] = (10, 10, 50, 50, 0.9, 1)
    out[0, 1] = (12, 12, 52, 52, 0.8, 1)  # overlaps row 0: the graph's NMS kept it, so do we
    out[0, 2] = (60, 60, 90, 90, 0.2, 0)  # below threshold
    out[0, 3] = (60, 60, 50, 90, 0.9, 0)  # empty box
    out[1, 0] = (1, 2, 3, 4, 0.7, 3)
    out[1, 1] = (1, 2, 3, 4, np.nan, 3)
    lay = _layout("end2end", "rows", 5)
    first, second = decode(out, layout=lay)
    assert first[:, 4].tolist() == pytest.approx([0.9, 0.8]) and second[:, 5].tolist() == [3]
    (only,) = decode(out, layout=lay, images=1)  # a static batch of 2 with one real image
    assert only.shape == (2, 6)
    masked = decode(out, layout=lay, class_mask=np.array([True, False, True, True]))
    assert masked[0].shape == (0, 6) and masked[1].shape == (1, 6)


def test_batch_rows_carry_their_image_index() -> None:
    rows = np.array(
        [[1, 5, 5, 20, 20, 2, 0.9], [0, 1, 1, 9, 9, 0, 0.5], [1, 30, 30, 40, 40, 1, 0.6], [3, 0, 0, 9, 9, 0, 0.9]],
        np.float32,
    )
    a, b = decode(rows, layout=_layout("end2end", "batch-rows", 0), images=2)
    np.testing.assert_allclose(a, [[1, 1, 9, 9, 0.5, 0]])
    np.testing.assert_allclose(b, [[5, 5, 20, 20, 0.9, 2], [30, 30, 40, 40, 0.6, 1]])


def test_class_agnostic_nms_lets_the_best_class_suppress_others() -> None:
    out = make_output(1, [[(100, 100, 200, 200, 1, 0.9), (105, 105, 205, 205, 3, 0.7), (300, 300, 340, 340, 3, 0.5)]])
    (aware,) = decode(out)
    (agnostic,) = decode(out, class_agnostic=True)
    assert aware[:, 4].tolist() == pytest.approx([0.9, 0.7, 0.5])
    assert agnostic[:, 4].tolist() == pytest.approx([0.9, 0.5])


def test_batch_class_rows_read_their_own_column_order() -> None:
    """PINTO model zoo post-process: `batchno_classid_x1y1x2y2_score` [D, 7]."""
    rows = np.array([[0, 2, 5, 5, 20, 20, 0.9], [1, 1, 1, 1, 9, 9, 0.5]], np.float32)
    a, b = decode(rows, layout=_layout("end2end", "batch-class-rows", 0), images=2)
    np.testing.assert_allclose(a, [[5, 5, 20, 20, 0.9, 2]])
    np.testing.assert_allclose(b, [[1, 1, 9, 9, 0.5, 1]])


@pytest.mark.parametrize("shape", [(8, 8400), (1, 1), (3, 0), (0, 5), (5, 7)])
def test_nonzero_2d_is_numpys_nonzero_in_the_same_order(shape: tuple[int, int]) -> None:
    mask = np.random.default_rng(sum(shape)).random(shape) > 0.9
    if mask.size:
        mask.flat[-1] = True  # the last row and column are reached
    rows, cols = nonzero_2d(np, mask)
    want_rows, want_cols = np.nonzero(mask)
    assert rows.dtype == want_rows.dtype and cols.dtype == want_cols.dtype
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_array_equal(cols, want_cols)


def test_to_source_maps_each_column_with_its_own_pad_and_scale() -> None:
    lb = Letterbox.fit(1280, 720, 640)  # 640 x 360 content, 140 rows of padding above it
    for dtype in (np.float32, np.float64):
        boxes = np.array([[0, 140, 640, 500], [-10, 100, 700, 520], [320, 320, 330, 330]], dtype=dtype)
        out = lb.to_source(boxes)
        assert out.dtype == dtype
        np.testing.assert_allclose(out, [[0, 0, 1280, 720], [0, 0, 1280, 720], [640, 360, 660, 380]], rtol=1e-6)
    assert boxes[1, 0] == -10  # the input is left as it was
