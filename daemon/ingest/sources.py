"""One PyAV reader thread per camera: connect, decode, route to a model, hand off.

The thread never ends the daemon: every camera-level fault (refused, 401/404, read timeout,
server gone, corrupt stream, a bug in this module) ends one connection, is reported as a status
event, and is retried with capped exponential backoff and jitter, forever, until `stop()`.
"""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass, replace
from functools import partial
from typing import Literal, Protocol

import av
import av.container
import av.error
import av.video
import structlog
from av.video.stream import VideoStream

from daemon.config.settings import CameraConfig
from daemon.core.backoff import Backoff
from daemon.core.frames import Frame, FrameConsumer, Router, StatusEvent, StatusListener
from daemon.core.log_repeat import RepeatSummary
from daemon.core.metrics import Metrics
from daemon.core.redaction import SECRETS
from daemon.ingest.decoding import ConnectionLostError, describe_error, scale, set_decoder_threads
from daemon.ingest.geometry import SourceGeometry
from daemon.ingest.hwdecode import HwDecode

log = structlog.get_logger("beltsight.source")

MAX_CONSECUTIVE_DECODE_ERRORS = 30
"""More decode errors than this in a row (no good frame between them): reconnect."""
FPS_SMOOTHING = 0.1
"""Weight of the newest inter-frame interval in the fps estimate (exponential moving average)."""
MAX_PACING_LAG_S = 1.0
"""A realtime file replay that falls further behind than this re-anchors instead of bursting."""

State = Literal["connecting", "up", "stalled", "down"]


