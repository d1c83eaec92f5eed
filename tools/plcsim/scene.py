"""The belt's ground truth: when each part crosses the camera's line (pure, seeded).

A stop-and-go belt runs for `run_s`, stops for `stop_s`, and so on; while it runs, parts arrive with
exponential gaps around `rate_per_s` but never closer than `min_gap_s` (parts do not overlap). A part
reaches the photo-eye `lag_s` after the line. `seen_by_camera` drops a share of the parts in a time
range (the detector missing parts: a dirty lens, a new light).
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Belt:
    rate_per_s: float = 2.0
    min_gap_s: float = 0.15
    run_s: float = 0.0
    """Seconds the belt runs between stops; 0: it never stops."""
    stop_s: float = 0.0
    seed: int = 1

    def crossings(self, start_s: float, end_s: float) -> list[float]:
        """Times (s) at which parts cross the camera's line in [start_s, end_s)."""
        rng = random.Random(self.seed)
        out: list[float] = []
        t = 0.0
        while t < end_s:
            t += max(self.min_gap_s, rng.expovariate(self.rate_per_s))
            if self.run_s > 0:
                cycle = self.run_s + self.stop_s
                phase = t % cycle
                if phase >= self.run_s:  # the belt stands: the part arrives when it runs again
                    t += cycle - phase
            if start_s <= t < end_s:
                out.append(t)
        return out


@dataclass(frozen=True, slots=True)
class Miss:
    """The camera misses `share` of the parts between `start_s` and `end_s` (seeded, spread evenly)."""

    start_s: float
    end_s: float
    share: float


def seen_by_camera(parts: list[float], misses: list[Miss]) -> list[float]:
    """The parts the camera counts: every part but the missed ones (every k-th in a miss range)."""
    out: list[float] = []
    debt = {id(m): 0.0 for m in misses}
    for t in parts:
        missed = False
        for m in misses:
            if m.start_s <= t < m.end_s:
                debt[id(m)] += m.share
                if debt[id(m)] >= 1.0:
                    debt[id(m)] -= 1.0
                    missed = True
        if not missed:
            out.append(t)
    return out


__all__ = ["Belt", "Miss", "seen_by_camera"]
