"""The PLC's photo-eye counter over time, with faults (pure: the value is a function of time).

`PlcCounter.value(t)` is what a PLC's counter register holds `t` seconds into the scene: the parts
that passed the photo-eye (`part_times` already shifted by the travel time), starting from `start`
and wrapping at 2**bits, with the faults applied: `missed` (the photo-eye misses a part), `doubles`
(one part counted twice: a bouncing contact), `resets` (the PLC sets the counter to 0, as at a shift
change). `down` intervals are when the PLC does not answer (the servers check `is_down`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field


@dataclass(slots=True)
class PlcCounter:
    part_times: list[float]
    """Times (s, sorted) at which parts pass the photo-eye."""
    bits: int = 16
    start: int = 0
    """The counter's value at t=0 (e.g. just under 2**bits to force a wrap)."""
    missed: set[int] = field(default_factory=set)
    """Indexes of parts the photo-eye misses."""
    doubles: set[int] = field(default_factory=set)
    """Indexes of parts counted twice."""
    resets: list[float] = field(default_factory=list)
    """Times (s) at which the PLC resets the counter to 0."""
    down: list[tuple[float, float]] = field(default_factory=list)
    """[start, end) times (s) during which the PLC does not answer."""

    def value(self, t: float) -> int:
        """The raw counter at `t`."""
        reset_at = max((r for r in self.resets if r <= t), default=None)
        since = reset_at if reset_at is not None else float("-inf")
        lo = bisect.bisect_right(self.part_times, since)
        hi = bisect.bisect_right(self.part_times, t)
        counted = hi - lo - _within(sorted(self.missed), lo, hi) + _within(sorted(self.doubles), lo, hi)
        base = 0 if reset_at is not None else self.start
        return (base + counted) % (1 << self.bits)

    def is_down(self, t: float) -> bool:
        return any(a <= t < b for a, b in self.down)


def _within(indexes: list[int], lo: int, hi: int) -> int:
    return bisect.bisect_left(indexes, hi) - bisect.bisect_left(indexes, lo)


__all__ = ["PlcCounter"]
