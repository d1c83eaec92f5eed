"""YOLOv8 (Ultralytics 8.x, 11; YOLOv9 and YOLOv12 exports alike): `[N, 4 + C (+ M), A]` (form
`channels-first`) or its transpose `[N, A, 4 + C (+ M)]` (`anchors-first`): cx, cy, w, h, then C class
scores, no objectness; M trailing mask coefficients (segment) or keypoints (pose) are ignored.
A = sum((S / s)^2) over the strides s. Ultralytics' input: RGB, pixel / 255, centred padding."""

from __future__ import annotations

from typing import Any

from daemon.core.xp import ArrayModule
from daemon.inference.layouts.base import (
    Candidates,
    Claim,
    Decode,
    Found,
    LayoutFamily,
    ModelLayout,
    OutputInfo,
    expected_anchors,
)
from daemon.inference.layouts.dense import candidates, origin, split_classes

BOX = 4
"""Values before the class scores: cx, cy, w, h."""


class YoloV8(LayoutFamily):
    name = "yolov8"

    def claim(self, main: OutputInfo, found: Found) -> Claim | None:
        if len(main.shape) != 3:
            return None
        rows, cols = main.shape[1], main.shape[2]
        if cols == found.anchors and rows > BOX and found.allows(self.name):
            return Claim.SHAPE
        if rows != found.anchors or cols <= BOX or not found.allows(self.name):
            return None
        if found.override == self.name or (found.names is not None and cols == BOX + found.names):
            return Claim.SHAPE
        # the same shape as a YOLOX head: labels that fit objectness say YOLOX, else Ultralytics metadata says v8
        objectness = found.names is not None and cols == BOX + 1 + found.names
        return Claim.SHAPE if found.ultralytics and not objectness else None

    def recognise(self, main: OutputInfo, found: Found, probe: Any | None) -> ModelLayout:
        shape, what, anchors = main.shape, f"output '{main.name}' {list(main.shape)}", found.anchors
        if shape[2] == anchors:
            classes, extra, note = split_classes(shape[1] - BOX, found, what)
            why = f"{what}: 4 + {shape[1] - BOX} values by {anchors} anchors ({found.grid}), {origin(found)}{note}"
            form = "channels-first"
        else:
            classes, extra, note = split_classes(shape[2] - BOX, found, what)
            why = (
                f"{what}: {anchors} anchors ({found.grid}) by 4 + {shape[2] - BOX} values, no objectness, "
                f"{origin(found)}{note}"
            )
            form = "anchors-first"
        return ModelLayout(self.name, form, (main.name,), classes, anchors, found.size, found.strides, extra, why)

    def expected(self, anchors: int) -> tuple[str, ...]:
        return f"[N, 4 + C, {anchors}] (yolov8)", f"[N, {anchors}, 4 + C] (yolov8 transposed)"

    def output_shape(self, layout: ModelLayout, batch: int) -> tuple[int, ...]:
        width = BOX + layout.num_classes + layout.extra  # trailing mask or keypoint values included
        return (batch, width, layout.rows) if layout.form == "channels-first" else (batch, layout.rows, width)

    def mismatch(self, layout: ModelLayout, shape: tuple[int, ...], batch: int) -> str:
        expected = self.output_shape(layout, batch)
        return "" if shape == expected else f"expected {list(expected)}"

    def decode(self, xp: ArrayModule, output: Any, layout: ModelLayout, how: Decode) -> Candidates:
        out, c = output[: how.images], layout.num_classes
        if layout.form == "channels-first":
            return candidates(
                xp, out[:, BOX : BOX + c, :], 1, lambda i, a: out[i, :BOX, a].astype(xp.float32, copy=False), how
            )
        return candidates(
            xp, out[:, :, BOX : BOX + c], 2, lambda i, a: out[i, a, :BOX].astype(xp.float32, copy=False), how
        )


def yolov8_layout(size: int, num_classes: int, strides: tuple[int, ...] = (8, 16, 32)) -> ModelLayout:
    """The demo models' layout (`[N, 4 + C, A]`, output `output0`)."""
    anchors = expected_anchors(size, strides)
    return ModelLayout("yolov8", "channels-first", ("output0",), num_classes, anchors, size, strides, 0, "default")


def bare_layout(output: Any) -> ModelLayout:
    """The YOLOv8 layout of a bare `[B, 4 + C, A]` output (for tests and tools holding only an
    output); ValueError for any other shape."""
    if output.ndim != 3 or output.shape[1] < BOX + 1:
        raise ValueError(f"expected output [B, 4 + C, A], got shape {tuple(output.shape)}")
    rows, anchors = int(output.shape[1]), int(output.shape[2])
    return ModelLayout("yolov8", "channels-first", ("output0",), rows - BOX, anchors, 0, (), 0, "default")
