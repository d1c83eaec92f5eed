"""PyAV helpers for the camera sources: decoder setup, error reasons, scaling for a model."""

from __future__ import annotations

import threading
from collections import OrderedDict

import av
import av.error
import av.video
import numpy as np
from av.video.reformatter import VideoReformatter
from av.video.stream import VideoStream

from daemon.core.frames import Letterbox, RGBPlanes
from daemon.core.redaction import SECRETS
from daemon.core.yuv import AVCOL_RANGE_JPEG, AVCOL_RANGE_MPEG, AVCOL_SPC_BT470BG, AVCOL_SPC_BT709, YuvFrame


class ConnectionLostError(Exception):
    """Ends the current connection; `reason` becomes the camera_down detail."""

    def __init__(self, reason: str, *, stalled: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.stalled = stalled


def error_text(exc: BaseException) -> str:
    """An error's message: FFmpeg's own text for an FFmpegError (its `str` appends the URL),
    else `str(exc)`; the class name when that is empty. Not scrubbed."""
    if isinstance(exc, av.error.FFmpegError):
        return exc.strerror or type(exc).__name__
    return str(exc) or type(exc).__name__


def describe_error(exc: BaseException, *, opened: bool) -> str:
    """A short, secret-free reason for a camera_down event (FFmpeg messages can hold the URL)."""
    if isinstance(exc, av.error.ExitError | TimeoutError):
        return "read timeout" if opened else "open timeout"
    text = error_text(exc)
    return SECRETS.scrub(text[:1].lower() + text[1:])


def set_decoder_threads(stream: VideoStream, threads: int) -> None:
    """FFmpeg decoder threads for `stream` (0: FFmpeg's choice); before the first decode.

    One thread costs the least CPU in total: an IP camera's H.264 is one slice per frame, so
    slice threads have nothing to share, and frame threads add a frame of latency per thread.
    """
    context = stream.codec_context
    if not context.is_open:  # PyAV opens it at the first decode; a set after that would raise
        context.thread_count = threads


_GBRP_TO_RGB = (2, 0, 1)
"""FFmpeg's planar `gbrp` keeps G, B, R in planes 0, 1, 2."""

_REFORMATTERS_PER_THREAD = 4
"""Scaler contexts a thread keeps, one per source geometry (a worker serving 720p and 1080p
cameras on the 800 model switches between two); the least recently used goes beyond that."""

_Geometry = tuple[int, int, str, int, int]
_local = threading.local()


def _reformatter(key: _Geometry) -> VideoReformatter:
    """This thread's scaler for one source geometry, made on first use and kept.

    `VideoFrame.reformat` builds a scaler for each frame and frees it with the frame, and with
    PyAV's default threads each scaler started and joined a slice thread per core: on 640x480
    that cost 5-8 times the conversion itself, and the free landed on whichever thread dropped
    the frame last (the event loop). A scaler is not thread-safe, so each thread has its own.
    """
    cache: OrderedDict[_Geometry, VideoReformatter] | None = getattr(_local, "reformatters", None)
    if cache is None:
        cache = _local.reformatters = OrderedDict()
    reformatter = cache.get(key)
    if reformatter is None:
        reformatter = cache[key] = VideoReformatter()
        while len(cache) > _REFORMATTERS_PER_THREAD:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return reformatter


def scale(vframe: av.VideoFrame, letterbox: Letterbox) -> RGBPlanes:
    """The frame as R, G, B planes at the letterbox content size, scaled by swscale.

    Planes are the model's layout, so the worker fills the batch tensor without a transpose.
    When scaling, swscale then filters in RGB, not in YUV: a level or two apart from packed
    RGB, and the closer of the two to the source picture scaled.

    One swscale thread (`threads=1`): the caller is a worker that already has its core, and
    PyAV's default (one slice thread per core, since PyAV 17) made each conversion wake the
    other core and cost more CPU in total. With the scaler kept per thread and the planes left
    where swscale wrote them, conversion, fill and freeing the frame cost 1.6 ms of CPU per
    640x480 frame against 3.3 ms for PyAV's default reformat and a copy, 4.0 against 7.0 ms for
    1280x720 to 800x450, with malloc tuned as the daemon tunes it (`tools/bench/preprocess.py`).
    """
    shrink = letterbox.new_w < vframe.width or letterbox.new_h < vframe.height
    w, h = letterbox.new_w, letterbox.new_h
    reformatter = _reformatter((vframe.width, vframe.height, vframe.format.name, w, h))
    gbr = reformatter.reformat(
        vframe, width=w, height=h, format="gbrp", interpolation="AREA" if shrink else "BILINEAR", threads=1
    )
    return rgb_planes(gbr)


def scale_yuv(yuv: YuvFrame, letterbox: Letterbox) -> RGBPlanes:
    """`scale` for a frame held as its host I420 planes (a decoder process's YUV slot): the planes
    rebuilt into one `yuv420p` frame (a copy; even sizes only), tagged with the frame's matrix and
    range, then scaled as the CPU path scales a decoded frame. For the host paths of lanes on the
    device (a breaker's CPU fallback, the live view), which the device's letterbox otherwise spares."""
    if yuv.v is None or yuv.width % 2 or yuv.height % 2:
        kind = "NV12" if yuv.v is None else "I420"
        raise ValueError(f"a {yuv.width}x{yuv.height} {kind} frame: even-sized I420 only")
    w, h = yuv.width, yuv.height
    u, v = yuv.chroma_planes()
    packed = np.concatenate((yuv.y[:h, :w].reshape(-1), u.reshape(-1), v.reshape(-1))).reshape(h * 3 // 2, w)
    vframe = av.VideoFrame.from_ndarray(packed, format="yuv420p")
    vframe.colorspace = AVCOL_SPC_BT709 if yuv.matrix == "bt709" else AVCOL_SPC_BT470BG
    vframe.color_range = AVCOL_RANGE_JPEG if yuv.full_range else AVCOL_RANGE_MPEG
    return scale(vframe, letterbox)


def rgb_planes(gbr: av.VideoFrame) -> RGBPlanes:
    """A `gbrp` frame's planes in R, G, B order: H x W views of FFmpeg's padded planes, no copy.

    Each view keeps the frame alive. Not copying matters more than it looks: `tune_malloc` maps
    every block over 256 KiB afresh, so a 3 x H x W copy of a 640x480 frame cost 225 page faults,
    and with them 1.0 ms of the 2.6 ms a worker spent on each frame's conversion and fill.
    """
    w, h = gbr.width, gbr.height
    r, g, b = (
        np.frombuffer(memoryview(plane), dtype=np.uint8).reshape(h, plane.line_size)[:, :w]
        for plane in (gbr.planes[index] for index in _GBRP_TO_RGB)
    )
    return r, g, b
