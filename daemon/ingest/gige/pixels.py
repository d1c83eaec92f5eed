"""A GigE Vision frame's pixels as an `av.VideoFrame`, so it takes the decoded RTSP frames' path.

The camera's buffer is wrapped in a frame of the matching FFmpeg pixel format (one copy); the
worker's swscale then converts it, de-Bayers it where it is a Bayer mosaic, and scales it to the
model's letterbox in one pass (`daemon.ingest.decoding.scale`), only for frames a batch takes.

A Bayer frame that the letterbox shrinks to half its size or less is de-Bayered by 2x2 binning
instead (`video_frame(..., binned=True)`): each 2x2 cell becomes one RGB pixel (its red, the mean of
its two greens, its blue), which loses nothing the model would see at that size, and swscale only
scales. swscale's own de-Bayering works at full size: wrapping and converting a 1920x1200 BayerRG8
frame to 800x500 cost 16.5 ms of CPU, against 6.0 ms binned (50 frames on a shared 2-core box).
"""

from __future__ import annotations

from dataclasses import dataclass

import av
import numpy as np
import numpy.typing as npt


@dataclass(frozen=True, slots=True)
class PixelLayout:
    """One supported GenICam pixel format: its PFNC name, FFmpeg's format and bytes per pixel;
    for a Bayer mosaic, where red sits in its 2x2 tile (row, column) (blue diagonally opposite)."""

    name: str
    av_format: str
    channels: int
    red: tuple[int, int] | None = None

    @property
    def bayer(self) -> bool:
        return self.red is not None


PIXEL_FORMATS: dict[int, PixelLayout] = {
    0x01080001: PixelLayout("Mono8", "gray", 1),
    0x01080008: PixelLayout("BayerGR8", "bayer_grbg8", 1, (0, 1)),
    0x01080009: PixelLayout("BayerRG8", "bayer_rggb8", 1, (0, 0)),
    0x0108000A: PixelLayout("BayerGB8", "bayer_gbrg8", 1, (1, 0)),
    0x0108000B: PixelLayout("BayerBG8", "bayer_bggr8", 1, (1, 1)),
    0x02180014: PixelLayout("RGB8", "rgb24", 3),
    0x02180015: PixelLayout("BGR8", "bgr24", 3),
}
"""PFNC codes (the GigE Vision stream's pixel format field) of the formats the reader converts."""

SUPPORTED = ", ".join(layout.name for layout in PIXEL_FORMATS.values())


class UnsupportedPixelFormatError(ValueError):
    """The camera sends a pixel format the reader does not convert."""


def layout_of(pfnc: int) -> PixelLayout:
    """The layout for a PFNC code; `UnsupportedPixelFormatError` for any other."""
    layout = PIXEL_FORMATS.get(pfnc)
    if layout is None:
        raise UnsupportedPixelFormatError(f"pixel format 0x{pfnc:08x} is not supported (use one of {SUPPORTED})")
    return layout


def video_frame(data: bytes, width: int, height: int, layout: PixelLayout, *, binned: bool = False) -> av.VideoFrame:
    """The image bytes (rows packed, no padding) as a frame of FFmpeg's matching format; with
    `binned` (Bayer formats of even size only), de-Bayered by 2x2 binning to a half-size RGB frame.

    `ValueError` when `data` is shorter than the image."""
    size = width * height * layout.channels
    if len(data) < size:
        raise ValueError(f"image data is {len(data)} bytes, {width}x{height} {layout.name} needs {size}")
    pixels = np.frombuffer(data, dtype=np.uint8, count=size)
    shape = (height, width, layout.channels) if layout.channels > 1 else (height, width)
    if binned and layout.red is not None and width % 2 == 0 and height % 2 == 0:
        return av.VideoFrame.from_ndarray(_binned(pixels.reshape(shape), layout.red), format="rgb24")
    return av.VideoFrame.from_ndarray(pixels.reshape(shape), format=layout.av_format)


def bins(layout: PixelLayout, width: int, height: int, new_w: int, new_h: int) -> bool:
    """Whether a `width` x `height` frame shrunk to `new_w` x `new_h` is de-Bayered by binning."""
    return layout.bayer and 2 * new_w <= width and 2 * new_h <= height


def _binned(mosaic: npt.NDArray[np.uint8], red: tuple[int, int]) -> npt.NDArray[np.uint8]:
    """One RGB pixel per 2x2 tile: its red, the mean of its two greens (rounded down), its blue."""
    ry, rx = red
    by, bx = 1 - ry, 1 - rx
    g1 = mosaic[ry::2, bx::2].astype(np.uint16)
    g1 += mosaic[by::2, rx::2]
    out = np.empty((mosaic.shape[0] // 2, mosaic.shape[1] // 2, 3), np.uint8)
    out[..., 0] = mosaic[ry::2, rx::2]
    out[..., 1] = g1 >> 1
    out[..., 2] = mosaic[by::2, bx::2]
    return out
