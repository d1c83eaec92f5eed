"""Synthetic conveyor scenes for the tracking tests: parts riding a belt along +x, detected with noise."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from daemon.core.objects import ObjectEvent
from daemon.tracking import CameraTracker

W, H = 1280, 720


@dataclass(frozen=True)
class Part:
    x0: float  # centre x at belt travel 0, px
    y: float  # centre y, px
    speed: float  # px per second of belt travel (negative: moves towards -x)
    w: float = 50.0
    h: float = 40.0
    cls: int = 0


def belt_stop_and_go(stop_at_s: float, stop_for_s: float) -> Callable[[float], float]:
    """Belt travel in seconds: runs, halts for ``stop_for_s`` at ``stop_at_s``, runs again."""

    def travel(t: float) -> float:
        if t <= stop_at_s:
            return t
        return stop_at_s + max(0.0, t - stop_at_s - stop_for_s)

    return travel


@dataclass
class Scene:
    parts: Sequence[Part]
    duration_s: float
    fps: float = 30.0
    noise_px: float = 1.0
    travel: Callable[[float], float] = field(default=lambda t: t)
    keep: Callable[[int], bool] = field(default=lambda k: True)
    seed: int = 0
    t0_ms: int = 1_700_000_000_000
    jitter: Callable[[int, float], float] | None = None  # (part index, t) -> extra x offset, px

    def x(self, i: int, t: float) -> float:
        p = self.parts[i]
        extra = self.jitter(i, t) if self.jitter is not None else 0.0
        return p.x0 + p.speed * self.travel(t) + extra

    def frames(self) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray, list[int]]]:
        """(captured_ms, boxes, scores, classes, part index per detection) for every kept frame."""
        rng = np.random.default_rng(self.seed)
        out = []
        for k in range(int(self.duration_s * self.fps)):
            t = k / self.fps
            rows, who = [], []
            for i, p in enumerate(self.parts):
                cx = self.x(i, t)
                if 0.0 <= cx <= W:
                    rows.append((cx - p.w / 2, p.y - p.h / 2, cx + p.w / 2, p.y + p.h / 2))
                    who.append(i)
            if not self.keep(k):
                continue
            order = rng.permutation(len(rows))
            boxes = np.array([rows[j] for j in order], dtype=np.float64).reshape(-1, 4)
            boxes += rng.normal(0.0, self.noise_px, boxes.shape)
            scores = rng.uniform(0.7, 0.95, len(rows))
            classes = np.array([self.parts[who[j]].cls for j in order], dtype=np.int64)
            out.append((self.t0_ms + round(t * 1000), boxes, scores, classes, [who[j] for j in order]))
        return out

    def crossing_ms(self, i: int, line_x: float) -> float | None:
        """True time (Unix ms) the part's centre reaches x = line_x (bisection on the belt travel)."""
        lo, hi = 0.0, self.duration_s

        def f(t: float) -> float:
            return self.x(i, t) - line_x

        if f(lo) * f(hi) > 0:
            return None
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(lo) * f(mid) > 0 else (lo, mid)
        return self.t0_ms + hi * 1000.0


LABELS = ("bolt", "hex_nut", "washer", "l_bracket")


@dataclass
class Run:
    events: list[ObjectEvent]
    ids_per_part: dict[int, set[int]]
    parts_per_id: dict[int, set[int]]


def run_scene(tracker: CameraTracker, scene: Scene, *, size: tuple[int, int] = (W, H), finish: bool = True) -> Run:
    events: list[ObjectEvent] = []
    ids_per_part: dict[int, set[int]] = {}
    parts_per_id: dict[int, set[int]] = {}
    last_ms = scene.t0_ms
    for ms, boxes, scores, classes, who in scene.frames():
        labels = [LABELS[c] for c in classes]
        upd = tracker.update(ms, size[0], size[1], boxes, scores, classes, labels)
        events += upd.events
        for tid, part in zip(upd.track_ids, who, strict=True):
            if tid is not None:
                ids_per_part.setdefault(part, set()).add(tid)
                parts_per_id.setdefault(tid, set()).add(part)
        last_ms = ms
    if finish:
        events += tracker.finish(last_ms)
    return Run(events, ids_per_part, parts_per_id)


def crossings(run: Run, line: str) -> list[ObjectEvent]:
    return [e for e in run.events if e.event == "crossed" and e.line == line]


def part_of(run: Run, track: int) -> int:
    (part,) = run.parts_per_id[track]
    return part


def lane_parts(
    n: int, *, speed: float, spacing: float, lanes: Sequence[float] = (200.0, 400.0), start: float = -100.0
) -> list[Part]:
    """``n`` parts per lane entering from the left ``spacing`` px apart (they appear once x >= 0)."""
    return [
        Part(x0=start - k * spacing - 17.0 * j, y=y, speed=speed, cls=(k + j) % 4)
        for j, y in enumerate(lanes)
        for k in range(n)
    ]


def vertical_line_at(x_px: float) -> tuple[tuple[float, float], tuple[float, float]]:
    return (x_px / W, 0.0), (x_px / W, 1.0)


def close(a: float, b: float, tol: float) -> bool:
    return math.isfinite(a) and abs(a - b) <= tol
