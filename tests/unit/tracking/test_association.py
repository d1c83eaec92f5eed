"""IoU matrix and the gated assignment."""

from __future__ import annotations

import numpy as np

from daemon.tracking.association import assign, iou_matrix, xywh_to_xyxy, xyxy_to_xywh


def test_iou_values() -> None:
    a = np.array([[0.0, 0.0, 10.0, 10.0], [100.0, 100.0, 110.0, 120.0]])
    b = np.array([[0.0, 0.0, 10.0, 10.0], [5.0, 0.0, 15.0, 10.0], [50.0, 50.0, 60.0, 60.0]])
    m = iou_matrix(a, b)
    assert m.shape == (2, 3)
    np.testing.assert_allclose(m[0], [1.0, 50.0 / 150.0, 0.0])
    np.testing.assert_allclose(m[1], [0.0, 0.0, 0.0])
    assert iou_matrix(a[:0], b).shape == (0, 3)
    assert iou_matrix(a, b[:0]).shape == (2, 0)


def test_degenerate_boxes_have_zero_iou() -> None:
    a = np.array([[5.0, 5.0, 5.0, 5.0]])
    assert iou_matrix(a, a)[0, 0] == 0.0


def test_box_conversions_round_trip() -> None:
    b = np.array([[10.0, 20.0, 50.0, 80.0]])
    np.testing.assert_allclose(xyxy_to_xywh(b), [[30.0, 50.0, 40.0, 60.0]])
    np.testing.assert_allclose(xywh_to_xyxy(xyxy_to_xywh(b)), b)


def test_assign_is_optimal_and_gated() -> None:
    cost = np.array([[0.1, 0.2], [0.15, 0.9], [0.95, 0.96]])
    matches, rows, cols = assign(cost, 0.5)
    assert sorted(map(tuple, matches.tolist())) == [(0, 1), (1, 0)]  # total 0.35 beats greedy 0.1 + 0.9
    assert rows.tolist() == [2] and cols.tolist() == []
    matches, rows, cols = assign(cost, 0.12)
    assert matches.tolist() == [[0, 0]] and rows.tolist() == [1, 2] and cols.tolist() == [1]
    empty, rows, cols = assign(np.zeros((0, 3)), 0.5)
    assert empty.shape == (0, 2) and cols.tolist() == [0, 1, 2]
