"""Model layouts and input conventions: what a detector's outputs mean and what its input wants.

A `ModelLayout` (how to read the output; post-processing reads it) is recognised once per file
by `daemon.inference.recognise.recognise` from the graph (output ranks and shapes, anchor counts against the strides, a
probe run, metadata), unless `[models.<size>]` names it (`ModelOverrides`); an `InputConvention`
(how to fill the input; pre-processing reads it) comes from `daemon.inference.model_file`. Both keep
where they came from, which `doctor` and `check-config` print.

Layouts (boxes always in model-input pixels):
- `yolov8`: `[N, 4 + C (+ M), A]` (form `channels-first`) or `[N, A, 4 + C (+ M)]`
  (`anchors-first`): cx, cy, w, h, C class scores, no objectness; M trailing mask
  coefficients (segment) or keypoints (pose) are ignored. A = sum((S / s)^2).
- `yolov5` (v7 too): `[N, 3A, 5 + C]` decoded cx, cy, w, h, objectness, C class scores;
  score = objectness x class score.
- `yolox`: `[N, A, 5 + C]`, the raw head (`raw-head`: xy = (out + grid) x stride,
  wh = exp(out) x stride, grid without the half-cell offset, as YOLOX's `demo_postprocess`)
  or already decoded (`decoded`); score = objectness x class score.
- `end2end`, after NMS in the graph: `[N, K, 6 (+ M)]` rows x1, y1, x2, y2, score, class
  (`rows`, YOLOv10 / Ultralytics `nms=True`); `[N, K, 7]` or `[D, 7]` rows batch, x1, y1,
  x2, y2, class, score (`batch-rows`, YOLOv7's end-to-end export; `batch-class-rows` for an
  output named `batchno_classid_x1y1x2y2_score`); the four outputs num_dets, boxes, scores,
  classes (`four-outputs`, joined into `rows` by `postprocess.join_outputs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from daemon.core.model_spec import Color, Padding
from daemon.core.xp import ArrayModule

LayoutName = Literal["yolov8", "yolov5", "yolox", "end2end"]
LAYOUTS: tuple[str, ...] = ("yolov8", "yolov5", "yolox", "end2end")
InputDtype = Literal["float32", "float16"]
BoxMapping = Literal["content", "ratio", "ratio-centred"]
"""How boxes go back to camera pixels: through the content fed (`content`, Ultralytics 8.x
`scale_boxes`), divided by the letterbox ratio (`ratio`, YOLOX's demo: content at the top-left), or
less YOLOv5's fractional centred padding, then divided by the ratio (`ratio-centred`, its `scale_boxes`)."""
MAX_LOG_WH = 20.0
"""Raw-head exponent cap: exp(20) x stride is far beyond any frame and stays finite."""


class LayoutError(Exception):
    """The outputs are not a detector layout the daemon supports (message says what was found)."""


@dataclass(frozen=True, slots=True)
class InputConvention:
    """How pixels become the model's input: tensor = pixel (0..255, `color` order) x `scale`,
    letterbox content at the centre (`symmetric`) or the top-left, the rest `pad_value`
    (in pixel units, scaled like pixels); `dtype` of the graph's input; `batch` the fixed
    batch size of a static-batch model (None: dynamic)."""

    color: Color = "rgb"
    scale: float = 1.0 / 255.0
    padding: Padding = "symmetric"
    pad_value: int = 114
    dtype: InputDtype = "float32"
    batch: int | None = None
    origin: str = "defaults"
    """Where colour/scale/padding/pad value came from (config, metadata, a layout's default)."""
    boxes: BoxMapping = "content"

    def describe(self) -> str:
        batch = f"static batch {self.batch}" if self.batch is not None else "dynamic batch"
        scale = "1/255" if abs(self.scale - 1 / 255) < 1e-9 else f"{self.scale:g}"
        mapped = {"content": "", "ratio": ", boxes / ratio (YOLOX demo)", "ratio-centred": ", boxes as YOLOv5"}
        return (
            f"{self.color.upper()}, pixel x {scale}, padding {self.padding} with {self.pad_value}, "
            f"{self.dtype}, {batch}{mapped[self.boxes]} ({self.origin})"
        )


@dataclass(frozen=True, slots=True)
class OutputInfo:
    """One graph output as found: name, declared shape (ints or symbols), probed shape, type."""

    name: str
    declared: tuple[int | str | None, ...]
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True, slots=True)
class ModelLayout:
    """How to read a model's output; `reason` says why this layout was recognised."""

    name: LayoutName
    form: str
    outputs: tuple[str, ...]
    num_classes: int
    rows: int
    """Anchors (dense layouts) or the most rows after NMS (end2end; 0 when data-dependent)."""
    size: int
    strides: tuple[int, ...]
    extra: int = 0
    """Trailing channels after the class scores that are not classes (masks, keypoints)."""
    reason: str = ""

    @property
    def nms_in_graph(self) -> bool:
        return self.name == "end2end"

    def describe(self) -> str:
        extra = f", {self.extra} trailing values ignored" if self.extra else ""
        return f"{self.name} ({self.form}), {self.num_classes} classes{extra}: {self.reason}"


