"""A GigE Vision frame's pixels as an `av.VideoFrame`, so it takes the decoded RTSP frames' path.

The camera's buffer is wrapped in a frame of the matching FFmpeg pixel format (one copy); the
worker's swscale then converts it, de-Bayers it where it is a Bayer mosaic, and scales it to the
model's letterbox in one pass (`daemon.ingest.decoding.scale`), only for frames a batch takes.
"""

from __future__ import annotations

from dataclasses import dataclass

import av
import numpy as np


@dataclass(frozen=True, slots=True)
class PixelLayout:
    """One supported GenICam pixel format: its PFNC name, FFmpeg's format and bytes per pixel."""

    name: str
    av_format: str
    channels: int


PIXEL_FORMATS: dict[int, PixelLayout] = {
    0x01080001: PixelLayout("Mono8", "gray", 1),
    0x01080008: PixelLayout("BayerGR8", "bayer_grbg8", 1),
    0x01080009: PixelLayout("BayerRG8", "bayer_rggb8", 1),
    0x0108000A: PixelLayout("BayerGB8", "bayer_gbrg8", 1),
    0x0108000B: PixelLayout("BayerBG8", "bayer_bggr8", 1),
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


def video_frame(data: bytes, width: int, height: int, layout: PixelLayout) -> av.VideoFrame:
    """The image bytes (rows packed, no padding) as a frame of FFmpeg's matching format.

    `ValueError` when `data` is shorter than the image."""
    size = width * height * layout.channels
    if len(data) < size:
        raise ValueError(f"image data is {len(data)} bytes, {width}x{height} {layout.name} needs {size}")
    pixels = np.frombuffer(data, dtype=np.uint8, count=size)
    shape = (height, width, layout.channels) if layout.channels > 1 else (height, width)
    return av.VideoFrame.from_ndarray(pixels.reshape(shape), format=layout.av_format)
