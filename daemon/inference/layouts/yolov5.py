"""YOLOv5 (YOLOv7's plain export too): `[N, 3A, 5 + C (+ M)]`, three anchors per cell, already
decoded: cx, cy, w, h, objectness, C class scores; score = objectness x class score. Its input is
Ultralytics': RGB, pixel / 255, centred padding; its `scale_boxes` maps boxes back less the
fractional centred padding, divided by the ratio."""

from __future__ import annotations

from typing import Any

from daemon.core.model_spec import Padding
from daemon.core.xp import ArrayModule
from daemon.inference.layouts.base import (
    BoxMapping,
    Candidates,
    Claim,
    Decode,
    Found,
    LayoutError,
    LayoutFamily,
    ModelLayout,
    OutputInfo,
)
from daemon.inference.layouts.dense import candidates, origin, rows_last_mismatch, split_classes

BOX = 5
"""Values before the class scores: cx, cy, w, h, objectness."""
PER_CELL = 3


class YoloV5(LayoutFamily):
    name = "yolov5"

    def claim(self, main: OutputInfo, found: Found) -> Claim | None:
        if found.override == self.name:
            return Claim.SIGNATURE  # and a shape that does not fit is refused by `recognise`, saying why
        fits = len(main.shape) == 3 and main.shape[1] == PER_CELL * found.anchors and main.shape[2] > BOX
        return Claim.SIGNATURE if fits and found.override == "auto" else None

    def recognise(self, main: OutputInfo, found: Found, probe: Any | None) -> ModelLayout:
        shape, what, anchors = main.shape, f"output '{main.name}' {list(main.shape)}", found.anchors
        if len(shape) != 3 or shape[1] != PER_CELL * anchors or shape[2] <= BOX:
            raise LayoutError(f"output '{main.name}' {list(shape)}: yolov5 needs [N, {PER_CELL * anchors}, 5 + C]")
        classes, extra, note = split_classes(shape[2] - BOX, found, what)
        values = f"5 + {shape[2] - BOX} values (objectness)"
        why = f"{what}: 3 anchors per cell ({found.grid}) by {values}, {origin(found)}{note}"
        rows = PER_CELL * anchors
        return ModelLayout(self.name, "decoded", (main.name,), classes, rows, found.size, found.strides, extra, why)

    def expected(self, anchors: int) -> tuple[str, ...]:
        return (f"[N, {PER_CELL * anchors}, 5 + C] (yolov5)",)

    def boxes(self, padding: Padding) -> BoxMapping:
        return "ratio-centred" if padding == "symmetric" else "content"

    def mismatch(self, layout: ModelLayout, shape: tuple[int, ...], batch: int) -> str:
        return rows_last_mismatch(layout.rows, BOX + layout.num_classes + layout.extra, shape, batch)

    def decode(self, xp: ArrayModule, output: Any, layout: ModelLayout, how: Decode) -> Candidates:
        out = output[: how.images]
        scores = out[:, :, BOX : BOX + layout.num_classes] * out[:, :, 4:5]
        return candidates(xp, scores, 2, lambda i, a: out[i, a, :4].astype(xp.float32, copy=False), how)
