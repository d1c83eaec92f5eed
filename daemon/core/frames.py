"""The values that cross stage boundaries, and the geometry they share.

Data flows one way: source -> router -> batcher -> engine -> postprocess -> sink.
Every type here is a frozen, slotted dataclass; arrays inside them are never
mutated after construction (a stage that needs a different array makes its own).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from daemon.core.objects import ObjectEvent
from daemon.core.status_kinds import StatusKind

MODEL_SIZES: tuple[int, ...] = (416, 640, 800)
"""Input sizes (square, pixels) of the models the daemon knows how to route to."""

LETTERBOX_PAD_VALUE = 114
"""Grey used for letterbox padding (the Ultralytics convention the demo models are trained with)."""

RGBPlanes = tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8], npt.NDArray[np.uint8]]
"""An image as its R, G and B planes (the model's channel order and layout), each H x W uint8.
A plane may be a strided view (rows padded past W, as FFmpeg allocates them); a 3 x H x W
array works wherever a tuple does, since both unpack into three planes."""


@dataclass(frozen=True, slots=True)
class Letterbox:
    """How a camera frame of `src_w` x `src_h` is placed into a `size` x `size` model input.

    The frame is scaled by `scale` (aspect preserved) to `new_w` x `new_h` and placed at
    (`pad_x`, `pad_y`); the rest is padding. `to_source` maps model-input boxes back to
    camera pixels.
    """

    size: int
    src_w: int
    src_h: int
    scale: float
    new_w: int
    new_h: int
    pad_x: int
    pad_y: int

    @classmethod
    def fit(cls, src_w: int, src_h: int, size: int) -> Letterbox:
        if src_w <= 0 or src_h <= 0:
            raise ValueError(f"frame size must be positive, got {src_w}x{src_h}")
        scale = min(size / src_w, size / src_h)
        new_w = max(1, min(size, round(src_w * scale)))
        new_h = max(1, min(size, round(src_h * scale)))
        # swscale needs even sizes for subsampled formats; planar gbrp is not one, keep exact.
        pad_x = (size - new_w) // 2
        pad_y = (size - new_h) // 2
        return cls(size, src_w, src_h, scale, new_w, new_h, pad_x, pad_y)

    def to_source(self, boxes_xyxy: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Map (N, 4) x1,y1,x2,y2 boxes (a float dtype, kept) in model-input pixels to camera pixels, clipped."""
        pad, scale, high = _source_map(self, boxes_xyxy.dtype)
        out: npt.NDArray[np.float32] = np.subtract(boxes_xyxy, pad)
        np.multiply(out, scale, out=out)
        np.maximum(out, 0.0, out=out)
        np.minimum(out, high, out=out)
        return out


@functools.lru_cache(maxsize=1024)
def _source_map(
    letterbox: Letterbox, dtype: np.dtype[Any]
) -> tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any]]:
    """`to_source`'s per-column offset, scale and upper bound in the boxes' dtype, once per letterbox (a
    hot path: three array operations a frame instead of a dozen column ones, with the same arithmetic)."""
    lb = letterbox
    sx, sy = lb.src_w / lb.new_w, lb.src_h / lb.new_h
    arrays = (
        np.array([lb.pad_x, lb.pad_y, lb.pad_x, lb.pad_y], dtype=dtype),
        np.array([sx, sy, sx, sy], dtype=dtype),
        np.array([lb.src_w, lb.src_h, lb.src_w, lb.src_h], dtype=dtype),
    )
    for array in arrays:
        array.flags.writeable = False
    return arrays