def expected_anchors(size: int, strides: Sequence[int]) -> int:
    return sum((size // s) ** 2 for s in strides)


def yolov8_layout(size: int, num_classes: int, strides: tuple[int, ...] = (8, 16, 32)) -> ModelLayout:
    """The demo models' layout (`[N, 4 + C, A]`, output `output0`)."""
    anchors = expected_anchors(size, strides)
    return ModelLayout("yolov8", "channels-first", ("output0",), num_classes, anchors, size, strides, 0, "default")


@lru_cache(maxsize=16)
def anchor_grid(xp: ArrayModule, size: int, strides: tuple[int, ...]) -> tuple[Any, Any]:
    """(A, 2) cell x, y and (A,) stride per anchor, stride-8 cells first, row-major (YOLOX order)."""
    cells, steps = [], []
    for stride in strides:
        n = size // stride
        index = xp.arange(n * n, dtype=xp.int64)
        ys, xs = index // n, index % n
        cells.append(xp.stack((xs, ys), axis=1).astype(xp.float32))
        steps.append(xp.full((n * n,), stride, dtype=xp.float32))
    return xp.concatenate(cells, axis=0), xp.concatenate(steps, axis=0)


def default_convention(layout: LayoutName) -> tuple[Color, float, Padding, str]:
    """Colour, scale, padding and origin a layout's own ecosystem uses when nothing says otherwise."""
    if layout == "yolox":  # YOLOX demo/ONNXRuntime: cv2 BGR, raw 0..255, padded at the top-left
        return "bgr", 1.0, "top-left", "YOLOX demo defaults"
    return "rgb", 1.0 / 255.0, "symmetric", "Ultralytics defaults"


def warm_up_mismatch(layout: ModelLayout, out: Any, batch: int) -> str:
    """Why a (joined) output of a `batch`-image run does not fit `layout`; "" when it fits."""
    shape = tuple(int(d) for d in out.shape)
    width = {"yolov8": 4, "yolov5": 5, "yolox": 5}.get(layout.name, 6) + layout.num_classes + layout.extra
    if layout.form == "channels-first":
        expected: tuple[int, ...] | None = (batch, width, layout.rows)
    elif layout.form in ("anchors-first", "decoded", "raw-head"):
        expected = (batch, layout.rows, width)
    elif layout.form in ("batch-rows", "batch-class-rows"):
        fits = shape[-1] == 7 and (len(shape) == 2 or shape[0] == batch)
        return "" if fits else f"expected [{batch}, K, 7] or [D, 7] rows after NMS"
    else:
        expected = None
        if len(shape) != 3 or shape[0] != batch or shape[2] != 6 + layout.extra:
            return f"expected [{batch}, K, {6 + layout.extra}] rows after NMS"
    return "" if expected is None or shape == expected else f"expected {list(expected)}"