class Clock(Protocol):
    """The two clocks a source reads (the `time` module satisfies it)."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...


@dataclass(frozen=True, slots=True)
class _Outcome:
    kind: Literal["failed", "loop", "finished", "stopped"]
    reason: str
    stalled: bool = False


@dataclass(slots=True)
class _Connection:
    """Per-connection counters: everything here starts again on a reconnect or a file loop."""

    codec: str
    opened_mono: float
    last_good_mono: float
    nominal_fps: float
    seq: int = 0
    decode_errors: int = 0
    pace_anchor: float | None = None
    up: bool = False


class CameraSource:
    """Reads one camera (RTSP or a local file) in its own thread and hands frames to a consumer.

    Policies:
    - Hand-off: live cameras and realtime file replays use `consumer.put(wait=False)` (latest
      frame wins, the consumer counts what it replaces). `realtime=false` file replays use
      `put(wait=True)`: every frame is processed and `seq` equals the frame index in the file.
    - `seq` counts decoded frames from 0 in each connection; a reconnect or a file loop (a new
      pass) starts again at 0. Frames whose resolution routes to no model are counted as
      dropped (`no_model`) and still take a seq number.
    - The letterbox (content size for the routed model) comes from `SourceGeometry`, once per
      resolution; a resolution change is logged, reported and routed again. The frame goes on
      in YUV with `decoding.scale` bound to it: scaling and conversion (swscale, AREA when
      shrinking, BILINEAR when enlarging) happen in the worker, only for frames a batch takes.
    - Stall: no decoded frame for `stall_s` on an open connection (packets that all fail to
      decode, or a frozen server), or a read timeout on a connection that was delivering =>
      `camera_stalled`, then `camera_down`, reconnect. PyAV's read timeout surfaces a frozen
      server after about 2 x `read_timeout_s`; meanwhile `state` already reports "stalled" once
      the last frame is older than `stall_s`, even while the read is still blocked.
    - Reconnect forever with `Backoff` (full jitter; the count resets after a healthy period).
      `camera_down` is emitted when a working camera fails, or when the failure reason changes
      while it stays down (a dead camera does not flood the events stream); every attempt is
      counted in `camera_reconnects`, and logged as `camera_down` per reason and backoff step
      (then every few minutes at the cap, with `suppressed` attempts counted: daemon.core.log_repeat).
    - A file without `loop` ends the thread at EOF (state "down", `finished` true); with `loop`
      it starts a new pass at once.
    - Nothing leaves this class with a password in it: URLs through `safe_url()`, error texts
      through `SECRETS.scrub()`.
    """

    def __init__(
        self,
        camera: CameraConfig,
        *,
        consumer: FrameConsumer,
        route: Router,
        on_status: StatusListener,
        metrics: Metrics,
        clock: Clock = time,
        backoff: Backoff | None = None,
        hwdecode: HwDecode | None = None,
    ) -> None:
        """`hwdecode` (lanes on the device only): open streams for NVDEC and hand each frame's
        decoded planes on (`Frame.decoded`); None keeps the CPU path's `av.open` and frames."""
        self.camera = camera
        self._hwdecode = hwdecode
        self._consumer = consumer
        self._on_status = on_status
        self._metrics = metrics
        self._clock = clock
        self._backoff = backoff if backoff is not None else Backoff(cap_s=camera.reconnect_max_s)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._state: State = "connecting"
        self.geometry = SourceGeometry(camera.id, route, self._status)
        self._last_down_reason: str | None = None
        self._down_log = RepeatSummary(clock=self._clock.monotonic)
        self._frame_interval_s: float | None = None
        self._conn: _Connection | None = None
        self.frames = 0
        """Frames decoded since start (all connections)."""
        self.last_frame_mono: float | None = None
        self.finished = False
        """A file source without `loop` reached its end."""

    # ------------------------------------------------------------------ lifecycle and health
    @property
    def camera_id(self) -> str:
        return self.camera.id

    @property
    def state(self) -> State:
        last = self.last_frame_mono
        if self._state == "up" and last is not None and self._clock.monotonic() - last > self.camera.stall_s:
            return "stalled"
        return self._state

    @property
    def width(self) -> int | None:
        return self.geometry.width

    @property
    def height(self) -> int | None:
        return self.geometry.height

    @property
    def size_text(self) -> str:
        """The last frame size as "WxH" ("unknown" before the first frame)."""
        return self.geometry.size_text

    @property
    def fps(self) -> float:
        """Smoothed decode rate of the current connection (0 before two frames)."""
        interval = self._frame_interval_s
        return 1.0 / interval if interval else 0.0

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"source {self.camera_id} already started")
        self._thread = threading.Thread(target=self._run, name=f"source-{self.camera_id}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end: noticed at the next packet, within ~2 x `read_timeout_s` on a
        frozen server, or `open_timeout_s` while connecting."""
        self._stop.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread; True when it has ended."""
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # ------------------------------------------------------------------ the thread
    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    if not self._cycle():
                        break
                except Exception as exc:  # a bug outside one connection: still never give up
                    self._crashed(exc)
                    self._stop.wait(self._backoff.cap_s)
        finally:
            self._state = "down"
            self._metrics.camera_up.labels(camera=self.camera_id).set(0)
            log.info("camera_source_stopped", camera=self.camera_id)

    def _cycle(self) -> bool:
        """One connection and what follows it; False when the thread should end."""
        try:
            outcome = self._attempt()
        except Exception as exc:
            outcome = self._crashed(exc)
        if outcome.kind == "failed":
            self._wait_before_retry(outcome)
        elif outcome.kind == "finished":
            self.finished = True
            self._status("camera_down", outcome.reason)
            log.info("camera_finished", camera=self.camera_id, reason=outcome.reason)
        return outcome.kind in ("failed", "loop")

    def _crashed(self, exc: Exception) -> _Outcome:
        log.error(
            "camera_thread_crashed",
            camera=self.camera_id,
            error=SECRETS.scrub(f"{type(exc).__name__}: {exc}"),
            traceback=SECRETS.scrub("".join(traceback.format_exception(exc))),
        )
        return _Outcome("failed", f"internal error ({type(exc).__name__})")

    def _wait_before_retry(self, outcome: _Outcome) -> None:
        if outcome.stalled:
            self._state = "stalled"
            self._status("camera_stalled", outcome.reason.replace("stalled", "no frame for", 1))
        self._state = "down"
        if outcome.reason != self._last_down_reason:
            self._status("camera_down", outcome.reason)
            self._last_down_reason = outcome.reason
        step_s = self._backoff.ceiling_s()
        delay_s = self._backoff.failed()
        suppressed = self._down_log.failed(outcome.reason, step_s)
        if suppressed is not None:  # each reason and backoff step, not every attempt
            log.warning(
                "camera_down",
                camera=self.camera_id,
                reason=outcome.reason,
                failures=self._backoff.failures,
                retry_in_s=round(delay_s, 2),
                suppressed=suppressed,
            )
        if not self._stop.wait(delay_s):
            self._metrics.camera_reconnects.labels(camera=self.camera_id).inc()

    def _attempt(self) -> _Outcome:
        """One connection (or one pass over a file), from open to its end."""
        self._state = "connecting"
        if not self._down_log.quiet:
            log.info("camera_connecting", camera=self.camera_id, url=self.camera.safe_url())
        opened = False
        try:
            with self._open() as container:
                opened = True
                return self._read(container)
        except ConnectionLostError as exc:
            return _Outcome("failed", exc.reason, exc.stalled)
        except (av.error.FFmpegError, OSError, ValueError) as exc:
            conn = self._conn
            if isinstance(exc, av.error.ExitError | TimeoutError) and conn is not None and conn.up:
                # Frames stopped on a working connection: that is a stall, whoever noticed first.
                age = self._clock.monotonic() - conn.last_good_mono
                return _Outcome("failed", f"stalled {age:.1f}s", stalled=True)
            return _Outcome("failed", describe_error(exc, opened=opened))
        finally:
            self._conn = None
            self._consumer.discard(self.camera_id)
            self._metrics.camera_up.labels(camera=self.camera_id).set(0)
            self._frame_interval_s = None

    def _open(self) -> av.container.InputContainer:
        url = self.camera.effective_url()
        if self.camera.is_file:
            if self._hwdecode is not None:
                return self._hwdecode.open(url, camera=self.camera_id)
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
            return self._hwdecode.open(url, options=options, timeout=timeout, camera=self.camera_id)
        return av.open(url, mode="r", options=options, timeout=(self.camera.open_timeout_s, self.camera.read_timeout_s))

    def _read(self, container: av.container.InputContainer) -> _Outcome:
        if not container.streams.video:
            raise ConnectionLostError("no video stream")
        stream = container.streams.video[0]
        set_decoder_threads(stream, self.camera.decode_threads)
        now = self._clock.monotonic()
        rate = stream.average_rate or stream.guessed_rate
        conn = _Connection(stream.codec_context.name, now, now, float(rate) if rate else 25.0)
        self._conn = conn
        for packet in container.demux(stream):
            for vframe in self._decode(packet, conn):
                if not self._handle(vframe, conn):
                    return self._stopped(conn)
            if self._stop.is_set():
                return self._stopped(conn)
            self._check_stall(conn)
        if self.camera.is_file:
            return _Outcome("loop" if self.camera.loop else "finished", "end of file")
        raise ConnectionLostError("stream ended")

    def _stopped(self, conn: _Connection) -> _Outcome:
        if conn.up:
            self._status("camera_down", "stopped")
        return _Outcome("stopped", "stopped")

    def _check_stall(self, conn: _Connection) -> None:
        age = self._clock.monotonic() - conn.last_good_mono
        if age > self.camera.stall_s:
            raise ConnectionLostError(f"stalled {age:.1f}s", stalled=conn.up)

    def _decode(self, packet: av.Packet[VideoStream], conn: _Connection) -> list[av.VideoFrame]:
        """Decode one packet; corrupt data is counted and skipped, persistent garbage reconnects."""
        try:
            frames = packet.decode()
        except av.error.EOFError:
            return []
        except av.error.FFmpegError as exc:
            self._metrics.corrupt_packets.labels(camera=self.camera_id).inc()
            conn.decode_errors += 1
            log.debug("camera_decode_error", camera=self.camera_id, error=describe_error(exc, opened=True))
            if conn.decode_errors > MAX_CONSECUTIVE_DECODE_ERRORS:
                reason = f"corrupt stream ({conn.decode_errors} decode errors in a row)"
                raise ConnectionLostError(reason) from None
            return []
        if frames:
            conn.decode_errors = 0
        return frames

    # ------------------------------------------------------------------ per frame
    def _handle(self, vframe: av.VideoFrame, conn: _Connection) -> bool:
        """Route and hand off one decoded frame (the worker scales it); False once stop was requested."""
        if self.camera.is_file and self.camera.realtime and not self._pace(vframe, conn):
            return False
        captured_mono = self._clock.monotonic()
        captured_ms = int(self._clock.time() * 1000)
        seq = conn.seq
        conn.seq += 1
        self._count_frame(captured_mono, conn)
        if not conn.up:
            self._on_up(vframe, conn, captured_mono)
        letterbox = self.geometry.letterbox_for(vframe.width, vframe.height)
        if letterbox is None:
            self._metrics.dropped(self.camera_id, "no_model")
            return True
        frame = Frame(self.camera_id, seq, captured_ms, captured_mono, letterbox, partial(scale, vframe, letterbox))
        if self._hwdecode is not None:  # the device path letterboxes the decoded planes itself
            frame = replace(frame, decoded=vframe)
        if self.camera.is_file and not self.camera.realtime:
            return self._consumer.put(frame, wait=True, stop=self._stop)
        self._consumer.put(frame, wait=False)
        return True

    def _pace(self, vframe: av.VideoFrame, conn: _Connection) -> bool:
        """Sleep until this frame's time in the file; False when stop was requested."""
        offset_s = vframe.time if vframe.time is not None else conn.seq / conn.nominal_fps
        now = self._clock.monotonic()
        if conn.pace_anchor is None:
            conn.pace_anchor = now - offset_s
        delay_s = conn.pace_anchor + offset_s - now
        if delay_s < -MAX_PACING_LAG_S:
            conn.pace_anchor = now - offset_s
        return delay_s <= 0 or not self._stop.wait(delay_s)

    def _count_frame(self, now: float, conn: _Connection) -> None:
        self.frames += 1
        self._metrics.frames_decoded.labels(camera=self.camera_id).inc()
        if conn.seq > 1 and self.last_frame_mono is not None:
            interval = now - self.last_frame_mono
            prev = self._frame_interval_s
            self._frame_interval_s = interval if prev is None else prev + FPS_SMOOTHING * (interval - prev)
        self.last_frame_mono = now
        conn.last_good_mono = now

    def _on_up(self, vframe: av.VideoFrame, conn: _Connection, now: float) -> None:
        conn.up = True
        self._state = "up"
        self._last_down_reason = None
        self._down_log.succeeded()
        self._backoff.succeeded()
        self._metrics.camera_up.labels(camera=self.camera_id).set(1)
        detail = f"{vframe.width}x{vframe.height} {conn.codec}"
        log.info(
            "camera_up",
            camera=self.camera_id,
            size=f"{vframe.width}x{vframe.height}",
            codec=conn.codec,
            connect_s=round(now - conn.opened_mono, 3),
        )
        self._status("camera_up", detail)

    def _status(self, kind: str, detail: str) -> None:
        at_ms = int(self._clock.time() * 1000)
        event = StatusEvent(kind=kind, detail=SECRETS.scrub(detail), camera_id=self.camera_id, at_ms=at_ms)
        try:
            self._on_status(event)
        except Exception as exc:  # a faulty listener must not take the camera down
            log.error("status_listener_failed", camera=self.camera_id, kind=kind, error=type(exc).__name__)
