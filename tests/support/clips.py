"""Test clips sized for the daemon's cheapest lane."""

from __future__ import annotations

from collections.abc import Callable

from tests.support.fixtures_rtsp import Clip


def small_clip(clip_factory: Callable[..., Clip], seconds: float = 3.0, seed: int = 0) -> Clip:
    """320x240 routes to the 416 model: the cheapest lane, so timing holds on 2 busy cores."""
    return clip_factory(320, 240, fps=10, seconds=seconds, seed=seed, synthetic=False)
