"""RTSP cameras and recorded files through PyAV: open a container, decode it with `FrameReader`.

FFmpeg's errors become `ConnectionLostError`s with secret-free reasons: a read timeout on a
connection that was delivering is a stall, whoever noticed first.
"""

from __future__ import annotations

from collections.abc import Mapping

import av
import av.container
import av.error

from daemon.config.cameras import CameraConfig
from daemon.ingest.decoding import ConnectionLostError, describe_error
from daemon.ingest.hwdecode import HwDecode
from daemon.ingest.link import LinkParts
from daemon.ingest.packet_tap import PacketTap
from daemon.ingest.reader import FrameReader, Outcome


class AvLink:
    """An RTSP camera's or a file's connections (`daemon.ingest.link.Link`)."""

    def __init__(
        self, camera: CameraConfig, parts: LinkParts, hwdecode: HwDecode | None, *, keep_decoded: bool = False
    ) -> None:
        """`hwdecode` (lanes on the device only): open streams for NVDEC and hand each frame's
        decoded planes on (`Frame.decoded`); None keeps the CPU path's `av.open` and frames.
        `keep_decoded` alone: CPU decoding, each frame's decoded planes handed on (a decoder
        process feeding lanes on the device, `daemon.ingest.decoder_proc`)."""
        self.camera = camera
        self._hwdecode = hwdecode
        self._clock = parts.clock
        self.reader = FrameReader(
            camera,
            consumer=parts.consumer,
            geometry=parts.geometry,
            metrics=parts.metrics,
            clock=parts.clock,
            stop=parts.stop,
            on_up=parts.on_up,
            status=parts.status,
            keep_decoded=keep_decoded or hwdecode is not None,
            packets=PacketTap(parts.packets) if parts.packets is not None else None,
        )

    @property
    def frames(self) -> int:
        return self.reader.frames

    @property
    def fps(self) -> float:
        return self.reader.fps

    @property
    def last_frame_mono(self) -> float | None:
        return self.reader.last_frame_mono

    @property
    def expects_frames(self) -> bool:
        return True

    @property
    def refused(self) -> Mapping[str, Mapping[str, str]]:
        return {}

    def attempt(self) -> Outcome:
        opened = False
        try:
            with self._open() as container:
                opened = True
                return self.reader.read(container)
        except (av.error.FFmpegError, OSError, ValueError) as exc:
            conn = self.reader.conn
            if isinstance(exc, av.error.ExitError | TimeoutError) and conn is not None and conn.up:
                # Frames stopped on a working connection: that is a stall, whoever noticed first.
                age = self._clock.monotonic() - conn.last_good_mono
                raise ConnectionLostError(f"stalled {age:.1f}s", stalled=True) from None
            raise ConnectionLostError(describe_error(exc, opened=opened)) from None

    def end_connection(self) -> None:
        self.reader.end_connection()

    def _open(self) -> av.container.InputContainer:
        url = self.camera.effective_url()
        if self.camera.is_file:
            if self._hwdecode is not None:
                return self._hwdecode.open(url, camera=self.camera.id)
            return av.open(url, mode="r")
        read_timeout_us = str(int(self.camera.read_timeout_s * 1e6))
        options = {
            "rtsp_transport": self.camera.transport,
            "timeout": read_timeout_us,  # `stimeout` is ignored by FFmpeg >= 5
            "analyzeduration": "0",
            "probesize": "32",
        }
        if self._hwdecode is not None:
            timeout = (self.camera.open_timeout_s, self.camera.read_timeout_s)
            return self._hwdecode.open(url, options=options, timeout=timeout, camera=self.camera.id)
        return av.open(url, mode="r", options=options, timeout=(self.camera.open_timeout_s, self.camera.read_timeout_s))
