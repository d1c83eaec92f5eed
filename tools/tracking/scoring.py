"""The tracking evaluation's scoring: what the daemon published for one clip scored against the clip's GT
(``score_clip``: counts, missed/extra/double crossings, crossing-time errors, IDF1 and HOTA), pooled over a
mode's clips (``pooled``) and checked against the goals (``goal_check``). What each figure means:
``tools.tracking.eval``'s docstring, step 5; the measures themselves: ``tools.tracking.metrics``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

import numpy as np

from tools.kit.stats import percentile
from tools.kit.synth.crossings import Crossing, gt_crossings
from tools.tracking.daemon_run import Published
from tools.tracking.metrics import (
    Frames,
    first_seen,
    id_metrics,
    in_window,
    match_crossings,
    track_parts,
    without_ignored,
)

LINE: dict[str, Any] = {"id": "mid", "start": [0.5, 0.0], "end": [0.5, 1.0], "direction": [1.0, 0.0]}
TAIL_S = 0.5
MATCH_TOL_S = 1.0
GOALS: dict[str, Any] = {
    "count_error": {"file": 0.01, "drop": 0.02},
    "double": 0,
    "median_dt_intervals": 0.5,
    "IDF1": 0.9,
}


def score_clip(pub: Published, gt: dict[str, Any], frame_of: Callable[[int], int]) -> tuple[dict[str, Any], Frames]:
    """One clip's figures and its (GT, tracked) frames for pooling."""
    entries, last_seq = [], -1
    for e in sorted(pub.entries, key=lambda e: e["captured_ms"]):
        if e["seq"] < last_seq or frame_of(e["seq"]) >= gt["frames"]:
            break  # a reconnect, or the RTSP loop's second pass
        entries.append(e)
        last_seq = e["seq"]
    fps = gt["fps"]
    idx = np.array([frame_of(e["seq"]) for e in entries])
    t_clip = idx / fps
    cap = np.array([e["captured_ms"] for e in entries], dtype=np.float64)
    lo, hi = float(t_clip[0]), float(t_clip[-1]) - TAIL_S
    counted = [
        Crossing(ev.track, ev.direction or "", float(np.interp(ev.at_ms, cap, t_clip)))
        for ev in pub.objects
        if ev.event == "crossed" and ev.line == LINE["id"] and cap[0] <= ev.at_ms <= cap[-1]
    ]
    ignore = gt.get("ignore", {})
    frames3 = [
        (
            [(o["id"], o["box"]) for o in gt["annotations"][str(i)]],
            [(o["id"], o["box"]) for o in ignore.get(str(i), [])],
            [(d["track"], d["box"]) for d in e["dets"] if "track" in d],
        )
        for i, e in zip(idx.tolist(), entries, strict=True)
    ]
    required = {o["id"] for objs in gt["annotations"].values() for o in objs}
    ignored_parts = {o["id"] for objs in ignore.values() for o in objs} - required
    to_part = track_parts([([*g, *ig], t) for g, ig, t in frames3])
    truth, counted = in_window(gt_crossings(gt, LINE["start"][0]), counted, lo, hi, to_part)
    m = match_crossings(truth, counted, MATCH_TOL_S, to_part, ignored_parts)
    seen = first_seen(
        [
            (t, g, [d["box"] for d in e["dets"]])
            for t, (g, _, _), e in zip(t_clip.tolist(), frames3, entries, strict=True)
        ]
    )
    when = {c.key: c.t_s for c in truth}
    m["undetected"] = sum(1 for p in m["missed_parts"] if seen.get(p, math.inf) >= when[p])
    frames = without_ignored(frames3)
    interval = float(np.median(np.diff(t_clip))) if len(t_clip) > 1 else math.nan
    wall = float(np.median(np.diff(cap))) / 1000 if len(cap) > 1 else math.nan
    m |= id_metrics(frames) | {
        "interval_ms": 1000 * interval,
        "processed": len(entries) / gt["frames"],
        "wall_per_clip_s": wall / interval if interval else math.nan,
    }
    return m, frames


def abs_stats(errors: list[float], interval_ms: float) -> dict[str, float]:
    if not errors:
        return {"median_dt_ms": math.nan, "p90_dt_ms": math.nan, "median_dt_intervals": math.nan, "bias_ms": math.nan}
    a = np.abs(np.array(errors)) * 1000
    med = float(np.median(a))
    return {
        "median_dt_ms": med,
        "p90_dt_ms": percentile(a, 90),
        "median_dt_intervals": med / interval_ms,
        "bias_ms": 1000 * statistics.median(errors),
    }


def pooled(clips: dict[str, dict[str, Any]], frames: list[Frames]) -> dict[str, Any]:
    keys = ("gt", "counted", "matched", "missed", "undetected", "extra", "double", "ignored")
    out: dict[str, Any] = {k: sum(c[k] for c in clips.values()) for k in keys}
    out["count_error"] = (out["counted"] - out["gt"]) / out["gt"] if out["gt"] else 0.0
    out["worst_clip_count_error"] = max((abs(c["count_error"]) for c in clips.values()), default=0.0)
    errors = [e for c in clips.values() for e in c["time_errors_s"]]
    interval = float(np.median([c["interval_ms"] for c in clips.values()]))
    out |= abs_stats(errors, interval) | {"interval_ms": interval}
    out["processed"] = float(np.mean([c["processed"] for c in clips.values()]))
    # ids made unique per clip, then one pooled HOTA/IDF1
    merged = [
        ([(k * 1_000_000 + g, b) for g, b in gts], [(k * 1_000_000 + t, b) for t, b in trs])
        for k, fs in enumerate(frames)
        for gts, trs in fs
    ]
    return out | id_metrics(merged)


def goal_check(mode: str, p: dict[str, Any]) -> dict[str, bool]:
    limit = GOALS["count_error"].get(mode, GOALS["count_error"]["file" if p["processed"] > 0.99 else "drop"])
    return {
        "count_error": abs(p["count_error"]) <= limit,
        "double": p["double"] <= GOALS["double"],
        "median_dt": p["median_dt_intervals"] <= GOALS["median_dt_intervals"],
        "IDF1": p["IDF1"] >= GOALS["IDF1"],
    }
