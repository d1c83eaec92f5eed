"""One GigE Vision camera's connections through Aravis: open, configure, stream, hand frames on.

Policies (the lifecycle around them, backoff and status events, is `CameraSource`'s):
- Open: `Aravis.Camera.new(<device>)` (Aravis' own control timeouts, about 2.5 s for a camera that
  does not answer), then `[cameras.gige]` (`features.apply_settings`), then `buffers` frame
  buffers and acquisition. Every reconnect opens and configures the camera again.
- `seq` counts camera frames from 0 in each connection, by block id (`timing.FrameIds`): a frame
  the camera sent that never arrived leaves a gap and is counted as dropped (`frame_lost`); a frame
  that arrived incomplete (packets the resend could not recover) takes its number, is counted
  (`incomplete`), logged at most once per `INCOMPLETE_LOG_S` with the count since the last line,
  and never handed on.
- `captured_ms` is the camera's timestamp on the host's wall clock (`daemon.ingest.capture_clock`;
  a camera without timestamps, 0, gets the arrival time); `captured_mono` the same instant on the
  monotonic clock.
- Hand-off: `consumer.put(wait=False)` (the newest frame wins), the pixels wrapped in an
  `av.VideoFrame` (`pixels`) and converted by swscale in the worker. Frames carry no `decoded`
  planes: on a device lane they take the CPU fill.
- Up: at the first complete frame; a hardware-triggered camera once it acquires (its first frame
  waits for the first part).
- Lost: no frame at all for `read_timeout_s`, no complete frame for `stall_s` (both only where
  frames come steadily: free run or software trigger), or the control channel lost (Aravis'
  heartbeat, any trigger mode). A lost camera's acquisition stop and release (each one more
  timeout against a camera that does not answer) run in a thread of their own, so `camera_down`
  and the next attempt do not wait for them.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Mapping
from functools import partial
from typing import Any

import gi

gi.require_version("Aravis", "0.8")
import structlog  # noqa: E402
from gi.repository import Aravis, GLib  # noqa: E402

from daemon.config.cameras import CameraConfig  # noqa: E402
from daemon.core.clock import time_ms  # noqa: E402
from daemon.core.frames import Frame  # noqa: E402
from daemon.core.ratelimit import RateLimited  # noqa: E402
from daemon.ingest.capture_clock import CaptureClock  # noqa: E402
from daemon.ingest.decoding import ConnectionLostError, scale  # noqa: E402
from daemon.ingest.gige.features import Refused, apply_settings  # noqa: E402
from daemon.ingest.gige.pixels import UnsupportedPixelFormatError, bins, layout_of, video_frame  # noqa: E402
from daemon.ingest.gige.timing import FrameIds  # noqa: E402
from daemon.ingest.link import LinkParts  # noqa: E402
from daemon.ingest.reader import FPS_SMOOTHING, Connection, Outcome  # noqa: E402

log = structlog.get_logger("beltsight.source")

POLL_S = 0.1
"""Longest wait for a buffer before stop, timeouts and the control channel are checked again."""
INCOMPLETE_LOG_S = 10.0
"""Incomplete frames are logged at most once per this many seconds (each one is counted)."""
_DISCOVERY = threading.Lock()
"""Aravis' device list is one per process: one camera thread lists devices at a time."""


class _Session:
    """One open camera: its stream, and whether its control channel was lost (set from Aravis' thread)."""

    def __init__(self, camera: Any, stream: Any) -> None:
        self.camera = camera
        self.stream = stream
        self.answering = True
        """False once the camera stopped answering: closing it then sends it nothing."""
        self.control_lost = threading.Event()
        self.handler = camera.get_device().connect("control-lost", lambda _device: self.control_lost.set())

    def close(self, *, answering: bool) -> None:
        """Stop acquisition and drop the camera (Aravis releases it); errors from a gone camera are expected."""
        if answering:
            try:
                self.camera.stop_acquisition()
            except GLib.Error as exc:
                log.debug("gige_close_error", error=exc.message)
        self.camera.get_device().disconnect(self.handler)
        self.stream = None
        self.camera = None


