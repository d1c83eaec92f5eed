"""PyAV helpers for the camera sources: decoder setup, error reasons, scaling for a model."""

from __future__ import annotations

import av
import av.error
import av.video
import numpy as np
from av.video.stream import VideoStream

from daemon.frames import Letterbox, RGBImage
from daemon.redaction import SECRETS


class ConnectionLostError(Exception):
    """Ends the current connection; `reason` becomes the camera_down detail."""

    def __init__(self, reason: str, *, stalled: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.stalled = stalled


def describe_error(exc: BaseException, *, opened: bool) -> str:
    """A short, secret-free reason for a camera_down event (FFmpeg messages can hold the URL)."""
    if isinstance(exc, av.error.ExitError | TimeoutError):
        return "read timeout" if opened else "open timeout"
    if isinstance(exc, av.error.FFmpegError):
        text = exc.strerror or type(exc).__name__
    else:
        text = str(exc) or type(exc).__name__
    return SECRETS.scrub(text[:1].lower() + text[1:])


def set_decoder_threads(stream: VideoStream, threads: int) -> None:
    """FFmpeg decoder threads for `stream` (0: FFmpeg's choice); before the first decode.

    One thread costs the least CPU in total: an IP camera's H.264 is one slice per frame, so
    slice threads have nothing to share, and frame threads add a frame of latency per thread.
    """
    context = stream.codec_context
    if not context.is_open:  # PyAV opens it at the first decode; a set after that would raise
        context.thread_count = threads


def scale(vframe: av.VideoFrame, letterbox: Letterbox) -> RGBImage:
    """The frame as RGB at the letterbox content size, scaled by swscale."""
    shrink = letterbox.new_w < vframe.width or letterbox.new_h < vframe.height
    rgb = vframe.reformat(
        width=letterbox.new_w,
        height=letterbox.new_h,
        format="rgb24",
        interpolation="AREA" if shrink else "BILINEAR",
    )
    image: RGBImage = np.ascontiguousarray(rgb.to_ndarray(), dtype=np.uint8)
    return image
