"""Tracking metrics against the synthetic ground truth: line crossings, IDF1 and HOTA.

* GT crossings come from ``tools.kit.synth.crossings.gt_crossings``: when each GT part's box centre crosses
  a vertical line, from the belt travel in the GT JSON.
* ``match_crossings``: counted crossings against GT ones: one-to-one (Hungarian, gated by |dt|, the track's own
  part's crossing first), parts counted twice (two crossings whose tracks map to the same GT part), time errors.
* ``in_window``: the crossings inside the scored part of a clip, without the pairs cut by its ends.
* ``first_seen``: when each GT part was first detected at all: a missed part never detected before its
  crossing is the detector's miss, not the tracker's.
* ``without_ignored``: the frames with the tracked boxes on hardly visible parts (GT ``ignore``) taken out.
* ``id_metrics``: HOTA (Luiten et al. 2020) and IDF1 (Ristani et al. 2016) with the ``trackeval`` package's
  own implementations (``trackeval.metrics.HOTA`` / ``Identity``), fed per-frame IoU matrices directly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from tools.kit.synth.crossings import Crossing

Box = Sequence[float]
Frames = list[tuple[list[tuple[int, Box]], list[tuple[int, Box]]]]
"""(GT (id, box) pairs, tracked (id, box) pairs) per frame, the ignored GT and what it covers taken out."""


def match_crossings(
    gt: Sequence[Crossing],
    counted: Sequence[Crossing],
    tol_s: float,
    track_to_part: dict[int, int] | None = None,
    ignored_parts: Collection[int] = (),
) -> dict[str, Any]:
    """One-to-one matching of counted to GT crossings of the same direction within ``tol_s``, the crossing of
    the track's own GT part first: among the matchings with the most pairs, the one with the most pairs whose
    track maps to the GT crossing's part, then the least total |dt|. By time alone, one missed part among evenly
    spaced ones shifts every later pair by a part's spacing, and the time errors measure the spacing.

    Returns gt, counted, count_error (counted - gt) / gt, matched, missed (and missed_parts, their keys),
    extra, double (GT parts that two or more counted crossings map to through ``track_to_part``, the majority
    GT part of each track), ignored, and the signed time errors (counted - GT, seconds) of the matched pairs.
    With ``track_to_part`` given, a crossing whose track maps to no GT part (it never overlapped one: a false
    detection followed) is extra. A counted crossing whose track maps to one of ``ignored_parts`` (parts in
    view but never ``MIN_VISIBLE`` visible: no GT crossing, and none wrong) is neither matched nor extra, only
    ``ignored``; it still counts towards ``double``."""
    to_part = track_to_part or {}
    skip = set(ignored_parts)
    everything, counted = counted, [c for c in counted if to_part.get(c.key, -1) not in skip]
    pairs: list[tuple[int, int]] = []
    for direction in ("in", "out"):
        gi = [k for k, c in enumerate(gt) if c.direction == direction]
        ci = [k for k, c in enumerate(counted) if c.direction == direction]
        if not gi or not ci:
            continue
        dt = np.abs(np.array([[counted[c].t_s - gt[g].t_s for c in ci] for g in gi]))
        other_part = np.array([[to_part.get(counted[c].key) != gt[g].key for c in ci] for g in gi])
        # a track on no GT part at all (a false detection followed) is never some part's crossing
        nowhere = np.array([track_to_part is not None and counted[c].key not in to_part for c in ci])[None, :]
        # lexicographic costs: a pair fewer outweighs every identity, a pair on another part outweighs every |dt|
        most = min(len(gi), len(ci))
        foreign = (most + 1) * tol_s
        absent = (most + 1) * (tol_s + foreign)
        near = (dt <= tol_s) & ~nowhere
        cost = np.where(near, dt + foreign * other_part, absent)
        rows, cols = linear_sum_assignment(cost)
        pairs += [(gi[r], ci[c]) for r, c in zip(rows, cols, strict=True) if near[r, c]]
    errors = [counted[c].t_s - gt[g].t_s for g, c in pairs]
    per_part = Counter((to_part.get(c.key), c.direction) for c in everything)
    double = sum(1 for (part, _), n in per_part.items() if part is not None and n > 1)
    n_gt = len(gt)
    matched_gt = {g for g, _ in pairs}
    return {
        "missed_parts": sorted(gt[g].key for g in range(n_gt) if g not in matched_gt),
        "gt": n_gt,
        "counted": len(counted),
        "count_error": (len(counted) - n_gt) / n_gt if n_gt else 0.0,
        "matched": len(pairs),
        "missed": n_gt - len(pairs),
        "extra": len(counted) - len(pairs),
        "double": double,
        "ignored": len(everything) - len(counted),
        "time_errors_s": errors,
    }


def in_window(
    gt: Sequence[Crossing], counted: Sequence[Crossing], lo: float, hi: float, track_to_part: dict[int, int]
) -> tuple[list[Crossing], list[Crossing]]:
    """The GT and counted crossings in clip time ``lo..hi``, less the pairs that straddle an end: a part whose
    GT crossing falls inside and whose track's crossing falls outside (a few ms either side of ``hi``, say)
    is taken out on both sides, so a window's edge makes neither a missed part nor an extra one."""

    def inside(c: Crossing) -> bool:
        return lo <= c.t_s <= hi

    gt_in = {c.key for c in gt if inside(c)}
    gt_out = {c.key for c in gt if not inside(c)}
    counted_in = {track_to_part[c.key] for c in counted if inside(c) and c.key in track_to_part}
    counted_out = {track_to_part[c.key] for c in counted if not inside(c) and c.key in track_to_part}
    straddle = (gt_in & counted_out - counted_in) | (gt_out & counted_in)
    return (
        [c for c in gt if inside(c) and c.key not in straddle],
        [c for c in counted if inside(c) and track_to_part.get(c.key, -1) not in straddle],
    )


