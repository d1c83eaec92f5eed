"""What both sides of the third-party export check share (`tools/checks/exports.py` in the project's
venv, `tools/checks/exports_ecosystem.py` in the ecosystem venv): the manifest's file name and the
rendered frames every step runs (their sizes and seed)."""

from __future__ import annotations

import functools

import numpy as np

FRAME_SIZES = ((640, 480), (1280, 720), (1000, 562))
"""The last one letterboxes to a content height that is not a whole number of pixels."""
SEED = 1_700_000
MANIFEST = "exports.json"


@functools.cache
def rendered_frames() -> list[np.ndarray]:
    """The frames every model of the check sees, one per `FRAME_SIZES`, rendered by `tools/kit/synth/`."""
    from tools.kit.synth.scene import render_scene  # noqa: PLC0415  (PIL only when frames are needed)

    return [render_scene(SEED + i, w, h)[0] for i, (w, h) in enumerate(FRAME_SIZES)]
