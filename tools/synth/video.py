"""H.264 conveyor clips with per-frame ground truth, rendered from the scenes of ``tools.synth.scene``.

``render_video`` moves a belt and its parts through the frame and writes the MP4 and the GT JSON;
``h264_writer`` is the H.264 writer it uses (also used directly by the tests' fast pattern clips).
The CLI is ``python -m tools.synth video`` (see ``tools/synth/__init__.py``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from tools.synth.belt import lighting, make_belt
from tools.synth.parts import MIN_VISIBLE, NAMES, place_parts
from tools.synth.scene import camera_effects, composite


# --------------------------------------------------------------------------------------------- video
def _bits(rate: str) -> int:
    """ "1M" -> 1000000, "800k" -> 800000, "1500000" -> 1500000."""
    scale = {"k": 1_000, "m": 1_000_000}.get(rate[-1].lower(), 1)
    return int(float(rate[:-1] if scale > 1 else rate) * scale)


@contextmanager
def h264_writer(
    path: Path,
    width: int,
    height: int,
    fps: int,
    *,
    crf: int = 20,
    preset: str = "veryfast",
    maxrate: str | None = None,
) -> Iterator[Callable[[np.ndarray], None]]:
    """Yield `write(rgb_frame)` appending frames to an H.264 MP4 made for live replay:
    constant frame rate, no B-frames (decode order = display order), a keyframe every second.
    `maxrate` (e.g. "1M") caps the bit rate as an IP camera's encoder does (VBV buffer of 2 s)."""
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height = width, height
        stream.pix_fmt = "yuv420p"
        stream.time_base = Fraction(1, fps)
        stream.codec_context.gop_size = fps
        stream.options = {"bf": "0", "g": str(fps), "crf": str(crf), "preset": preset}
        if maxrate:
            rate = _bits(maxrate)
            stream.options |= {"maxrate": str(rate), "bufsize": str(2 * rate)}
        count = 0

        def write(rgb: np.ndarray) -> None:
            nonlocal count
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            frame.pts = count
            count += 1
            for packet in stream.encode(frame):
                container.mux(packet)

        yield write
        for packet in stream.encode():
            container.mux(packet)


def render_video(
    out_mp4: Path,
    gt_json: Path,
    width: int,
    height: int,
    fps: int,
    seconds: float,
    seed: int,
    maxrate: str | None = None,
) -> None:
    """Render a conveyor clip: belt moving right at constant speed, parts enter and leave the frame.

    Writes an H.264 MP4 (libx264, yuv420p, no B-frames, GOP = fps, crf 20, bit rate capped at
    ``maxrate`` if given) to ``out_mp4`` and the GT JSON
    ``{"width", "height", "fps", "frames", "names", "annotations": {"<i>": [{"cls", "label", "box"}]}}``
    (boxes xyxy in camera pixels, keys = decoded frame index) to ``gt_json``.
    """
    out_mp4, gt_json = Path(out_mp4), Path(gt_json)
    rng = np.random.default_rng([seed, 11])
    n_frames = max(1, round(seconds * fps))
    ref = float(max(width, height))
    period = 2 * width
    belt = make_belt(rng, period, height, ref)
    speed = width * rng.uniform(0.2, 0.4)  # px / s
    travel = speed * n_frames / fps
    # parts in belt coordinates at t=0; x_frame(t) = x0 + speed * t
    span_lo, span_hi = -travel - 0.25 * ref, width + 0.25 * ref
    dens = rng.uniform(0.12, 0.25)
    mean_len = ref * 0.12
    count = int(rng.poisson(dens * (span_hi - span_lo) * height / (mean_len * mean_len)))
    parts = place_parts(rng, int(span_hi - span_lo), height, ref, count, x_range=(span_lo, span_hi))
    light = lighting(rng, width, height)
    a = rng.uniform(0, 2 * np.pi)
    shadow = (math.cos(a), math.sin(a), rng.uniform(0.25, 0.6))
    base_x = [p.cx for p in parts]

    annotations: dict[str, list[dict]] = {}
    out_mp4.parent.mkdir(parents=True, exist_ok=True)
    with h264_writer(out_mp4, width, height, fps, crf=20, preset="veryfast", maxrate=maxrate) as write:
        for i in range(n_frames):
            frng = np.random.default_rng([seed, 13, i])
            shift = speed * i / fps
            cols = (np.arange(width) - math.floor(shift)) % period
            img = belt[:, cols].copy()
            visible = []
            for p, bx in zip(parts, base_x, strict=True):
                p.cx = bx + shift
                if -p.length < p.cx < width + p.length:
                    visible.append(p)
            recs = composite(img, visible, frng, shadow=shadow)
            img *= light
            frame_u8 = camera_effects(frng, img, jpeg=False)
            annotations[str(i)] = [
                {"cls": r["cls"], "label": NAMES[r["cls"]], "box": r["box"]}
                for r in recs
                if r["box"] is not None and r["visible"] >= MIN_VISIBLE
            ]
            write(frame_u8)
    gt = {"width": width, "height": height, "fps": fps, "frames": n_frames, "names": NAMES, "annotations": annotations}
    gt_json.parent.mkdir(parents=True, exist_ok=True)
    gt_json.write_text(json.dumps(gt))
