"""The demo cameras' calibration (`mm_per_px` in configs/demo.toml), derived from the synthetic scenes.

tools/synth draws every scene to the frame's longer side: parts are 6-20 % of it (mean 12 %,
`tools.kit.synth.parts.SIZE_RANGE`) and the belt runs at 20-40 % of the frame's width per second
(`tools.kit.synth.video.render_video`), whatever the resolution. So one physical fact fixes every
camera's scale: how much belt the longer side shows. The demo takes `BELT_VIEW_MM` = 480 mm (parts
of 29-96 mm, belts at about 100-190 mm/s): each camera's `mm_per_px` is 480 mm over its longer side.
"""

from __future__ import annotations

BELT_VIEW_MM = 480.0
"""Belt length along the frame's longer side, the same for every demo camera."""


def mm_per_px(width: int, height: int) -> float:
    """The calibration of a demo camera of this frame size."""
    return BELT_VIEW_MM / max(width, height)
