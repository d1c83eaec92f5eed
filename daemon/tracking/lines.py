"""Counting lines: a crossing is where the anchor's path between two observations cuts the line segment.

Lines are stored normalised (fractions of the frame) and scaled to the current frame size on use, so a
resolution change keeps them. The crossing time is interpolated linearly between the two capture times at
the intersection. Hysteresis: after the path cuts the line, the crossing registers only once the anchor
stands ``hysteresis_px`` past it on the new side; going back cancels it; and each (track, line, direction)
registers at most once. A part jittering on the line, or standing on it, therefore counts once. Its time
is then that of the last cut before the anchor cleared the band (for a part that stood on the line while
the belt was stopped: about when the belt moved it off). A point exactly on the line counts as the "out" side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from daemon.tracking.specs import MIN_HYSTERESIS_PX, Anchor, LineSpec

Point = tuple[float, float]
Direction = Literal["in", "out"]


def anchor_point(box: tuple[float, float, float, float], mode: Anchor) -> Point:
    """The point of a box x1,y1,x2,y2 that crosses lines: its centre or the middle of its bottom edge."""
    x1, y1, x2, y2 = box
    return ((x1 + x2) / 2.0, y2 if mode == "bottom_center" else (y1 + y2) / 2.0)


@dataclass(frozen=True, slots=True)
class LineGeometry:
    """A line in pixels for one frame size: end points, unit normal pointing "in", unit direction."""

    a: Point
    b: Point
    normal: Point
    unit_dir: Point

    @classmethod
    def of(cls, spec: LineSpec, width: int, height: int) -> LineGeometry:
        a = (spec.start[0] * width, spec.start[1] * height)
        b = (spec.end[0] * width, spec.end[1] * height)
        dx, dy = spec.direction[0] * width, spec.direction[1] * height
        nd = math.hypot(dx, dy)
        lx, ly = b[0] - a[0], b[1] - a[1]
        ln = math.hypot(lx, ly)
        nx, ny = -ly / ln, lx / ln
        if nx * dx + ny * dy < 0.0:
            nx, ny = -nx, -ny
        return cls(a, b, (nx, ny), (dx / nd, dy / nd))

    def signed_distance(self, p: Point) -> float:
        """Distance of ``p`` from the line's infinite extension, positive on the "in" side."""
        return (p[0] - self.a[0]) * self.normal[0] + (p[1] - self.a[1]) * self.normal[1]

    def intersection(self, p0: Point, p1: Point) -> float | None:
        """Parameter s in [0, 1] where segment p0->p1 cuts the line segment (strictly changing side), or None."""
        d0, d1 = self.signed_distance(p0), self.signed_distance(p1)
        if (d0 > 0.0) == (d1 > 0.0):
            return None
        s = d0 / (d0 - d1)
        qx, qy = p0[0] + s * (p1[0] - p0[0]), p0[1] + s * (p1[1] - p0[1])
        lx, ly = self.b[0] - self.a[0], self.b[1] - self.a[1]
        u = ((qx - self.a[0]) * lx + (qy - self.a[1]) * ly) / (lx * lx + ly * ly)
        return s if 0.0 <= u <= 1.0 else None

    def signed_distances(self, points: NDArray[np.float64]) -> NDArray[np.float64]:
        """``signed_distance`` of each row of ``points`` (K, 2)."""
        out: NDArray[np.float64] = (points[:, 0] - self.a[0]) * self.normal[0] + (
            points[:, 1] - self.a[1]
        ) * self.normal[1]
        return out

    def hysteresis_px(self, boxes: NDArray[np.float64], fraction: float) -> NDArray[np.float64]:
        """Per box x1,y1,x2,y2 (K, 4): ``fraction`` of its extent across the line, at least ``MIN_HYSTERESIS_PX``."""
        extent = abs(self.normal[0]) * (boxes[:, 2] - boxes[:, 0]) + abs(self.normal[1]) * (boxes[:, 3] - boxes[:, 1])
        out: NDArray[np.float64] = np.maximum(MIN_HYSTERESIS_PX, fraction * extent)
        return out


def anchor_points(boxes: NDArray[np.float64], mode: Anchor) -> NDArray[np.float64]:
    """``anchor_point`` of each row of ``boxes`` (K, 4)."""
    out = np.empty((boxes.shape[0], 2))
    np.add(boxes[:, 0], boxes[:, 2], out=out[:, 0])
    out[:, 0] *= 0.5
    if mode == "bottom_center":
        out[:, 1] = boxes[:, 3]
    else:
        np.add(boxes[:, 1], boxes[:, 3], out=out[:, 1])
        out[:, 1] *= 0.5
    return out


@dataclass(slots=True)
class LineState:
    """One track against one line: the side it is established on, a pending cut, directions counted."""

    side: int = 0
    cut_ms: float | None = None
    cut_side: int = 0
    counted: set[str] = field(default_factory=set)

    def observe(
        self, geom: LineGeometry, p0: Point | None, p1: Point, *, t0_ms: int, t1_ms: int, hysteresis_px: float
    ) -> tuple[Direction, int] | None:
        """Feed the next observation; returns (direction, crossing Unix ms) when a crossing registers."""
        if p0 is not None:
            s = geom.intersection(p0, p1)
            if s is not None:
                to_side = 1 if geom.signed_distance(p1) > 0.0 else -1
                if to_side == self.side:
                    self.cut_ms, self.cut_side = None, 0
                else:
                    span = t1_ms - t0_ms
                    self.cut_ms, self.cut_side = (t0_ms + s * span if span > 0 else float(t1_ms)), to_side
        d1 = geom.signed_distance(p1)
        if abs(d1) < hysteresis_px:
            return None
        now_side = 1 if d1 > 0.0 else -1
        result: tuple[Direction, int] | None = None
        if self.cut_ms is not None and self.cut_side == now_side:
            direction: Direction = "in" if now_side > 0 else "out"
            if direction not in self.counted:
                self.counted.add(direction)
                result = (direction, round(self.cut_ms))
        self.side = now_side
        self.cut_ms, self.cut_side = None, 0
        return result
