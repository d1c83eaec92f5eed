"""A frame as JPEG: the picture from what the pipeline holds, optionally cropped to a box and the box
drawn (crossing snapshots), or whole (captured frames), encoded through libjpeg-turbo.

The decoded frame is YUV 4:2:0 (what FFmpeg hands over; NV12 from NVDEC): it is encoded from its
planes through libjpeg-turbo's YUV entry point (`simplejpeg.encode_jpeg_yuv_planes`), with no
conversion to RGB and back. A limited-range ("TV") frame has its levels stretched to JPEG's full range
through a lookup table (Pillow's `point`: one pass in C); a full-range frame is encoded as it is. A frame
with no decoded picture (only its scaled RGB planes) is encoded from those, at their size.

The measurements behind the choice are in `docs/reports/performance.md` (`tools/bench/snapshots.py`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import av
import numpy as np
import numpy.typing as npt
import simplejpeg
from PIL import Image

from daemon.core.drawing import BOX_WIDTH, class_colour
from daemon.core.frames import Frame
from daemon.core.xp import get_xp, to_host
from daemon.core.yuv import YuvFrame, yuv_frame

U8 = npt.NDArray[np.uint8]
Box = tuple[float, float, float, float]
CROP_MARGIN = 0.25
"""The crop's margin on each side, as a fraction of the box's width (left, right) and height (top, bottom)."""
MIN_MARGIN_PX = 8

_LUMA = np.clip(np.round((np.arange(256) - 16) * 255 / 219), 0, 255).astype(np.uint8).tolist()
_CHROMA = np.clip(np.round((np.arange(256) - 128) * 255 / 224 + 128), 0, 255).astype(np.uint8).tolist()


def _stretch(plane: U8, table: list[int]) -> U8:
    """`plane` through a 256-entry lookup table, as a new writable array (Pillow's `point`, in C:
    3.5 times faster than `np.take` here, `tools/bench/snapshots.py`)."""
    out = np.asarray(Image.fromarray(plane).point(table))
    return out if out.flags.writeable else np.array(out)


@dataclass(frozen=True, slots=True)
class Picture:
    """An image as planes on the host: YUV 4:2:0 (`y`, `u`, `v`; `full_range`) or packed RGB (`rgb`).

    `scale` maps camera pixels to this picture's pixels (1.0 for the decoded frame)."""

    width: int
    height: int
    y: U8 | None = None
    u: U8 | None = None
    v: U8 | None = None
    rgb: U8 | None = None
    full_range: bool = True
    scale_x: float = 1.0
    scale_y: float = 1.0


def decoded_of(frame: Frame) -> Any | None:
    """The decoded frame behind `frame`: `Frame.decoded` (the device path: an `av.VideoFrame`, or a
    host `YuvFrame` from a decoder process), else the `av.VideoFrame` its
    scaler was bound to (the CPU path's `pixels` is `partial(scale, vframe, letterbox)`); None when
    the frame holds only planes."""
    if frame.decoded is not None:
        return frame.decoded
    pixels = frame.pixels
    if isinstance(pixels, functools.partial) and pixels.args and isinstance(pixels.args[0], av.VideoFrame):
        return pixels.args[0]
    return None


def picture_of(frame: Frame) -> Picture:
    """The host picture of `frame` (in the encoder's thread: a device frame is copied to the host here)."""
    vframe = decoded_of(frame)
    if vframe is None:
        r, g, b = frame.planes
        rgb = np.dstack((r, g, b))
        lb = frame.letterbox
        return Picture(lb.new_w, lb.new_h, rgb=rgb, scale_x=lb.new_w / lb.src_w, scale_y=lb.new_h / lb.src_h)
    if isinstance(vframe, YuvFrame):  # a decoder process's YUV slot (lanes on the device): host I420 planes
        yuv = vframe
    elif vframe.format.name == "cuda":
        on_device = yuv_frame(vframe, get_xp("cuda"))
        yuv = YuvFrame(
            on_device.width,
            on_device.height,
            to_host(on_device.y),
            to_host(on_device.u),
            None,
            full_range=on_device.full_range,
        )
    else:
        yuv = yuv_frame(vframe, np)
    u, v = yuv.chroma_planes()
    return Picture(yuv.width, yuv.height, y=yuv.y[: yuv.height, : yuv.width], u=u, v=v, full_range=yuv.full_range)