def nearest_model_size(width: int, height: int, sizes: tuple[int, ...] = MODEL_SIZES) -> int:
    """The routing rule: the model size nearest the longer side of the frame (ties go to the larger)."""
    if not sizes:
        raise ValueError("no model sizes to choose from")
    longer = max(width, height)
    return min(sizes, key=lambda s: (abs(s - longer), -s))


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded camera frame, to be resized for its model (letterbox content, no padding).

    `planes` are its R, G and B planes, each `letterbox.new_h` x `letterbox.new_w` uint8, planar
    like the model's input, scaled and converted in C (swscale, to planar GBR; views of that
    frame, not copies) so the worker only scales them to 0..1 into the padded batch tensor,
    without a transpose. `pixels` holds them, or (from live sources) a function that makes them
    from the decoded YUV frame: under overload most frames are superseded in the hub before a
    batch takes them, so only frames that reach a batch pay for colour conversion and scaling,
    in the worker (with the fill, 1.6 ms of CPU for 640x480, 4.2 ms for 1920x1080 to 800:
    `tools/bench/preprocess.py`).
    `seq` is the frame's index within the current connection (decoded frames; frames
    dropped later leave gaps). `captured_ms` is wall-clock Unix ms at decode,
    `captured_mono` the same instant on the monotonic clock (for ages and latency).
    `decoded` is the decoded frame itself (an `av.VideoFrame`, host or NVDEC device memory) from
    live sources, for the inference stage's device path (`daemon.inference.device_stage`), which letterboxes
    its YUV planes on the GPU instead of calling `pixels`; None where only planes exist.
    """

    camera_id: str
    seq: int
    captured_ms: int
    captured_mono: float
    letterbox: Letterbox
    pixels: RGBPlanes | Callable[[], RGBPlanes]
    decoded: Any = None

    @property
    def planes(self) -> RGBPlanes:
        """The scaled RGB planes (made on each call when `pixels` is a function: call it once)."""
        pixels = self.pixels
        return pixels() if callable(pixels) else pixels

    @property
    def width(self) -> int:
        return self.letterbox.src_w

    @property
    def height(self) -> int:
        return self.letterbox.src_h

    @property
    def model_size(self) -> int:
        return self.letterbox.size


@dataclass(frozen=True, slots=True)
class Detection:
    """One detected object, box in camera pixels (x1, y1, x2, y2)."""

    cls: int
    label: str
    score: float
    box: tuple[float, float, float, float]
    track: int | None = None
    """The confirmed track this detection belongs to (None: untracked or not yet confirmed)."""

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "cls": self.cls,
            "label": self.label,
            "score": round(self.score, 4),
            "box": [round(v, 1) for v in self.box],
        }
        if self.track is not None:
            out["track"] = self.track
        return out


@dataclass(frozen=True, slots=True)
class FrameResult:
    """What one processed frame produced: the unit the sink publishes (one stream entry)."""

    camera_id: str
    seq: int
    captured_ms: int
    captured_mono: float
    width: int
    height: int
    model_size: int
    model_name: str
    detections: tuple[Detection, ...]
    objects: tuple[ObjectEvent, ...] = ()
    """The tracking stage's events from this frame (`new`, `crossed`, `end`), for the objects
    stream: published with the frame, through the same buffer, spool and ID path."""
    weak: tuple[Detection, ...] = ()
    """A tracked camera's detections from `[tracking] low_score` up to its `conf_threshold`: for the
    tracker's second stage only. The tracking stage consumes them; they are never published."""


@dataclass(frozen=True, slots=True)
class StatusEvent:
    """A status change for `beltsight:events` (camera up/down, breaker, throttle, rebuild...)."""

    kind: StatusKind
    detail: str
    camera_id: str | None = None
    at_ms: int = 0


class FrameConsumer(Protocol):
    """Where a source hands its frames (the batching hub implements it).

    `put(frame, wait=False)` is latest-frame-wins: a frame of the same camera still waiting
    is replaced (and counted as dropped, reason `superseded`), so a slow consumer never builds
    a backlog. `put(frame, wait=True)` is for replays: it blocks until the camera's previous
    frame has been taken, or `stop` is set (then it returns False and the frame is not taken).
    """

    def put(self, frame: Frame, *, wait: bool = False, stop: threading.Event | None = None) -> bool: ...

    def discard(self, camera_id: str) -> None:
        """The camera's connection ended (a frame it handed over is still processed)."""


Router = Callable[[str, int, int], int | None]
"""(camera_id, width, height) -> model input size, or None when no configured model fits."""
