"""Ground-truth line crossings of a rendered clip (its JSON beside the MP4): when each part's box centre
passes a vertical line. NumPy only, so the demo (`tools/demo.py --reference`) uses it without the
tracking evaluation's dependencies; `tools.tracking.eval` scores against it."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np

from tools.kit.synth.video import belt_shift


@dataclass(frozen=True)
class Crossing:
    key: int  # GT: part id; counted: track id
    direction: str  # "in" | "out"
    t_s: float  # clip time


def gt_crossings(gt: dict[str, Any], line_x_frac: float, edge_px: float = 2.0) -> list[Crossing]:
    """GT crossings of the vertical line at ``line_x_frac`` of the width by each part's box centre (all "in":
    the belt moves along +x), at times from the belt travel, in clip seconds; parts never whole in the frame
    near the line are skipped (no box to take the offset from)."""
    w, fps = gt["width"], gt["fps"]
    line_x = line_x_frac * w
    shift = np.asarray(gt["belt"]["shift_px"], dtype=np.float64)
    offsets: dict[int, list[float]] = {}
    for i, objs in gt["annotations"].items():
        for o in objs:
            x1, _, x2, _ = o["box"]
            if x1 > edge_px and x2 < w - edge_px:
                part = gt["parts"][o["id"]]
                offsets.setdefault(o["id"], []).append((x1 + x2) / 2 - part["x0"] - shift[int(i)])
    duration = gt["frames"] / fps
    grid = np.linspace(0.0, duration, round(duration * 1000) + 1)
    travel = belt_shift(grid, gt["belt"]["speed_px_s"], [tuple(s) for s in gt["belt"]["stops"]])
    out = []
    for pid, offs in offsets.items():
        need = line_x - gt["parts"][pid]["x0"] - statistics.median(offs)
        k = int(np.searchsorted(travel, need, side="left"))
        if 0 < k < len(grid):
            lo, hi = travel[k - 1], travel[k]
            t = grid[k - 1] + (grid[k] - grid[k - 1]) * ((need - lo) / (hi - lo) if hi > lo else 0.0)
            out.append(Crossing(pid, "in", float(t)))
    return sorted(out, key=lambda c: c.t_s)


__all__ = ["Crossing", "gt_crossings"]
