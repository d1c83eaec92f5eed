"""The letterbox from YUV 4:2:0 planes straight into a batch tensor slot, written once against `xp`.

One code path, two array modules: NumPy runs it here (and `array_api_strict` in the tests: only
array-API functions are used), CuPy runs the same lines on a GPU. Where `xp` is CuPy,
`daemon.inference.letterbox_kernel` can replace it with one CUDA kernel (one thread per output pixel),
checked against this path by tools/checks/gpu_check.py and, here, by compiling its source on the CPU.

Input: a `YuvFrame`, the Y plane and either NV12's interleaved UV plane or I420's U and V planes,
each possibly pitched (rows longer than the image: NVDEC's and FFmpeg's padding) and of odd
width or height (chroma is ceil(W/2) x ceil(H/2)). Colour: BT.601 or BT.709, limited (16..235)
or full range, as the frame says (`matrix_for`: what swscale assumes on the CPU path).

Geometry (`Letterbox`, already placed: centred or at the top-left): output pixel (ox, oy) of the
content samples source luma at ((ox + 0.5) * W / new_w - 0.5, (oy + 0.5) * H / new_h - 0.5),
clamped to the plane, bilinearly; chroma at (x / 2, y / 2 - 0.25) (H.264's default siting:
co-sited horizontally, centred vertically), clamped. Then RGB = the matrix, clipped to 0..255,
times the convention's `scale`, in the model's channel order, cast to float32 or float16.
The rest of the slot is `pad_value * scale`, written only when the slot's geometry changes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from daemon.core.frames import Letterbox
from daemon.core.xp import ArrayModule
from daemon.core.yuv import Matrix, YuvFrame
from daemon.inference.layouts import InputConvention

_KR_KB: dict[str, tuple[float, float]] = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722)}


@dataclass(frozen=True, slots=True)
class Coefficients:
    """RGB = clip(ky * (Y - y_off) + k * chroma, 0, 255); chroma = kc * (C - 128)."""

    ky: float
    y_off: float
    kc: float
    rv: float
    gu: float
    gv: float
    bu: float

    @classmethod
    def of(cls, matrix: Matrix, full_range: bool) -> Coefficients:
        kr, kb = _KR_KB[matrix]
        kg = 1.0 - kr - kb
        ky, y_off, kc = (1.0, 0.0, 1.0) if full_range else (255.0 / 219.0, 16.0, 255.0 / 224.0)
        return cls(ky, y_off, kc, 2 * (1 - kr), 2 * kb * (1 - kb) / kg, 2 * kr * (1 - kr) / kg, 2 * (1 - kb))


@dataclass(frozen=True, slots=True)
class SampleMap:
    """Bilinear taps of one axis: lower index, upper index, weight of the upper (float32)."""

    lo: Any
    hi: Any
    frac: Any


def _axis_map(xp: ArrayModule, out_n: int, src_n: int, ratio: float, *, chroma: bool, shift: float) -> SampleMap:
    pos = (xp.astype(xp.arange(out_n), xp.float32) + 0.5) * xp.asarray(ratio, dtype=xp.float32) - 0.5
    if chroma:
        pos = pos * 0.5 - shift
    pos = xp.clip(pos, 0.0, float(src_n - 1))
    lo = xp.astype(xp.floor(pos), xp.int64)
    hi = xp.minimum(lo + 1, xp.asarray(src_n - 1, dtype=xp.int64))
    return SampleMap(lo, hi, pos - xp.astype(lo, xp.float32))


@dataclass(frozen=True, slots=True)
class Geometry:
    """The sample maps for one (source size, content size): built once, reused per frame."""

    luma_x: SampleMap
    luma_y: SampleMap
    chroma_x: SampleMap
    chroma_y: SampleMap

    @classmethod
    def build(cls, xp: ArrayModule, width: int, height: int, new_w: int, new_h: int) -> Geometry:
        rx, ry = width / new_w, height / new_h
        cw, ch = (width + 1) // 2, (height + 1) // 2
        return cls(
            _axis_map(xp, new_w, width, rx, chroma=False, shift=0.0),
            _axis_map(xp, new_h, height, ry, chroma=False, shift=0.0),
            _axis_map(xp, new_w, cw, rx, chroma=True, shift=0.0),
            _axis_map(xp, new_h, ch, ry, chroma=True, shift=0.25),
        )


def bilinear(xp: ArrayModule, plane: Any, ys: SampleMap, xs: SampleMap) -> Any:
    """(len(ys), len(xs)) float32 samples of a uint8 plane (a strided view is fine)."""
    top, bottom = xp.take(plane, ys.lo, axis=0), xp.take(plane, ys.hi, axis=0)
    a = xp.astype(xp.take(top, xs.lo, axis=1), xp.float32)
    b = xp.astype(xp.take(top, xs.hi, axis=1), xp.float32)
    c = xp.astype(xp.take(bottom, xs.lo, axis=1), xp.float32)
    d = xp.astype(xp.take(bottom, xs.hi, axis=1), xp.float32)
    fx = xp.reshape(xs.frac, (1, -1))
    fy = xp.reshape(ys.frac, (-1, 1))
    upper = a + (b - a) * fx
    lower = c + (d - c) * fx
    return upper + (lower - upper) * fy


def yuv_to_rgb(xp: ArrayModule, y: Any, u: Any, v: Any, k: Coefficients) -> tuple[Any, Any, Any]:
    """Full-resolution float32 Y, U, V -> R, G, B in 0..255 (clipped)."""
    yy = (y - k.y_off) * k.ky
    cb = (u - 128.0) * k.kc
    cr = (v - 128.0) * k.kc
    r = yy + k.rv * cr
    g = yy - k.gu * cb - k.gv * cr
    b = yy + k.bu * cb
    return xp.clip(r, 0.0, 255.0), xp.clip(g, 0.0, 255.0), xp.clip(b, 0.0, 255.0)


def letterbox_content(xp: ArrayModule, frame: YuvFrame, geometry: Geometry, k: Coefficients) -> tuple[Any, Any, Any]:
    """R, G, B (new_h, new_w) float32 0..255 of the frame resized into its letterbox content."""
    y = frame.y[: frame.height, : frame.width]
    u_plane, v_plane = frame.chroma_planes()
    luma = bilinear(xp, y, geometry.luma_y, geometry.luma_x)
    u = bilinear(xp, u_plane, geometry.chroma_y, geometry.chroma_x)
    v = bilinear(xp, v_plane, geometry.chroma_y, geometry.chroma_x)
    return yuv_to_rgb(xp, luma, u, v, k)


def placed(letterbox: Letterbox, convention: InputConvention) -> Letterbox:
    """Where the content lies in the input: as fitted (centred), or moved to the top-left (the
    rule of both batch tensors, this one and `daemon.inference.stage.BatchTensor`)."""
    if convention.padding == "top-left" and (letterbox.pad_x or letterbox.pad_y):
        return replace(letterbox, pad_x=0, pad_y=0)
    return letterbox


class DeviceBatchTensor:
    """A preallocated (rows, 3, S, S) input on `xp`'s device, filled from YUV frames in place.

    The counterpart of `daemon.inference.stage.BatchTensor` for YUV input: same convention (channel
    order, scale, top-left or centred content, pad value, dtype, static batch), same rule that a
    slot's padding is rewritten only when its geometry changes; `fill` returns the leading
    `len(frames)` rows (all rows for a static batch, unused ones padding only). Sample maps are
    cached per (source size, content size). `kernel` (a `daemon.inference.letterbox_kernel.LetterboxKernel`)
    replaces the xp path where given: it writes whole slots, padding included.
    """

    def __init__(
        self,
        xp: ArrayModule,
        max_batch: int,
        size: int,
        convention: InputConvention | None = None,
        *,
        kernel: Any | None = None,
    ) -> None:
        self.xp = xp
        self.size = size
        self.convention = conv = convention or InputConvention()
        self.rows = conv.batch if conv.batch is not None else max_batch
        if max_batch > self.rows:
            raise ValueError(f"batches of {max_batch} for a model with a static batch of {self.rows}")
        self.dtype = getattr(xp, conv.dtype, None)  # float16 is not in the array API standard
        if self.dtype is None:
            raise ValueError(f"{getattr(xp, '__name__', xp)} has no {conv.dtype} (NumPy and CuPy do)")
        self.pad = float(conv.pad_value) * conv.scale
        self.array = xp.full((self.rows, 3, size, size), self.pad, dtype=self.dtype)
        self.kernel = kernel
        self._slots: list[Letterbox | None] = [None] * self.rows
        self._geometries: dict[tuple[int, int, int, int], Geometry] = {}

    def geometry(self, frame: YuvFrame, lb: Letterbox) -> Geometry:
        key = (frame.width, frame.height, lb.new_w, lb.new_h)
        found = self._geometries.get(key)
        if found is None:
            found = self._geometries[key] = Geometry.build(self.xp, *key)
        return found

    def write(self, index: int, frame: YuvFrame, letterbox: Letterbox) -> None:
        """Letterbox one frame into slot `index`."""
        lb = placed(letterbox, self.convention)
        if lb.size != self.size:
            raise ValueError(f"frame for size {lb.size} in a {self.size} batch")
        if (frame.width, frame.height) != (lb.src_w, lb.src_h):
            raise ValueError(f"a {frame.width}x{frame.height} frame with a letterbox for {lb.src_w}x{lb.src_h}")
        k = Coefficients.of(frame.matrix, frame.full_range)
        if self.kernel is not None:
            self.kernel.write(self.array, index, frame, lb=lb, k=k, conv=self.convention)  # padding too
            self._slots[index] = lb
            return
        xp, scale = self.xp, self.convention.scale
        if self._slots[index] != lb:
            self.array[index, ...] = self.pad
            self._slots[index] = lb
        r, g, b = letterbox_content(xp, frame, self.geometry(frame, lb), k)
        ordered = (b, g, r) if self.convention.color == "bgr" else (r, g, b)
        for channel, values in enumerate(ordered):
            self.array[index, channel, lb.pad_y : lb.pad_y + lb.new_h, lb.pad_x : lb.pad_x + lb.new_w] = xp.astype(
                values * scale, self.dtype
            )

    def clear(self, index: int) -> None:
        """Slot `index` back to padding only (a static batch's unused slots)."""
        if self._slots[index] is not None:
            self.array[index, ...] = self.pad
            self._slots[index] = None

    def fill(self, frames: list[tuple[YuvFrame, Letterbox]]) -> Any:
        if len(frames) > self.rows:
            raise ValueError(f"{len(frames)} frames for a batch tensor of {self.rows}")
        for i, (frame, lb) in enumerate(frames):
            self.write(i, frame, lb)
        if self.convention.batch is None:
            return self.array[: len(frames), ...]
        for i in range(len(frames), self.rows):
            self.clear(i)
        return self.array
