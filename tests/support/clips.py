"""Test clips: sized for the daemon's cheapest lane, and rendered scenes as decoded frames."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import av

from tests.support.fixtures_rtsp import Clip
from tools.kit.synth.scene import render_image
from tools.kit.synth.video import h264_writer


def small_clip(clip_factory: Callable[..., Clip], seconds: float = 3.0, seed: int = 0) -> Clip:
    """320x240 routes to the 416 model: the cheapest lane, so timing holds on 2 busy cores."""
    return clip_factory(320, 240, fps=10, seconds=seconds, seed=seed, synthetic=False)


def scene_frames(path: Path, seeds: Sequence[int], *, crf: int = 16) -> list[av.VideoFrame]:
    """Rendered conveyor scenes (960x540, one per seed) through real H.264 at `path`, decoded back."""
    with h264_writer(path, 960, 540, 10, crf=crf, preset="veryfast") as write:
        for seed in seeds:
            write(render_image(seed, 960, 540)[0])
    with av.open(str(path)) as container:
        return list(container.decode(video=0))
