"""One reader thread per camera (RTSP, a file or GigE Vision): connect, read, and reconnect, forever.

The thread never ends the daemon: every camera-level fault (refused, 401/404, read timeout,
server gone, corrupt stream, a bug in this module) ends one connection, is reported as a status
event, and is retried with capped exponential backoff and jitter, forever, until `stop()`. One
connection is read by the camera kind's link (`daemon.ingest.kinds.make_link`: PyAV's
`daemon.ingest.reader.FrameReader` for RTSP and files, Aravis for `gige://`).
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Mapping
from typing import Literal

import structlog

from daemon.config.cameras import CameraConfig
from daemon.core.backoff import Backoff
from daemon.core.clock import SYSTEM_CLOCK, Clock, time_ms
from daemon.core.frames import FrameConsumer, Router, StatusEvent
from daemon.core.log_repeat import RepeatSummary
from daemon.core.metrics import Metrics
from daemon.core.packets import PacketRing
from daemon.core.redaction import SECRETS
from daemon.core.status import StatusCallback
from daemon.core.status_kinds import StatusKind
from daemon.ingest.decoders import DecoderPool
from daemon.ingest.decoding import ConnectionLostError
from daemon.ingest.geometry import SourceGeometry
from daemon.ingest.hwdecode import HwDecode
from daemon.ingest.kinds import make_link
from daemon.ingest.link import LinkParts
from daemon.ingest.reader import Connection, Outcome

log = structlog.get_logger("beltsight.source")

State = Literal["connecting", "up", "stalled", "down"]


class CameraSource:
    """Reads one camera (RTSP, a local file or GigE Vision) in its own thread and hands frames to a consumer.

    Policies (the per-frame ones, hand-off, `seq`, letterbox, corrupt packets: `FrameReader`):
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
        on_status: StatusCallback,
        metrics: Metrics,
        clock: Clock = SYSTEM_CLOCK,
        backoff: Backoff | None = None,
        hwdecode: HwDecode | None = None,
        decoders: DecoderPool | None = None,
        packets: PacketRing | None = None,
    ) -> None:
        """`hwdecode` (lanes on the device only): open streams for NVDEC and hand each frame's
        decoded planes on (`Frame.decoded`); None keeps the CPU path's `av.open` and frames.
        `decoders` (`[engine] processes` above 1): an RTSP camera's or a file's connections are read
        in a decoder process (`daemon.ingest.decoders`); this thread keeps the lifecycle.
        `packets` ([clips]): the ring the reader keeps the camera's encoded packets in (a camera
        with one is read in this process, where the clip recorder is)."""
        self.camera = camera
        self._consumer = consumer
        self._on_status = on_status
        self._metrics = metrics
        self._clock = clock
        self._backoff = backoff if backoff is not None else Backoff(cap_s=camera.reconnect_max_s, clock=clock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._state: State = "connecting"
        self.geometry = SourceGeometry(camera.id, route, self._status)
        parts = LinkParts(consumer, self.geometry, metrics, clock, self._stop, self._on_up, self._status, packets)
        self._link = make_link(camera, parts, hwdecode, decoders)
        self._last_down_reason: str | None = None
        self._down_log = RepeatSummary(clock=self._clock)
        self.finished = False
        """A file source without `loop` reached its end."""

    # ------------------------------------------------------------------ lifecycle and health
    @property
    def camera_id(self) -> str:
        return self.camera.id

    @property
    def state(self) -> State:
        last = self._link.last_frame_mono
        silent = last is not None and self._clock.monotonic() - last > self.camera.stall_s
        if self._state == "up" and silent and self._link.expects_frames:
            return "stalled"
        return self._state

    @property
    def frames(self) -> int:
        """Frames decoded since start (all connections)."""
        return self._link.frames

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
        return self._link.fps

    @property
    def refused(self) -> Mapping[str, Mapping[str, str]]:
        """Camera settings the camera refused at its latest open (GigE): feature -> wanted, kept."""
        return self._link.refused

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

    def _crashed(self, exc: Exception) -> Outcome:
        log.error(
            "camera_thread_crashed",
            camera=self.camera_id,
            error=SECRETS.scrub(f"{type(exc).__name__}: {exc}"),
            traceback=SECRETS.scrub("".join(traceback.format_exception(exc))),
        )
        return Outcome("failed", f"internal error ({type(exc).__name__})")

    def _wait_before_retry(self, outcome: Outcome) -> None:
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

    def _attempt(self) -> Outcome:
        """One connection (or one pass over a file), from open to its end."""
        self._state = "connecting"
        if not self._down_log.quiet:
            log.info("camera_connecting", camera=self.camera_id, url=self.camera.safe_url())
        try:
            return self._link.attempt()
        except ConnectionLostError as exc:
            return Outcome("failed", exc.reason, exc.stalled)
        finally:
            self._link.end_connection()
            self._consumer.discard(self.camera_id)
            self._metrics.camera_up.labels(camera=self.camera_id).set(0)

    def _on_up(self, width: int, height: int, conn: Connection, now: float) -> None:
        conn.up = True
        self._state = "up"
        self._last_down_reason = None
        self._down_log.succeeded()
        self._backoff.succeeded()
        self._metrics.camera_up.labels(camera=self.camera_id).set(1)
        detail = f"{width}x{height} {conn.codec}"
        log.info(
            "camera_up",
            camera=self.camera_id,
            size=f"{width}x{height}",
            codec=conn.codec,
            connect_s=round(now - conn.opened_mono, 3),
        )
        self._status("camera_up", detail)

    def _status(self, kind: StatusKind, detail: str) -> None:
        at_ms = time_ms(self._clock)
        event = StatusEvent(kind=kind, detail=SECRETS.scrub(detail), camera_id=self.camera_id, at_ms=at_ms)
        try:
            self._on_status(event)
        except Exception as exc:  # a faulty listener must not take the camera down
            log.error("status_listener_failed", camera=self.camera_id, kind=kind, error=type(exc).__name__)
