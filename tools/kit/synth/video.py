"""H.264 conveyor clips with per-frame ground truth, rendered from the scenes of ``tools.kit.synth.scene``.

``render_video`` moves a belt and its parts through the frame and writes the MP4 and the GT JSON;
``h264_writer`` is the H.264 writer it uses (also used directly by the tests' fast pattern clips);
``render_cached`` is the one way a tool gets a clip: rendered where missing, under partial names renamed
when complete, so an interrupted render leaves no half clip.
The CLI is ``python -m tools.synth video`` (tools/synth/__main__.py; options in ``tools/kit/synth/__init__.py``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
from av.video.stream import VideoStream

from tools.kit.synth.belt import lighting, make_belt
from tools.kit.synth.parts import MIN_VISIBLE, NAMES, Part, place_parts
from tools.kit.synth.scene import camera_effects, composite


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
    codec: str = "libx264",
) -> Iterator[Callable[[np.ndarray], None]]:
    """Yield `write(rgb_frame)` appending frames to an H.264 MP4 made for live replay:
    constant frame rate, no B-frames (decode order = display order), a keyframe every second.
    `maxrate` (e.g. "1M") caps the bit rate as an IP camera's encoder does (VBV buffer of 2 s).
    `codec="libx265"` makes the same shape of clip in H.265 (tagged `hvc1`)."""
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream(codec, rate=fps)
        assert isinstance(stream, VideoStream)
        stream.width, stream.height = width, height
        stream.pix_fmt = "yuv420p"
        stream.time_base = Fraction(1, fps)
        stream.codec_context.gop_size = fps
        stream.options = {"bf": "0", "g": str(fps), "crf": str(crf), "preset": preset}
        if codec == "libx265":
            stream.codec_tag = "hvc1"
            stream.options |= {"x265-params": f"keyint={fps}:min-keyint={fps}:bframes=0:log-level=error"}
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


def reencode(src: Path, dst: Path, *, codec: str = "libx265", crf: int = 23) -> None:
    """`src` (any MP4 PyAV decodes) re-encoded by `h264_writer` with `codec` at its frame rate: the same
    scene as an H.265 camera would send it (`codec="libx265"`), for the clips' and decoders' tests."""
    with av.open(str(src)) as inp:
        video = inp.streams.video[0]
        fps = round(float(video.average_rate or 10))
        with h264_writer(dst, video.width, video.height, fps, crf=crf, preset="ultrafast", codec=codec) as write:
            for frame in inp.decode(video):
                write(frame.to_ndarray(format="rgb24"))


RAMP_S = 0.3  # a stopping or starting belt changes speed linearly over this long


def belt_shift(times_s: np.ndarray, speed_px_s: float, stops: Sequence[tuple[float, float]] = ()) -> np.ndarray:
    """Belt travel (px) at each time: ``speed_px_s`` except during ``stops`` ((start_s, duration_s) each), where
    the belt slows down linearly over ``RAMP_S`` from ``start_s``, stands, and speeds up again over ``RAMP_S``
    so that it runs at full speed from ``start_s + duration_s`` on. Without stops: exactly ``speed * t``."""
    t = np.asarray(times_s, dtype=np.float64)
    if not stops:
        return speed_px_s * t
    lost = np.zeros_like(t)  # travel lost to the stops, relative to running at full speed
    for start, duration in stops:
        ramp = min(RAMP_S, duration / 2)
        # speed factor 1 - f(t): f ramps 0 -> 1 over [start, start+ramp], 1 until end-ramp, 1 -> 0 until end
        end = start + duration
        knots = np.array([start, start + ramp, end - ramp, end])
        # integral of f from -inf to t, piecewise: quadratic on ramps, linear in between
        a = np.clip(t - knots[0], 0, ramp)
        lost += a * a / (2 * ramp) if ramp > 0 else 0.0
        lost += np.clip(t - knots[1], 0, knots[2] - knots[1])
        b = np.clip(t - knots[2], 0, ramp)
        lost += b - b * b / (2 * ramp) if ramp > 0 else 0.0
    return speed_px_s * (t - lost)


def render_video(
    out_mp4: Path,
    gt_json: Path,
    width: int,
    height: int,
    fps: int,
    seconds: float,
    seed: int,
    maxrate: str | None = None,
    *,
    speed_px_s: float | None = None,
    density: float | None = None,
    stops: Sequence[tuple[float, float]] = (),
) -> None:
    """Render a conveyor clip: belt moving right, parts enter and leave the frame.

    Writes an H.264 MP4 (libx264, yuv420p, no B-frames, GOP = fps, crf 20, bit rate capped at
    ``maxrate`` if given) to ``out_mp4`` and the GT JSON
    ``{"width", "height", "fps", "frames", "names", "annotations": {"<i>": [{"cls", "label", "box", "id"}]},
    "ignore": {"<i>": [{"cls", "box", "id", "visible"}]}, "parts": [{"id", "cls", "x0", "cy"}],
    "belt": {"speed_px_s", "stops", "shift_px"}}``
    (boxes xyxy in camera pixels, keys = decoded frame index; ``id`` is the part's index in ``parts``, the same
    in every frame; a part's centre is at ``x0 + shift_px[i]``, ``cy`` in frame ``i``) to ``gt_json``.
    ``annotations`` hold the parts at least ``MIN_VISIBLE`` visible; ``ignore`` the parts in view but less
    visible than that (cut by the frame edge or covered by other parts), with their visible fraction: what
    a detector may or may not find, neither required nor wrong (MOTChallenge's "ignore", KITTI's DontCare).

    Speed (px/s) and density (parts area per belt area, about) are random by seed unless given; ``stops``
    ((start_s, duration_s) each) halt the belt (see :func:`belt_shift`): parts keep their place while it stands.
    Without these keywords the clip is the same as before they existed (same seed, same frames).
    """
    out_mp4, gt_json = Path(out_mp4), Path(gt_json)
    n_frames = max(1, round(seconds * fps))
    sc = make_scene(seed, width, height, fps, n_frames, speed_px_s, density, stops)
    annotations: dict[str, list[dict[str, Any]]] = {}
    ignore: dict[str, list[dict[str, Any]]] = {}
    out_mp4.parent.mkdir(parents=True, exist_ok=True)
    with h264_writer(out_mp4, width, height, fps, crf=20, preset="veryfast", maxrate=maxrate) as write:
        for i in range(n_frames):
            frng = np.random.default_rng([seed, 13, i])
            cols = (np.arange(width) - math.floor(sc.shifts[i])) % sc.period
            img = sc.belt[:, cols].copy()
            visible, ids = [], []
            for k, (p, bx) in enumerate(zip(sc.parts, sc.base_x, strict=True)):
                p.cx = bx + sc.shifts[i]
                if -p.length < p.cx < width + p.length:
                    visible.append(p)
                    ids.append(k)
            recs = composite(img, visible, frng, shadow=sc.shadow)
            img *= sc.light
            write(camera_effects(frng, img, jpeg=False))
            annotations[str(i)], ignore[str(i)] = frame_labels(recs, ids)
    gt = ground_truth(width, height, fps, n_frames, sc, annotations, ignore)
    gt_json.parent.mkdir(parents=True, exist_ok=True)
    gt_json.write_text(json.dumps(gt))


@dataclass(frozen=True, slots=True)
class Scene:
    """A clip's belt and parts: the belt texture (one `period` of it), its speed, stops and shift per
    frame (px), the parts (in belt coordinates, `base_x` their centres at t=0), lighting and shadow."""

    belt: np.ndarray
    period: int
    speed: float
    stops: list[tuple[float, float]]
    shifts: list[float]
    parts: list[Part]
    base_x: list[float]
    light: np.ndarray
    shadow: tuple[float, float, float]


def render_cached(clip: Path, *args: Any, say: Callable[[str], None] | None = None, **scene: Any) -> Path:
    """`clip` and its GT JSON beside it (`clip` with `.json`) unless both exist, by ``render_video``
    (`args` and `scene`: its arguments after the paths) under partial names renamed when complete, GT
    first. `say` hears what is rendered."""
    gt = clip.with_suffix(".json")
    if clip.exists() and gt.exists():
        return clip
    if say is not None:
        say(f"rendering {clip.name} ({args[0]}x{args[1]}, {args[2]} fps, {args[3]:g} s)")
    clip.parent.mkdir(parents=True, exist_ok=True)
    partial, partial_gt = clip.with_suffix(".partial.mp4"), clip.with_suffix(".partial.json")
    try:
        render_video(partial, partial_gt, *args, **scene)
        os.replace(partial_gt, gt)
        os.replace(partial, clip)
    finally:
        partial.unlink(missing_ok=True)
        partial_gt.unlink(missing_ok=True)
    return clip


def make_scene(
    seed: int,
    width: int,
    height: int,
    fps: int,
    n_frames: int,
    speed_px_s: float | None,
    density: float | None,
    stops: Sequence[tuple[float, float]],
) -> Scene:
    """The scene `render_video` draws, every random draw in the order it has always made them (a seed
    gives the same clip as before)."""
    rng = np.random.default_rng([seed, 11])
    ref = float(max(width, height))
    period = 2 * width
    belt = make_belt(rng, period, height, ref)
    drawn_speed = width * rng.uniform(0.2, 0.4)  # px / s
    speed = drawn_speed if speed_px_s is None else float(speed_px_s)
    halts = [(float(a), float(b)) for a, b in stops]
    travelled = belt_shift(np.arange(n_frames + 1) / fps, speed, halts)
    travel = speed * n_frames / fps if not halts else float(travelled[-1])
    # without stops, the shift is the exact product (the same floats as before stops existed)
    shifts = [speed * i / fps if not halts else float(travelled[i]) for i in range(n_frames)]
    # parts in belt coordinates at t=0; x_frame(t) = x0 + shift(t)
    span_lo, span_hi = -travel - 0.25 * ref, width + 0.25 * ref
    drawn_dens = rng.uniform(0.12, 0.25)
    dens = drawn_dens if density is None else float(density)
    mean_len = ref * 0.12
    count = int(rng.poisson(dens * (span_hi - span_lo) * height / (mean_len * mean_len)))
    parts = place_parts(rng, int(span_hi - span_lo), height, ref, count, x_range=(span_lo, span_hi))
    light = lighting(rng, width, height)
    a = rng.uniform(0, 2 * np.pi)
    shadow = (math.cos(a), math.sin(a), rng.uniform(0.25, 0.6))
    return Scene(belt, period, speed, halts, shifts, parts, [p.cx for p in parts], light, shadow)


def frame_labels(recs: list[dict[str, Any]], ids: list[int]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One frame's ground truth: the parts at least ``MIN_VISIBLE`` visible (annotations), and those
    in view but less visible than that (ignore, with their visible fraction)."""
    annotated = [
        {"cls": r["cls"], "label": NAMES[r["cls"]], "box": r["box"], "id": k}
        for r, k in zip(recs, ids, strict=True)
        if r["box"] is not None and r["visible"] >= MIN_VISIBLE
    ]
    ignored = [
        {"cls": r["cls"], "box": r["box"], "id": k, "visible": round(float(r["visible"]), 3)}
        for r, k in zip(recs, ids, strict=True)
        if r["box"] is not None and r["visible"] < MIN_VISIBLE
    ]
    return annotated, ignored


def ground_truth(
    width: int,
    height: int,
    fps: int,
    n_frames: int,
    sc: Scene,
    annotations: dict[str, list[dict[str, Any]]],
    ignore: dict[str, list[dict[str, Any]]],
) -> dict[str, Any]:
    """The GT JSON's document (its fields in ``render_video``'s docstring)."""
    return {
        "width": width,
        "height": height,
        "fps": fps,
        "frames": n_frames,
        "names": NAMES,
        "annotations": annotations,
        "ignore": ignore,
        "parts": [
            {"id": k, "cls": p.cls, "x0": bx, "cy": p.cy}
            for k, (p, bx) in enumerate(zip(sc.parts, sc.base_x, strict=True))
        ],
        "belt": {"speed_px_s": sc.speed, "stops": [list(s) for s in sc.stops], "shift_px": sc.shifts[:n_frames]},
    }
