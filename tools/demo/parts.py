"""What `tools/demo.py` shows of the parts: a camera's objects stream, read as a consumer reads it.

`CameraParts` takes the camera's `crossed` entries (`daemon.core.objects.parse_fields`) in stream
order and keeps, per counting line, the running `count` of each direction (the newest entry's, so
a daemon restarted on a kept stream goes on from its totals, as the bridge does), the belt speed
(the median `speed_mm_s` of the `in` crossings in the last `window_s` seconds) and the last crossing:
its label and its arrival time at the line's first gate, as seconds after the crossing.
`text()` is that as the status board shows it, ` in <N> out <M>` per line:

    count in 42 out 0  belt 150 mm/s  last washer -> reject1 in 2.8 s
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from daemon.core.seam import ObjectEvent


def line_counts(line: str, counts: dict[tuple[str, str], int]) -> str:
    """`<line> in <N> out <M>`: the same words in the terminal, the live view and tools.demo.plc."""
    return f"{line} in {counts.get((line, 'in'), 0)} out {counts.get((line, 'out'), 0)}"


def gate_arrival(event: ObjectEvent) -> str:
    """`-> reject1 in 2.8 s` for a crossing with an ETA at its first gate, else ``."""
    if not event.eta:
        return ""
    gate, at_ms = event.eta[0]
    return f"-> {gate} in {(at_ms - event.at_ms) / 1000:.1f} s"


def crossing_line(event: ObjectEvent) -> str:
    """One crossing as `--verbose` prints it when it arrives."""
    speed = f"  {event.speed_mm_s:.0f} mm/s" if event.speed_mm_s is not None else ""
    arrival = f"  {gate_arrival(event)}" if event.eta else ""
    return (
        f"{event.camera}  #{event.track} {event.label} crossed {event.line} {event.direction}"
        f" (count {event.count}){speed}{arrival}"
    )


@dataclass
class CameraParts:
    """One camera's counting lines, belt speed and last crossing, from its `crossed` entries."""

    camera: str
    lines: Sequence[str] = ()
    window_s: float = 15.0
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    last: ObjectEvent | None = None
    crossings: int = 0
    _speeds: deque[tuple[float, float]] = field(default_factory=deque)

    def add(self, event: ObjectEvent) -> None:
        """An objects-stream event of this camera; only `crossed` ones count."""
        if event.event != "crossed" or event.line is None or event.direction is None or event.count is None:
            return
        self.counts[(event.line, event.direction)] = event.count
        self.crossings += 1
        self.last = event
        if event.speed_mm_s is not None and event.direction == "in":
            self._speeds.append((event.at_ms / 1000, event.speed_mm_s))

    def belt_mm_s(self, now_s: float) -> float | None:
        """Median speed of the `in` crossings of the last `window_s` seconds (capture clock)."""
        while self._speeds and self._speeds[0][0] < now_s - self.window_s:
            self._speeds.popleft()
        return statistics.median(s for _, s in self._speeds) if self._speeds else None

    def text(self, now_s: float) -> str:
        lines = list(self.lines) or sorted({line for line, _ in self.counts})
        parts = [line_counts(line, self.counts) for line in lines]
        belt = self.belt_mm_s(now_s)
        parts.append("belt    - mm/s" if belt is None else f"belt {belt:4.0f} mm/s")
        if self.last is not None:
            parts.append(f"last {self.last.label} {gate_arrival(self.last)}".rstrip())
        return "  ".join(parts)
