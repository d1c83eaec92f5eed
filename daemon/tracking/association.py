"""Box overlap and gated optimal assignment (Hungarian, via SciPy)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import linear_sum_assignment  # type: ignore[import-untyped, unused-ignore]  # scipy-stubs optional

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

_FORBIDDEN = 1e6


def indices(mask: NDArray[np.bool_]) -> IntArray:
    """Indices of the True entries of a 1-D mask (``np.flatnonzero`` without its wrappers: a hot path)."""
    out: IntArray = mask.nonzero()[0]
    return out


def xywh_to_xyxy(b: FloatArray) -> FloatArray:
    """(N, 4) cx,cy,w,h -> x1,y1,x2,y2."""
    half = b[:, 2:4] / 2.0
    return np.concatenate([b[:, :2] - half, b[:, :2] + half], axis=1)


def xyxy_to_xywh(b: FloatArray) -> FloatArray:
    """(N, 4) x1,y1,x2,y2 -> cx,cy,w,h."""
    return np.concatenate([(b[:, :2] + b[:, 2:4]) / 2.0, b[:, 2:4] - b[:, :2]], axis=1)


def iou_matrix(a: FloatArray, b: FloatArray) -> FloatArray:
    """Intersection over union of every box in ``a`` (N, 4) with every box in ``b`` (M, 4), both x1,y1,x2,y2."""
    if a.shape[0] == 0 or b.shape[0] == 0:
        return np.zeros((a.shape[0], b.shape[0]))
    iw = np.minimum(a[:, 2:3], b[:, 2]) - np.maximum(a[:, 0:1], b[:, 0])
    ih = np.minimum(a[:, 3:4], b[:, 3]) - np.maximum(a[:, 1:2], b[:, 1])
    np.maximum(iw, 0.0, out=iw)
    np.maximum(ih, 0.0, out=ih)
    inter = iw * ih
    area_a = np.maximum(a[:, 2] - a[:, 0], 0.0) * np.maximum(a[:, 3] - a[:, 1], 0.0)
    area_b = np.maximum(b[:, 2] - b[:, 0], 0.0) * np.maximum(b[:, 3] - b[:, 1], 0.0)
    union = area_a[:, None] + area_b[None, :] - inter
    out: FloatArray = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0.0)
    return out


def assign(cost: FloatArray, max_cost: float) -> tuple[IntArray, IntArray, IntArray]:
    """Minimum-cost matching where no pair costs more than ``max_cost``.

    Returns (matches (K, 2) of row, col; unmatched rows; unmatched cols). Pairs over the gate are forbidden
    before solving, so a gated pair never displaces a valid one.
    """
    n, m = cost.shape
    if n == 0 or m == 0:
        return np.zeros((0, 2), dtype=np.intp), np.arange(n, dtype=np.intp), np.arange(m, dtype=np.intp)
    allowed = cost <= max_cost
    # A row whose only allowed column has no other allowed row is in every optimum: take those pairs
    # directly (the usual case on a belt) and solve only what is left.
    per_row, per_col = allowed.sum(axis=1), allowed.sum(axis=0)
    lone = allowed & (per_row == 1)[:, None] & (per_col == 1)[None, :]
    lone_rows, lone_cols = np.nonzero(lone)
    rest_rows = indices((per_row > 0) & ~lone.any(axis=1))
    rest_cols = indices((per_col > 0) & ~lone.any(axis=0))
    rows, cols = lone_rows.astype(np.intp), lone_cols.astype(np.intp)
    if rest_rows.size and rest_cols.size:
        sub_allowed = allowed[rest_rows][:, rest_cols]
        r, c = linear_sum_assignment(np.where(sub_allowed, cost[rest_rows][:, rest_cols], _FORBIDDEN))
        ok = sub_allowed[r, c]
        rows = np.concatenate([rows, rest_rows[r[ok]]]).astype(np.intp)
        cols = np.concatenate([cols, rest_cols[c[ok]]]).astype(np.intp)
    row_free = np.ones(n, dtype=bool)
    row_free[rows] = False
    col_free = np.ones(m, dtype=bool)
    col_free[cols] = False
    free_rows, free_cols = indices(row_free), indices(col_free)
    return np.stack([rows, cols], axis=1), free_rows, free_cols