class GigeLink:
    """A `gige://` camera's connections (`daemon.ingest.link.Link`)."""

    def __init__(self, camera: CameraConfig, parts: LinkParts) -> None:
        self.camera = camera
        self._cfg = camera.gige_settings
        self._parts = parts
        self._clock = parts.clock
        self._log_limit = RateLimited(INCOMPLETE_LOG_S, parts.clock)
        self._refused: Refused = {}
        self._interval_s: float | None = None
        self.conn: Connection | None = None
        self.frames = 0
        self.last_frame_mono: float | None = None

    @property
    def fps(self) -> float:
        interval = self._interval_s
        return 1.0 / interval if interval else 0.0

    @property
    def expects_frames(self) -> bool:
        return not self._cfg.hardware_trigger

    @property
    def refused(self) -> Mapping[str, Mapping[str, str]]:
        return self._refused

    def end_connection(self) -> None:
        self.conn = None
        self._interval_s = None

    def attempt(self) -> Outcome:
        session = self._open()
        try:
            return self._read(session)
        except GLib.Error as exc:  # a command mid-stream failed: the camera went away under it
            session.answering = False
            raise ConnectionLostError(f"camera error: {exc.message}") from None
        finally:
            if session.answering:
                session.close(answering=True)
            else:  # each command to a camera that does not answer waits out a timeout
                closer = threading.Thread(target=session.close, kwargs={"answering": False}, daemon=True)
                closer.start()

    def _open(self) -> _Session:
        try:
            camera = Aravis.Camera.new(resolve_address(self.camera.gige_device))
        except GLib.Error as exc:
            raise ConnectionLostError(f"cannot open: {exc.message}") from None
        session = _Session(camera, None)
        try:
            self._refused = apply_settings(camera, self._cfg, self.camera.id)
            session.stream = camera.create_stream(None, None)
            payload = camera.get_payload()
            for _ in range(self._cfg.buffers):
                session.stream.push_buffer(Aravis.Buffer.new_allocate(payload))
            camera.start_acquisition()
        except GLib.Error as exc:
            session.close(answering=True)
            raise ConnectionLostError(f"cannot start: {exc.message}") from None
        return session

    def _read(self, session: _Session) -> Outcome:
        now = self._clock.monotonic()
        rate = self._cfg.frame_rate or _read_rate(session.camera)
        conn = Connection(session.camera.get_pixel_format_as_string(), now, now, rate)
        self.conn = conn
        reading = _Reading(FrameIds(), CaptureClock(self.camera.id), now, now + 1.0 / rate)
        if self._cfg.hardware_trigger:  # up once acquiring: the first frame waits for the first part
            _x, _y, width, height = session.camera.get_region()
            self._parts.on_up(width, height, conn, now)
        stop = self._parts.stop
        while not stop.is_set():
            wait_s = POLL_S
            if self._cfg.trigger == "software":
                wait_s = self._software_trigger(session, reading, rate)
            buffer = session.stream.timeout_pop_buffer(int(wait_s * 1e6))
            if buffer is not None:
                try:
                    self._buffer(buffer, conn, reading)
                finally:
                    session.stream.push_buffer(buffer)
            self._check(session, conn, reading)
        if conn.up:
            self._parts.status("camera_down", "stopped")
        return Outcome("stopped", "stopped")

    def _software_trigger(self, session: _Session, reading: _Reading, rate: float) -> float:
        """Trigger the camera when its next frame is due; how long to wait for a buffer meanwhile."""
        now = self._clock.monotonic()
        if now >= reading.next_trigger:
            try:
                session.camera.software_trigger()
            except GLib.Error as exc:
                session.answering = False
                raise ConnectionLostError(f"software trigger failed: {exc.message}") from None
            reading.next_trigger = max(reading.next_trigger + 1.0 / rate, now)
        return max(0.001, min(POLL_S, reading.next_trigger - self._clock.monotonic()))

    def _check(self, session: _Session, conn: Connection, reading: _Reading) -> None:
        if session.control_lost.is_set():
            session.answering = False
            raise ConnectionLostError("control lost (the camera stopped answering)", stalled=False)
        if not self.expects_frames:
            return
        now = self._clock.monotonic()
        silent_s = now - reading.last_any_mono
        if silent_s > self.camera.read_timeout_s:
            session.answering = False  # nothing at all: gone, or its stream cannot reach us
            raise ConnectionLostError(f"stalled {silent_s:.1f}s" if conn.up else "read timeout", stalled=conn.up)
        age = now - conn.last_good_mono
        if age > self.camera.stall_s:
            raise ConnectionLostError(f"stalled {age:.1f}s", stalled=conn.up)

    def _buffer(self, buffer: Any, conn: Connection, reading: _Reading) -> None:
        """Number one buffer by its block id; hand it on when it is a complete image."""
        camera_id = self.camera.id
        metrics = self._parts.metrics
        now = self._clock.monotonic()
        reading.last_any_mono = now
        step = reading.ids.step(buffer.get_frame_id())
        seq = conn.seq + step - 1 if reading.numbered else 0
        reading.numbered = True
        conn.seq = seq + 1
        if step > 1:
            metrics.dropped(camera_id, "frame_lost", step - 1)
            self._note("frame_lost", step - 1, seq)
        status = buffer.get_status()
        if status != Aravis.BufferStatus.SUCCESS or buffer.get_payload_type() != Aravis.BufferPayloadType.IMAGE:
            metrics.dropped(camera_id, "incomplete")
            self._note("incomplete", 1, seq, status=status.value_nick)
            return
        self._deliver(buffer, conn, reading, seq, now)

    def _deliver(self, buffer: Any, conn: Connection, reading: _Reading, seq: int, now: float) -> None:
        try:
            layout = layout_of(buffer.get_image_pixel_format())
        except UnsupportedPixelFormatError as exc:
            raise ConnectionLostError(str(exc)) from None
        width, height = buffer.get_image_width(), buffer.get_image_height()
        camera_ns = buffer.get_timestamp() or None  # 0: the camera has no timestamps
        captured_ms = reading.clock.capture_ns(camera_ns, buffer.get_system_timestamp()) // 1_000_000
        captured_mono = now - (time_ms(self._clock) - captured_ms) / 1000
        self._count(now, conn)
        if not conn.up:
            conn.codec = layout.name
            self._parts.on_up(width, height, conn, now)
        letterbox = self._parts.geometry.letterbox_for(width, height)
        if letterbox is None:
            self._parts.metrics.dropped(self.camera.id, "no_model")
            return
        binned = bins(layout, width, height, letterbox.new_w, letterbox.new_h)
        vframe = video_frame(buffer.get_image_data(), width, height, layout, binned=binned)
        frame = Frame(self.camera.id, seq, captured_ms, captured_mono, letterbox, partial(scale, vframe, letterbox))
        self._parts.consumer.put(frame, wait=False)

    def _count(self, now: float, conn: Connection) -> None:
        self.frames += 1
        self._parts.metrics.frames_decoded.labels(camera=self.camera.id).inc()
        if conn.up and self.last_frame_mono is not None:
            interval = now - self.last_frame_mono
            prev = self._interval_s
            self._interval_s = interval if prev is None else prev + FPS_SMOOTHING * (interval - prev)
        self.last_frame_mono = now
        conn.last_good_mono = now

    def _note(self, reason: str, frames: int, seq: int, status: str | None = None) -> None:
        """Log lost and incomplete frames at most once per `INCOMPLETE_LOG_S` per reason."""
        held = self._log_limit.allow(reason)
        if held is not None:
            log.warning(
                "gige_frames_dropped",
                camera=self.camera.id,
                reason=reason,
                frames=frames,
                seq=seq,
                status=status,
                suppressed=held,
            )


