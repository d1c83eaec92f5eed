"""One live-view snapshot drawn and encoded (`render`, in the live view's own thread): the frame with its
detections' boxes, labels and scores, each counting line with an arrow for its `in` direction and its
running counts (`count_text`), encoded as a JPEG at the frame's letterbox content size (`Snapshot`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from io import BytesIO
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from daemon.config.tracking import LineConfig
from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.core.drawing import BOX_WIDTH, class_colour
from daemon.core.frames import Detection, Frame, FrameResult
from daemon.publish.schema import model_tag

JPEG_QUALITY = 85
LINE_COLOUR = (255, 255, 0)


Counts = Mapping[tuple[str, str], int]
"""Running crossing totals per (line id, "in" | "out")."""


def count_text(line_id: str, counts: Counts) -> str:
    """`<line> in <N> out <M>`: the words tools/demo.py prints for the same line."""
    return f"{line_id} in {counts.get((line_id, 'in'), 0)} out {counts.get((line_id, 'out'), 0)}"


@dataclass(frozen=True, slots=True)
class Latest:
    """A camera's newest (frame, result), with the lines and counts to draw on it."""

    frame: Frame
    result: FrameResult
    lines: tuple[LineConfig, ...] = ()
    counts: Counts | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One encoded view of a frame: the JPEG is at the frame's letterbox content size."""

    camera_id: str
    seq: int
    captured_ms: int
    model: str
    source_w: int
    source_h: int
    image_w: int
    image_h: int
    detections: tuple[Detection, ...]
    jpeg: bytes
    encoded_mono: float

    def describe(self) -> dict[str, Any]:
        return {
            "camera": self.camera_id,
            "seq": self.seq,
            "captured_ms": self.captured_ms,
            "model": self.model,
            "w": self.source_w,
            "h": self.source_h,
            "image_w": self.image_w,
            "image_h": self.image_h,
            "dets": [d.as_json() for d in self.detections],
        }

    def headers(self) -> dict[str, str]:
        return {
            "X-Beltsight-Camera": self.camera_id,
            "X-Beltsight-Seq": str(self.seq),
            "X-Beltsight-Captured-Ms": str(self.captured_ms),
            "X-Beltsight-Model": self.model,
            "Cache-Control": "no-store",
        }


def render(latest: Latest, clock: Clock = SYSTEM_CLOCK) -> Snapshot:
    """Draw the result's boxes, labels and scores on the frame and encode it (off the loop)."""
    frame, result = latest.frame, latest.result
    rgb = np.dstack(frame.planes)  # the only copy, made for this request
    image = Image.fromarray(rgb, "RGB")
    draw = ImageDraw.Draw(image)
    lb = frame.letterbox
    sx, sy = lb.new_w / lb.src_w, lb.new_h / lb.src_h
    boxes = [
        (
            det,
            (
                det.box[0] * sx,
                det.box[1] * sy,
                max(det.box[0] * sx, det.box[2] * sx - 1),
                max(det.box[1] * sy, det.box[3] * sy - 1),
            ),
        )
        for det in result.detections
    ]
    _draw_lines(draw, latest.lines, image.width, image.height, latest.counts or {})
    for det, box in boxes:  # labels first: no label (a longer one with a track id) hides another box
        text = f"{det.label} {det.score:.2f}" if det.track is None else f"#{det.track} {det.label} {det.score:.2f}"
        left, top, right, bottom = draw.textbbox((0, 0), text)
        tx, ty = box[0], max(0.0, box[1] - (bottom - top) - 4)
        draw.rectangle((tx, ty, tx + right - left + 4, ty + bottom - top + 4), fill=class_colour(det.cls))
        draw.text((tx + 2, ty + 2 - top), text, fill=(0, 0, 0))
    for det, box in boxes:
        draw.rectangle(box, outline=class_colour(det.cls), width=BOX_WIDTH)
    out = BytesIO()
    image.save(out, "JPEG", quality=JPEG_QUALITY, subsampling=0)
    return Snapshot(
        camera_id=result.camera_id,
        seq=result.seq,
        captured_ms=result.captured_ms,
        model=model_tag(result.model_size, result.model_name),
        source_w=result.width,
        source_h=result.height,
        image_w=image.width,
        image_h=image.height,
        detections=result.detections,
        jpeg=out.getvalue(),
        encoded_mono=clock.monotonic(),
    )


def _draw_lines(draw: ImageDraw.ImageDraw, lines: tuple[LineConfig, ...], w: int, h: int, counts: Counts) -> None:
    """The camera's counting lines (normalised, so they fit whatever size the image is), with
    an arrow for the `in` direction and beside it the line's id and counts, on a dark ground."""
    for line in lines:
        (x1, y1), (x2, y2) = (line.start[0] * w, line.start[1] * h), (line.end[0] * w, line.end[1] * h)
        draw.line((x1, y1, x2, y2), fill=LINE_COLOUR, width=BOX_WIDTH)
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        dx, dy = line.direction
        norm = max(1e-9, (dx * dx + dy * dy) ** 0.5)
        ax, ay = mx + 24 * dx / norm, my + 24 * dy / norm
        draw.line((mx, my, ax, ay), fill=LINE_COLOUR, width=BOX_WIDTH)
        text = count_text(line.id, counts)
        left, top, right, bottom = draw.textbbox((0, 0), text)
        tx, ty = min(ax + 3, max(0.0, w - (right - left) - 6)), ay + 3
        draw.rectangle((tx, ty, tx + right - left + 4, ty + bottom - top + 4), fill=(0, 0, 0))
        draw.text((tx + 2, ty + 2 - top), text, fill=LINE_COLOUR)
