"""Real decoded yuv420p frames for writer tests: a mid-grey picture with a white square, through libx264 and back."""

from __future__ import annotations

from fractions import Fraction

import av
import numpy as np


def decoded_frames(
    count: int, width: int, height: int, square: tuple[slice, slice] = (slice(100, 140), slice(100, 160))
) -> list[av.VideoFrame]:
    """`count` frames of `width` x `height`, the white square at (rows, columns) `square`."""
    codec = av.CodecContext.create("libx264", "w")
    codec.width, codec.height, codec.pix_fmt, codec.time_base = width, height, "yuv420p", Fraction(1, 25)
    rgb = np.full((height, width, 3), 128, np.uint8)
    rgb[square] = 255
    packets = []
    for i in range(count):
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
        frame.pts = i
        packets += codec.encode(frame)
    packets += codec.encode(None)
    decoder = av.CodecContext.create("h264", "r")
    return [f for p in packets for f in decoder.decode(p)] + list(decoder.decode(None))
