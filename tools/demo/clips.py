"""The demo's cameras and their clips: one synthetic conveyor per model size, rendered once into the
data directory (a clip is written under a temporary name and renamed when complete, so Ctrl-C leaves
no half clip), each with its ground truth beside it (`<clip>.json`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

# camera id -> (width, height, fps, seed): one camera per model size.
CAMERAS = {
    "line1-infeed": (1280, 720, 10, 101),
    "line1-sorter": (640, 480, 10, 202),
    "line2-reject": (480, 360, 10, 303),
}
CLIP_SECONDS = 12


def render_clips(data: Path, say: Callable[[str], None]) -> dict[str, Path]:
    """camera id -> its clip, rendered where missing."""
    from tools.kit.synth.video import render_cached  # noqa: PLC0415 - Pillow and x264 only when rendering

    return {
        cam: render_cached(data / f"{cam}-{w}x{h}.mp4", w, h, fps, CLIP_SECONDS, seed, say=say)
        for cam, (w, h, fps, seed) in CAMERAS.items()
    }


__all__ = ["CAMERAS", "CLIP_SECONDS", "render_clips"]