def without_ignored(
    frames: Sequence[tuple[Sequence[tuple[int, Box]], Sequence[tuple[int, Box]], Sequence[tuple[int, Box]]]],
    min_iou: float = 0.5,
) -> Frames:
    """MOTChallenge's preprocessing for frames of (GT pairs, ignored GT pairs, tracked pairs): per frame, the
    tracked boxes that the one-to-one IoU matching (Hungarian, IoU >= ``min_iou``) gives to an ignored GT box
    are removed with the ignored boxes, so following a part that is hardly visible is neither rewarded nor
    punished; returns (GT pairs, tracked pairs) frames."""
    out = []
    for gts, ign, trs in frames:
        if not ign or not trs:
            out.append((list(gts), list(trs)))
            continue
        every = [*gts, *ign]
        drop = {c for r, c in one_to_one([b for _, b in every], [b for _, b in trs], min_iou) if r >= len(gts)}
        out.append((list(gts), [t for k, t in enumerate(trs) if k not in drop]))
    return out


def iou_matrix(a: Sequence[Box], b: Sequence[Box]) -> np.ndarray:
    """IoU of every box of ``a`` (rows) with every box of ``b`` (columns), xyxy."""
    if not len(a) or not len(b):
        return np.zeros((len(a), len(b)))
    x = np.asarray(a, dtype=np.float64)[:, None, :]
    y = np.asarray(b, dtype=np.float64)[None, :, :]
    iw = np.clip(np.minimum(x[..., 2], y[..., 2]) - np.maximum(x[..., 0], y[..., 0]), 0, None)
    ih = np.clip(np.minimum(x[..., 3], y[..., 3]) - np.maximum(x[..., 1], y[..., 1]), 0, None)
    inter = iw * ih
    area_x = (x[..., 2] - x[..., 0]) * (x[..., 3] - x[..., 1])
    area_y = (y[..., 2] - y[..., 0]) * (y[..., 3] - y[..., 1])
    return np.asarray(inter / np.maximum(area_x + area_y - inter, 1e-9), dtype=np.float64)


