"""What `tools/demo.py` shows: per-camera figures over the last few seconds of stream entries.

`CameraWindow` keeps the entries of one camera's stream seen in the last `window_s` seconds
(by their `published_ms`) and summarises them: frames per second, the latency from decode to
publish (p50/p99), detections per frame and the most frequent labels; the line also carries the
camera's parts (`tools.demo.parts`: ` in <N> out <M>` per counting line, belt speed, last crossing),
right after the frame rate so that a narrow terminal still shows them. `StatusBoard` draws one
line per camera: refreshed in place on a terminal, printed every few seconds otherwise.
"""

from __future__ import annotations

import shutil
import sys
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, TextIO

from tools.kit.stats import percentile


@dataclass(frozen=True, slots=True)
class Sample:
    published_s: float
    latency_ms: int
    n: int
    labels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Summary:
    camera: str
    state: str
    fps: float
    p50_ms: float | None
    p99_ms: float | None
    dets_per_frame: float
    top_labels: tuple[tuple[str, int], ...]
    total: int
    with_detections: int
    model: str
    parts: str = ""

    def line(self) -> str:
        lat = "lat    -" if self.p50_ms is None else f"lat p50 {self.p50_ms:4.0f} ms p99 {self.p99_ms:4.0f} ms"
        labels = " ".join(f"{label}:{count}" for label, count in self.top_labels) or "-"
        parts = f"{self.parts}  " if self.parts else ""
        return (
            f"{self.camera:<14} {self.state:<9} {self.fps:5.1f} fps  {parts}{lat}  "
            f"{self.dets_per_frame:4.1f} det/frame  model {self.model:<4}  {labels}"
        )


@dataclass
class CameraWindow:
    camera: str
    window_s: float = 5.0
    samples: deque[Sample] = field(default_factory=deque)
    total: int = 0
    with_detections: int = 0
    first_s: float | None = None
    model: str = "-"

    def add(self, entry: dict[str, Any]) -> None:
        """A decoded schema-v1 entry (`daemon.publish.schema.decode_entry`)."""
        published_s = entry["published_ms"] / 1000
        labels = tuple(str(d["label"]) for d in entry["dets"])
        self.samples.append(Sample(published_s, entry["published_ms"] - entry["captured_ms"], entry["n"], labels))
        self.total += 1
        self.with_detections += entry["n"] > 0
        self.model = str(entry["model_size"])
        if self.first_s is None:
            self.first_s = published_s

    def summary(self, now_s: float, state: str, parts: str = "") -> Summary:
        while self.samples and self.samples[0].published_s < now_s - self.window_s:
            self.samples.popleft()
        recent = list(self.samples)
        span = self.window_s if self.first_s is None else min(self.window_s, max(now_s - self.first_s, 1e-3))
        latencies = [s.latency_ms for s in recent]
        labels = Counter(label for s in recent for label in s.labels)
        return Summary(
            camera=self.camera,
            state=state,
            fps=len(recent) / span if recent else 0.0,
            p50_ms=percentile(latencies, 50) if latencies else None,
            p99_ms=percentile(latencies, 99) if latencies else None,
            dets_per_frame=sum(s.n for s in recent) / len(recent) if recent else 0.0,
            top_labels=tuple(labels.most_common(3)),
            total=self.total,
            with_detections=self.with_detections,
            model=self.model,
            parts=parts,
        )


class StatusBoard:
    """One line per camera. On a terminal the block is redrawn in place (ANSI cursor-up); into
    a file or pipe a block of summary lines is printed every `every_s` seconds instead."""

    def __init__(self, out: TextIO = sys.stdout, *, every_s: float = 5.0, tty: bool | None = None) -> None:
        self.out = out
        self.tty = out.isatty() if tty is None else tty
        self.every_s = every_s
        self._drawn = 0
        self._last_s: float | None = None

    def due(self, now_s: float) -> bool:
        """On a terminal at once and then twice a second; elsewhere every `every_s` from the first call
        (a block of zeros right after READY says nothing)."""
        if self._last_s is None:
            if self.tty:
                return True
            self._last_s = now_s
            return False
        return now_s - self._last_s >= (0.5 if self.tty else self.every_s)

    def draw(self, now_s: float, summaries: list[Summary]) -> None:
        self._last_s = now_s
        lines = [s.line() for s in summaries]
        if self.tty:
            width = shutil.get_terminal_size().columns - 1  # a wrapped line would break the cursor-up
            lines = [line[:width] for line in lines]
            if self._drawn:
                self.out.write(f"\x1b[{self._drawn}F")
            self.out.write("".join(f"\x1b[2K{line}\n" for line in lines))
            self._drawn = len(lines)
        else:
            self.out.write("".join(f"demo: {line}\n" for line in lines))
        self.out.flush()

    def forget(self) -> None:
        """Something else was printed below the block: the next draw starts a new block."""
        self._drawn = 0
