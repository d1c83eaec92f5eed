"""What every layout family shares: the values (`ModelLayout`, `InputConvention`, `OutputInfo`),
what recognition knows about a file (`Found`), how sure a family is that an output is its own
(`Claim`), and the family interface itself (`LayoutFamily`).

A family is one detector ecosystem's output layout (YOLOv8, YOLOv5, YOLOX, rows after NMS). It
recognises its outputs, gives its ecosystem's input convention, says the output shape a warm-up
run must have, and decodes a batch's output into candidate boxes. Post-processing (NMS, the
per-image cut, the mapping to camera pixels) is the same for every family and lives in
`daemon.inference.postprocess`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from functools import lru_cache
from typing import Any, ClassVar, Literal, NamedTuple

from daemon.core.model_spec import Color, Padding
from daemon.core.xp import ArrayModule

"""The built-in families (`daemon.inference.layouts.registry.FAMILIES` holds every family)."""
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
    """How to read a model's output; `name` is its family (`registry.family_of` finds it),
    `form` the variant within the family; `reason` says why this layout was recognised."""

    name: str
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

    def describe(self) -> str:
        extra = f", {self.extra} trailing values ignored" if self.extra else ""
        return f"{self.name} ({self.form}), {self.num_classes} classes{extra}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Found:
    """What recognition knows about a file besides its main output's shape."""

    size: int
    strides: tuple[int, ...]
    names: int | None
    """Labels the file or config gives (None: unknown)."""
    override: str
    """A family named by the config or metadata, or "auto"."""
    override_from: str
    meta: Mapping[str, str]
    names_from: str
    task: str = ""
    masks: int = 0
    """Mask coefficients of a segment model (the channels of its prototype output), else 0."""

    @property
    def anchors(self) -> int:
        return expected_anchors(self.size, self.strides)

    @property
    def grid(self) -> str:
        return f"strides {'/'.join(map(str, self.strides))} at {self.size}"

    @property
    def ultralytics(self) -> bool:
        """Ultralytics (and YOLOv5) exports carry `stride` or `task` in their metadata."""
        return "stride" in self.meta or "task" in self.meta

    def allows(self, family: str) -> bool:
        """The config or metadata names no family, or this one."""
        return self.override in ("auto", family)


class Claim(IntEnum):
    """How sure a family is that a main output is its own; the surest claim wins, ties in registry order."""

    FALLBACK = 1
    """It could be, if no other family's shape fits (rows after NMS of some other count)."""
    SHAPE = 2
    """The output has this family's shape (for the labels and metadata known)."""
    SIGNATURE = 3
    """A shape only this family has (YOLOv5's three anchors per cell), or the config names the family
    and its `recognise` says why a shape does not fit."""
    DECLARED = 4
    """The file says so (metadata, a rank only this family has) or the config names this family, over any shape."""


class Candidates(NamedTuple):
    """Flat candidates over a batch: image index (B,), xyxy boxes (N, 4) in model-input pixels,
    scores (N,) and classes (N,) as integers; all on the output's array module."""

    image: Any
    boxes: Any
    scores: Any
    classes: Any


class Decode(NamedTuple):
    """What a family's decode needs besides the output: (B, 1) thresholds, the class mask
    (None, bool (C,) or (B, C)) and how many leading images of the batch are real."""

    thresholds: Any
    class_mask: Any | None
    images: int


class LayoutFamily(ABC):
    """One output layout family: recognise it, its ecosystem's input, its output shape, decode it.

    Add a family: a module with a subclass, and one line in `registry.FAMILIES`."""

    name: ClassVar[str]
    nms_in_graph: ClassVar[bool] = False
    """Rows after NMS in the graph: post-processing only filters and orders them."""
    class_agnostic_nms: ClassVar[bool] = False
    """The ecosystem's own NMS runs across classes (what `[models.<size>] nms = "auto"` picks)."""
    iou_plus_one: ClassVar[bool] = False
    """The ecosystem's NMS computes areas as (x2 - x1 + 1) x (y2 - y1 + 1) camera pixels."""
    color: ClassVar[Color] = "rgb"
    scale: ClassVar[float] = 1.0 / 255.0
    padding: ClassVar[Padding] = "symmetric"
    convention_origin: ClassVar[str] = "Ultralytics defaults"

    def from_outputs(self, outputs: Sequence[OutputInfo], found: Found) -> ModelLayout | None:
        """A layout spread over several outputs (asked before one main output is picked); None: not this."""
        return None

    @abstractmethod
    def claim(self, main: OutputInfo, found: Found) -> Claim | None:
        """How sure this family is that the main output (rank 2 or 3) is its own; None: it is not."""

    @abstractmethod
    def recognise(self, main: OutputInfo, found: Found, probe: Any | None) -> ModelLayout:
        """The layout of a main output this family claimed (LayoutError when it cannot be read)."""

    @abstractmethod
    def expected(self, anchors: int) -> tuple[str, ...]:
        """The output shapes this family reads, for messages (`[N, 4 + C, 8400] (yolov8)`)."""

    def boxes(self, padding: Padding) -> BoxMapping:
        """How the ecosystem maps its boxes back to camera pixels for an input padded this way."""
        return "content"

    def output_shape(self, layout: ModelLayout, batch: int) -> tuple[int, ...] | None:
        """The exact shape of the one output of a `batch`-image run, where the family knows it before
        the run (the device path preallocates that buffer, in the output's own type); None: several
        outputs, or a shape only the run decides (ONNX Runtime allocates it)."""
        return None

    @abstractmethod
    def mismatch(self, layout: ModelLayout, shape: tuple[int, ...], batch: int) -> str:
        """Why an output of a `batch`-image run does not fit `layout`; "" when it fits."""

    def join(self, xp: ArrayModule, outputs: Sequence[Any], layout: ModelLayout) -> Any:
        """The model's outputs as the one array `decode` reads."""
        return outputs[0]

    @abstractmethod
    def decode(self, xp: ArrayModule, output: Any, layout: ModelLayout, how: Decode) -> Candidates:
        """The candidates of the real images' output: score >= threshold, allowed class, finite box."""


def expected_anchors(size: int, strides: Sequence[int]) -> int:
    return sum((size // s) ** 2 for s in strides)


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


def shape_text(outputs: Sequence[OutputInfo]) -> str:
    return ", ".join(f"'{o.name}' {list(o.shape)}" for o in outputs)