def crop_rect(box: Box, width: int, height: int) -> tuple[int, int, int, int]:
    """The part's box grown by `CROP_MARGIN` (at least `MIN_MARGIN_PX`) on each side, inside the
    frame, with an even origin and even size where the frame allows (4:2:0 chroma): x0, y0, x1, y1."""
    x1, y1, x2, y2 = box
    mx = max(MIN_MARGIN_PX, CROP_MARGIN * (x2 - x1))
    my = max(MIN_MARGIN_PX, CROP_MARGIN * (y2 - y1))
    left = max(0, int(np.floor(x1 - mx)))
    top = max(0, int(np.floor(y1 - my)))
    right = min(width, int(np.ceil(x2 + mx)))
    bottom = min(height, int(np.ceil(y2 + my)))
    left, top = left - left % 2, top - top % 2
    right = min(width, right + right % 2)
    bottom = min(height, bottom + bottom % 2)
    if right <= left or bottom <= top:  # a degenerate box: the whole frame
        return 0, 0, width, height
    return left, top, right, bottom


def ycbcr(rgb: tuple[int, int, int]) -> tuple[int, int, int]:
    """Full-range BT.601 (JPEG's) Y, Cb, Cr of an RGB colour."""
    r, g, b = rgb
    y = 0.299 * r + 0.587 * g + 0.114 * b
    return round(y), round(128 + (b - y) / 1.772), round(128 + (r - y) / 1.402)


def _outline(plane: U8, rect: tuple[int, int, int, int], width: int, value: int | tuple[int, ...]) -> None:
    """Draw a rectangle's outline, `width` pixels thick inside `rect` (x0, y0, x1, y1), clipped to `plane`."""
    h, w = plane.shape[:2]
    x0, y0 = max(0, rect[0]), max(0, rect[1])
    x1, y1 = min(w, rect[2]), min(h, rect[3])
    if x1 <= x0 or y1 <= y0:
        return
    plane[y0 : min(y1, y0 + width), x0:x1] = value
    plane[max(y0, y1 - width) : y1, x0:x1] = value
    plane[y0:y1, x0 : min(x1, x0 + width)] = value
    plane[y0:y1, max(x0, x1 - width) : x1] = value


def render(picture: Picture, box: Box | None, cls: int, *, crop: bool, draw_box: bool, quality: int) -> bytes:
    """The JPEG of `picture`: cropped to `box` with a margin when `crop` (the whole picture when there is
    no box), the box outlined in class `cls`'s colour when `draw_box`."""
    w, h = picture.width, picture.height
    local = None if box is None else _scaled(box, picture)
    x0, y0, x1, y1 = crop_rect(local, w, h) if crop and local is not None else (0, 0, w, h)
    outline = None
    if draw_box and local is not None:
        outline = (round(local[0]) - x0, round(local[1]) - y0, round(local[2]) - x0, round(local[3]) - y0)
    colour = class_colour(cls)
    if picture.rgb is not None:
        rgb = picture.rgb[y0:y1, x0:x1]
        if outline is not None:
            rgb = np.array(rgb)
            _outline(rgb, outline, BOX_WIDTH, colour)
        return bytes(simplejpeg.encode_jpeg(np.ascontiguousarray(rgb), quality, "RGB", "420"))
    assert picture.y is not None and picture.u is not None and picture.v is not None
    y = picture.y[y0:y1, x0:x1]
    u = picture.u[y0 // 2 : (y1 + 1) // 2, x0 // 2 : (x1 + 1) // 2]
    v = picture.v[y0 // 2 : (y1 + 1) // 2, x0 // 2 : (x1 + 1) // 2]
    if not picture.full_range:  # new arrays: the decoder's planes are never written
        y, u, v = _stretch(y, _LUMA), _stretch(u, _CHROMA), _stretch(v, _CHROMA)
    elif outline is not None:
        y, u, v = np.array(y), np.array(u), np.array(v)
    if outline is not None:
        luma, cb, cr = ycbcr(colour)
        _outline(y, outline, BOX_WIDTH, luma)
        half = (outline[0] // 2, outline[1] // 2, (outline[2] + 1) // 2, (outline[3] + 1) // 2)
        _outline(u, half, (BOX_WIDTH + 1) // 2, cb)
        _outline(v, half, (BOX_WIDTH + 1) // 2, cr)
    return bytes(simplejpeg.encode_jpeg_yuv_planes(y, u, v, quality))


def _scaled(box: Box, picture: Picture) -> Box:
    sx, sy = picture.scale_x, picture.scale_y
    return box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy


__all__ = ["Picture", "crop_rect", "decoded_of", "picture_of", "render"]