def one_to_one(a: Sequence[Box], b: Sequence[Box], min_iou: float) -> list[tuple[int, int]]:
    """The (row in ``a``, column in ``b``) pairs of the one-to-one matching of most total IoU (Hungarian)
    whose IoU is at least ``min_iou``."""
    iou = iou_matrix(a, b)
    if iou.size == 0:
        return []
    rows, cols = linear_sum_assignment(-iou)
    return [(r, c) for r, c in zip(rows.tolist(), cols.tolist(), strict=True) if iou[r, c] >= min_iou]


def track_parts(
    frames: Sequence[tuple[Sequence[tuple[int, Box]], Sequence[tuple[int, Box]]]], min_iou: float = 0.5
) -> dict[int, int]:
    """The majority GT part of each track id over frames of (GT (id, box) pairs, tracked (id, box) pairs)."""
    votes: dict[int, Counter[int]] = {}
    for gts, trs in frames:
        for r, c in one_to_one([b for _, b in gts], [b for _, b in trs], min_iou):
            votes.setdefault(trs[c][0], Counter())[gts[r][0]] += 1
    return {track: c.most_common(1)[0][0] for track, c in votes.items()}


def first_seen(
    frames: Sequence[tuple[float, Sequence[tuple[int, Box]], Sequence[Box]]], min_iou: float = 0.5
) -> dict[int, float]:
    """When each GT part was first detected, over frames of (clip time, GT (id, box) pairs, detected boxes,
    tracked or not): the first frame where the one-to-one IoU matching gives it a box at ``min_iou`` or more.
    A part missing here was never detected, and no tracker could have counted it."""
    seen: dict[int, float] = {}
    for t, gts, dets in frames:
        for r, _ in one_to_one([b for _, b in gts], list(dets), min_iou):
            seen.setdefault(gts[r][0], t)
    return seen


def id_metrics(frames: Sequence[tuple[Sequence[tuple[int, Box]], Sequence[tuple[int, Box]]]]) -> dict[str, float]:
    """HOTA (mean over the IoU thresholds 0.05..0.95), DetA, AssA, IDF1, IDP, IDR over frames of (GT (id, box)
    pairs, tracked (id, box) pairs), with trackeval's implementations."""
    from trackeval.metrics import HOTA, Identity  # noqa: PLC0415 - a dev tool, only needed here

    gt_ids = sorted({i for gts, _ in frames for i, _ in gts})
    tr_ids = sorted({i for _, trs in frames for i, _ in trs})
    g_index, t_index = {v: k for k, v in enumerate(gt_ids)}, {v: k for k, v in enumerate(tr_ids)}
    data: dict[str, Any] = {
        "num_gt_ids": len(gt_ids),
        "num_tracker_ids": len(tr_ids),
        "num_gt_dets": sum(len(g) for g, _ in frames),
        "num_tracker_dets": sum(len(t) for _, t in frames),
        "gt_ids": [np.array([g_index[i] for i, _ in g], dtype=int) for g, _ in frames],
        "tracker_ids": [np.array([t_index[i] for i, _ in t], dtype=int) for _, t in frames],
        "similarity_scores": [iou_matrix([b for _, b in g], [b for _, b in t]) for g, t in frames],
    }
    hota = HOTA().eval_sequence(data)
    ident = Identity({"THRESHOLD": 0.5, "PRINT_CONFIG": False}).eval_sequence(data)
    return {
        "HOTA": float(np.mean(hota["HOTA"])),
        "DetA": float(np.mean(hota["DetA"])),
        "AssA": float(np.mean(hota["AssA"])),
        "IDF1": float(ident["IDF1"]),
        "IDP": float(ident["IDP"]),
        "IDR": float(ident["IDR"]),
    }
