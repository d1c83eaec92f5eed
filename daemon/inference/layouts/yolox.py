"""YOLOX: `[N, A, 5 + C]` with one anchor per cell, either the raw head (`raw-head`: xy = (out +
grid) x stride, wh = exp(out) x stride, the grid without the half-cell offset, as YOLOX's
`demo_postprocess`) or already decoded (`decoded`); score = objectness x class score. A probe
run tells the two apart. YOLOX's demo feeds BGR pixels unscaled, padded at the top-left, maps
boxes back divided by the ratio, and runs one NMS across classes with areas + 1 pixel."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from daemon.core.model_spec import Padding
from daemon.core.xp import ArrayModule
from daemon.inference.layouts.base import (
    MAX_LOG_WH,
    BoxMapping,
    Candidates,
    Claim,
    Decode,
    Found,
    LayoutFamily,
    ModelLayout,
    OutputInfo,
    anchor_grid,
)
from daemon.inference.layouts.dense import candidates, origin, rows_last_mismatch, split_classes

BOX = 5
"""Values before the class scores: cx, cy, w, h, objectness."""
GRID_CORRELATION = 0.8
"""A decoded output's x column follows the anchor grid (corr ~1); a raw head's does not."""


class Yolox(LayoutFamily):
    name = "yolox"
    class_agnostic_nms = True
    iou_plus_one = True
    color = "bgr"
    scale = 1.0
    padding = "top-left"
    convention_origin = "YOLOX demo defaults"

    def claim(self, main: OutputInfo, found: Found) -> Claim | None:
        shape, names = main.shape, found.names
        if len(shape) != 3 or shape[1] != found.anchors or shape[2] <= BOX - 1 or not found.allows(self.name):
            return None
        if found.override == self.name or (names is not None and shape[2] == BOX + names):
            return Claim.SHAPE
        # the same shape as YOLOv8's transpose: labels that fit no objectness, or Ultralytics metadata, say v8
        no_objectness = names is not None and shape[2] == BOX - 1 + names
        return None if no_objectness or found.ultralytics else Claim.SHAPE

    def recognise(self, main: OutputInfo, found: Found, probe: Any | None) -> ModelLayout:
        shape, what = main.shape, f"output '{main.name}' {list(main.shape)}"
        classes, extra, note = split_classes(shape[2] - BOX, found, what)
        corr = grid_correlation(probe, found.size, found.strides) if probe is not None else 0.0
        form = "decoded" if corr >= GRID_CORRELATION else "raw-head"
        follows = "follows" if form == "decoded" else "does not follow"
        why = (
            f"{what}: one anchor per cell ({found.grid}) by 5 + {shape[2] - BOX} values (objectness), "
            f"{origin(found)}; column x {follows} the anchor grid (correlation {corr:.2f}): {form}{note}"
        )
        return ModelLayout(self.name, form, (main.name,), classes, found.anchors, found.size, found.strides, extra, why)

    def expected(self, anchors: int) -> tuple[str, ...]:
        return (f"[N, {anchors}, 5 + C] (yolox)",)

    def boxes(self, padding: Padding) -> BoxMapping:
        return "ratio" if padding == "top-left" else "content"

    def mismatch(self, layout: ModelLayout, shape: tuple[int, ...], batch: int) -> str:
        return rows_last_mismatch(layout.rows, BOX + layout.num_classes + layout.extra, shape, batch)

    def decode(self, xp: ArrayModule, output: Any, layout: ModelLayout, how: Decode) -> Candidates:
        out = output[: how.images]
        scores = out[:, :, BOX : BOX + layout.num_classes] * out[:, :, 4:5]

        def cxcywh(img: Any, anchor: Any) -> Any:
            raw = out[img, anchor, :4].astype(xp.float32, copy=False)
            if layout.form != "raw-head":
                return raw
            cells, steps = anchor_grid(xp, layout.size, layout.strides)
            stride = steps[anchor][:, None]
            xy = (raw[:, :2] + cells[anchor]) * stride
            wh = xp.exp(xp.minimum(raw[:, 2:4], MAX_LOG_WH)) * stride
            return xp.concatenate((xy, wh), axis=1)

        return candidates(xp, scores, 2, cxcywh, how)


def grid_correlation(probe: npt.NDArray[Any], size: int, strides: tuple[int, ...]) -> float:
    """How closely a probe run's x column follows the anchor centres (a decoded output: about 1)."""
    cells, steps = anchor_grid(np, size, strides)
    centre_x = (cells[:, 0] + 0.5) * steps
    x = probe[0, :, 0].astype(np.float64)
    if not np.all(np.isfinite(x)) or float(x.std()) == 0.0:
        return 0.0
    return float(np.corrcoef(x, centre_x)[0, 1])
