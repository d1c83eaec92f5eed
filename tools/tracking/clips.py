"""The tracking evaluation's clips: rendered once per parameter set (cached, deterministic by seed), and
their decimated copies (every ``step``-th frame at ``fps / step``: two thirds of the frames gone for 3)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import av

from tools.kit.synth.video import h264_writer, render_cached

WIDTH, HEIGHT = 640, 480


@dataclass(frozen=True)
class Scenario:
    name: str
    speed: float  # belt speed, fraction of the frame width per second
    density: float
    seconds: float
    seed: int
    fps: int = 15
    stops: tuple[tuple[float, float], ...] = field(default_factory=tuple)

    def key(self) -> str:
        text = json.dumps([asdict(self), WIDTH, HEIGHT, 2], sort_keys=True)
        return f"{self.name}-{hashlib.sha1(text.encode()).hexdigest()[:10]}"


def render(sc: Scenario, cache: Path) -> tuple[Path, Path]:
    """The scenario's MP4 and GT JSON under ``cache`` (rendered if not there yet)."""
    mp4 = render_cached(
        cache / f"{sc.key()}.mp4",
        *(WIDTH, HEIGHT, sc.fps, sc.seconds, sc.seed),
        speed_px_s=sc.speed * WIDTH,
        density=sc.density,
        stops=sc.stops,
    )
    return mp4, mp4.with_suffix(".json")


def decimate(mp4: Path, step: int) -> Path:
    """``mp4`` with only every ``step``-th frame (0, step, 2 step, ...), at ``fps / step`` (re-encoded)."""
    out = mp4.with_name(f"{mp4.stem}-every{step}.mp4")
    if out.exists():
        return out
    tmp = out.with_suffix(".tmp.mp4")
    with av.open(str(mp4)) as src:
        stream = src.streams.video[0]
        fps = round(float(stream.average_rate or 15))
        frames = [f.to_ndarray(format="rgb24") for k, f in enumerate(src.decode(stream)) if k % step == 0]
    h, w = frames[0].shape[:2]
    with h264_writer(tmp, w, h, max(1, fps // step)) as write:
        for frame in frames:
            write(frame)
    tmp.rename(out)
    return out


def load_gt(path: Path) -> dict[str, Any]:
    gt: dict[str, Any] = json.loads(path.read_text())
    return gt
