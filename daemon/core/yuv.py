"""A decoded frame's YUV 4:2:0 planes, on the host or the device: the value that the hardware
decoder (ingest) hands to the device pre-processing (inference), and how to get one from PyAV.

`yuv_frame` turns a decoded PyAV frame into a `YuvFrame` on `xp`'s device: a CUDA frame's NV12
planes through DLPack (no copy), a CPU frame's planes as NumPy views (or uploaded to CuPy).
`YuvUploader` copies CPU-decoded planes to the device through pinned staging buffers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from daemon.core.xp import ArrayModule, pinned_empty

Matrix = Literal["bt601", "bt709"]
AVCOL_SPC_BT709 = 1
AVCOL_SPC_BT470BG = 5
"""FFmpeg's AVColorSpace for BT.601 (625-line; the same matrix as SMPTE 170M)."""
AVCOL_RANGE_MPEG = 1
"""Limited range (16-235)."""
AVCOL_RANGE_JPEG = 2


def matrix_for(colorspace: int) -> Matrix:
    """The matrix swscale uses for a frame's AVColorSpace: BT.709 when tagged so, else BT.601."""
    return "bt709" if colorspace == AVCOL_SPC_BT709 else "bt601"


@dataclass(frozen=True, slots=True)
class YuvFrame:
    """One 4:2:0 frame's planes (arrays of one module, uint8, rows may be pitched).

    `y` is (H, >= W); for NV12 `u` is the interleaved UV plane (ceil(H/2), >= 2 * ceil(W/2)) and
    `v` is None; for I420 `u` and `v` are (ceil(H/2), >= ceil(W/2)) each."""

    width: int
    height: int
    y: Any
    u: Any
    v: Any | None = None
    matrix: Matrix = "bt601"
    full_range: bool = False

    @property
    def nv12(self) -> bool:
        return self.v is None

    @property
    def chroma_size(self) -> tuple[int, int]:
        return (self.width + 1) // 2, (self.height + 1) // 2

    def chroma_planes(self) -> tuple[Any, Any]:
        """(U, V) as (ceil(H/2), ceil(W/2)) views (strided for NV12)."""
        cw, ch = self.chroma_size
        if self.v is None:
            return self.u[:ch, 0 : 2 * cw : 2], self.u[:ch, 1 : 2 * cw : 2]
        return self.u[:ch, :cw], self.v[:ch, :cw]


class YuvUploader:
    """CPU-decoded frames' YUV planes to the device through pinned staging buffers.

    One staging and one device buffer per (batch slot, plane, shape), reused: the copy is
    queued on CuPy's current stream (the engine's), so a slot's buffers may be refilled once
    that stream has passed the batch (the engine's run synchronises at its end). With NumPy
    it returns the frame as it is (no copy)."""

    def __init__(self, xp: ArrayModule) -> None:
        self.xp = xp
        self._buffers: dict[tuple[int, int, tuple[int, ...]], tuple[Any, Any]] = {}

    def upload(self, slot: int, frame: YuvFrame) -> YuvFrame:
        xp = self.xp
        if xp is np:
            return frame
        planes = [frame.y, frame.u] if frame.v is None else [frame.y, frame.u, frame.v]
        moved = []
        for index, plane in enumerate(planes):
            key = (slot, index, tuple(plane.shape))
            buffers = self._buffers.get(key)
            if buffers is None:
                buffers = (pinned_empty(key[2], np.uint8, "cuda"), xp.empty(key[2], dtype=xp.uint8))
                self._buffers[key] = buffers
            staging, device = buffers
            np.copyto(staging, plane)
            device.set(staging, stream=xp.cuda.get_current_stream())  # asynchronous from pinned memory
            moved.append(device)
        return dataclasses.replace(frame, y=moved[0], u=moved[1], v=moved[2] if len(moved) > 2 else None)


def yuv_frame(vframe: Any, xp: ArrayModule) -> YuvFrame:
    """The frame's 4:2:0 planes as a `YuvFrame` on `xp`'s device (see the module docstring)."""
    matrix = matrix_for(int(vframe.colorspace))
    w, h = int(vframe.width), int(vframe.height)
    name = vframe.format.name
    full = int(vframe.color_range) == AVCOL_RANGE_JPEG or name == "yuvj420p"
    if name == "cuda":  # a device frame: NV12 (sw_format) planes exported through DLPack
        sw = vframe.sw_format.name if vframe.sw_format is not None else "?"
        if sw != "nv12":
            raise ValueError(f"device frame in {sw}; only nv12 is supported (8-bit 4:2:0)")
        y, uv = (xp.from_dlpack(plane) for plane in vframe.planes[:2])
        return YuvFrame(w, h, y, uv, None, matrix=matrix, full_range=full)
    if name not in ("yuv420p", "yuvj420p", "nv12"):
        vframe = vframe.reformat(format="yuv420p")  # 10-bit or 4:2:2 sources: swscale to 8-bit 4:2:0
        name = "yuv420p"
    views = [
        np.frombuffer(memoryview(p), np.uint8).reshape(p.height, p.line_size)
        for p in vframe.planes[: 2 if name == "nv12" else 3]
    ]
    if xp is not np:
        views = [xp.asarray(v) for v in views]  # upload (half the bytes of RGB)
    y, u, *rest = views
    return YuvFrame(w, h, y, u, rest[0] if rest else None, matrix=matrix, full_range=full)