def resolve_address(device: str) -> str:
    """The camera's IP address for `device` (an address, a device id, a serial number or a MAC), as
    Aravis' discovery lists it; the name unchanged where discovery does not find it (Aravis then
    tries it itself). Opening by address works where opening by id does not: a camera found on the
    loopback interface sends nothing to a stream opened by its id."""
    try:
        ipaddress.ip_address(device)
    except ValueError:
        pass
    else:
        return device
    with _DISCOVERY:
        Aravis.update_device_list()
        for i in range(Aravis.get_n_devices()):
            names = (
                Aravis.get_device_id(i),
                Aravis.get_device_serial_nbr(i),
                Aravis.get_device_physical_id(i),
            )
            address = Aravis.get_device_address(i)
            if device in names and address:
                return str(address)
    return device


class _Reading:
    """One connection's frame numbering, clock mapping and timing."""

    def __init__(self, ids: FrameIds, clock: CaptureClock, now: float, next_trigger: float) -> None:
        self.ids = ids
        self.clock = clock
        self.numbered = False
        self.last_any_mono = now
        self.next_trigger = next_trigger


def _read_rate(camera: Any) -> float:
    """The camera's own frame rate (25 where it cannot say)."""
    try:
        rate = float(camera.get_frame_rate())
    except GLib.Error:
        return 25.0
    return rate if rate > 0 else 25.0
