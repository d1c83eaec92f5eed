"""The decode loop of one camera connection: demux, decode, pace, count, route, hand off.

`FrameReader.read` runs one opened container to its end and says how it ended (`Outcome`); the
reconnect loop around it (state, backoff, status events) is `daemon.ingest.sources.CameraSource`.

Policies:
- Hand-off: live cameras and realtime file replays use `consumer.put(wait=False)` (latest
  frame wins, the consumer counts what it replaces). `realtime=false` file replays use
  `put(wait=True)`: every frame is processed and `seq` equals the frame index in the file.
- `captured_ms`: a live camera's frame is stamped from its presentation time (the stream's clock,
  RTP time over RTSP), mapped onto the host's clocks by `daemon.ingest.capture_clock` (the
  least-delayed frame's arrival as the floor): a decoder that a busy host held back does not
  stamp its frames late, so the tracker sees the camera's own spacing. A frame without a
  presentation time is stamped when it is decoded, as is a realtime replay's (paced to its time in
  the file); a `realtime = false` replay's with the pass's start plus its time in the file (it
  keeps the recording's spacing).
- `seq` counts decoded frames from 0 in each connection; a reconnect or a file loop (a new
  pass) starts again at 0. Frames whose resolution routes to no model are counted as
  dropped (`no_model`) and still take a seq number.
- The letterbox (content size for the routed model) comes from `SourceGeometry`, once per
  resolution; a resolution change is logged, reported and routed again. The frame goes on
  in YUV with `decoding.scale` bound to it: scaling and conversion (swscale, AREA when
  shrinking, BILINEAR when enlarging) happen in the worker, only for frames a batch takes.
- Corrupt packets are counted (`corrupt_packets`) and skipped; more than
  `MAX_CONSECUTIVE_DECODE_ERRORS` in a row end the connection.
- Stall: no decoded frame for `stall_s` on an open connection ends it (`ConnectionLostError`); a
  packet skipped by the lag watch counts as progress (the stream is alive, the reader chose).
- Behind: a live camera whose decoding falls behind its stream skips to a keyframe near the live
  edge (`daemon.ingest.lag`); what it skips is counted as dropped (`behind`), never decoded, and
  a skip's start is logged (`camera_behind`, at most once a minute per camera).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from typing import Literal

import av
import av.container
import av.error
import av.video
import structlog
from av.video.stream import VideoStream

from daemon.config.cameras import CameraConfig
from daemon.core.clock import Clock, time_ms
from daemon.core.frames import Frame, FrameConsumer
from daemon.core.metrics import Metrics
from daemon.core.ratelimit import RateLimited
from daemon.core.status_kinds import StatusKind
from daemon.ingest.capture_clock import CaptureClock
from daemon.ingest.decoding import ConnectionLostError, describe_error, scale, set_decoder_threads
from daemon.ingest.geometry import SourceGeometry
from daemon.ingest.lag import StreamLag
from daemon.ingest.packet_tap import PacketTap

log = structlog.get_logger("beltsight.source")

MAX_CONSECUTIVE_DECODE_ERRORS = 30
"""More decode errors than this in a row (no good frame between them): reconnect."""
FPS_SMOOTHING = 0.1
"""Weight of the newest inter-frame interval in the fps estimate (exponential moving average)."""
MAX_PACING_LAG_S = 1.0
"""A realtime file replay that falls further behind than this re-anchors instead of bursting."""
BEHIND_LOG_INTERVAL_S = 60.0
"""A camera that keeps falling behind logs `camera_behind` at most once per this many seconds."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one connection (or one pass over a file) ended."""

    kind: Literal["failed", "loop", "finished", "stopped"]
    reason: str
    stalled: bool = False


@dataclass(slots=True)
class Connection:
    """Per-connection counters: everything here starts again on a reconnect or a file loop."""

    codec: str
    opened_mono: float
    last_good_mono: float
    nominal_fps: float
    seq: int = 0
    decode_errors: int = 0
    pace_anchor: float | None = None
    file_anchor_ms: int | None = None
    up: bool = False
    tick: float | None = None
    """Seconds per presentation-time unit of the stream (None: not known)."""
    capture: CaptureClock | None = None
    """A live camera's frame times on the host's clock (None: a file, stamped as it is read)."""


OnUp = Callable[[int, int, Connection, float], None]
"""Called with the size (width, height) of the first frame of a connection, its counters and the time it came."""


class FrameReader:
    """Reads one camera's connections, one at a time, in the source's thread (not thread-safe)."""

    def __init__(
        self,
        camera: CameraConfig,
        *,
        consumer: FrameConsumer,
        geometry: SourceGeometry,
        metrics: Metrics,
        clock: Clock,
        stop: threading.Event,
        on_up: OnUp,
        status: Callable[[StatusKind, str], None],
        keep_decoded: bool,
        packets: PacketTap | None = None,
    ) -> None:
        """`keep_decoded` (the device path): each frame carries its decoded planes (`Frame.decoded`);
        `packets` ([clips]): each connection's stream and each demuxed packet go to it before decoding."""
        self.camera = camera
        self._last_file_ms: int | None = None  # a file source's newest captured_ms, across loops
        self._consumer = consumer
        self._geometry = geometry
        self._metrics = metrics
        self._clock = clock
        self._stop = stop
        self._on_up = on_up
        self._status = status
        self._keep_decoded = keep_decoded
        self._packets = packets
        self._frame_interval_s: float | None = None
        self.conn: Connection | None = None
        """The connection being read (None between connections)."""
        self.frames = 0
        """Frames decoded since start (all connections)."""
        self.last_frame_mono: float | None = None
        self._behind_log = RateLimited(BEHIND_LOG_INTERVAL_S, clock)

    @property
    def fps(self) -> float:
        """Smoothed decode rate of the current connection (0 before two frames)."""
        interval = self._frame_interval_s
        return 1.0 / interval if interval else 0.0

    def end_connection(self) -> None:
        """The connection is over: its counters and fps estimate go."""
        self.conn = None
        self._frame_interval_s = None

    def read(self, container: av.container.InputContainer) -> Outcome:
        """Decode `container` until it ends, fails (raises) or stop is requested."""
        if not container.streams.video:
            raise ConnectionLostError("no video stream")
        stream = container.streams.video[0]
        set_decoder_threads(stream, self.camera.decode_threads)
        now = self._clock.monotonic()
        rate = stream.average_rate or stream.guessed_rate
        capture = None if self.camera.is_file else CaptureClock(self.camera.id)
        conn = Connection(stream.codec_context.name, now, now, float(rate) if rate else 25.0, capture=capture)
        self.conn = conn
        packets = self._packets
        if packets is not None:
            packets.start(stream)
        lag = None if self.camera.is_file else StreamLag()
        tick = conn.tick = float(stream.time_base) if stream.time_base else None  # once per connection
        for packet in self._demuxed(container.demux(stream)):
            if packets is not None:
                packets.add(packet, time_ms(self._clock))
            if lag is not None and not self._admit(lag, packet, tick, conn):
                if self._stop.is_set():
                    return self._stopped(conn)
                continue
            for vframe in self._decode(packet, conn):
                if not self._handle(vframe, conn):
                    return self._stopped(conn)
            if self._stop.is_set():
                return self._stopped(conn)
            self._check_stall(conn)
        if self.camera.is_file:
            return Outcome("loop" if self.camera.loop else "finished", "end of file")
        raise ConnectionLostError("stream ended")

    def _demuxed(self, packets: Iterator[av.Packet[VideoStream]]) -> Iterator[av.Packet[VideoStream]]:
        """`packets`, each one's reading timed as the `demux` stage (the thread's CPU: waiting for the
        network costs none)."""
        stage = self._metrics.stage_cpu.demux
        while True:
            started = stage.start()
            packet = next(packets, None)
            stage.stop(started)
            if packet is None:
                return
            yield packet

    def _admit(self, lag: StreamLag, packet: av.Packet[VideoStream], tick: float | None, conn: Connection) -> bool:
        """Whether to decode `packet` (`daemon.ingest.lag`); a skipped one is counted as dropped (`behind`)."""
        pts = packet.pts
        now = self._clock.monotonic()
        pts_s = pts * tick if pts is not None and tick is not None else None
        verdict = lag.packet(pts_s, packet.is_keyframe, now)
        if verdict.started:
            held = self._behind_log.allow()
            if held is not None:
                log.warning("camera_behind", camera=self.camera.id, lag_ms=round(1000 * lag.lag_s), skips_since=held)
        elif verdict.ended:
            log.debug("camera_caught_up", camera=self.camera.id, skipped=lag.skipped, lag_ms=round(1000 * lag.lag_s))
        if verdict.decode:
            return True
        conn.last_good_mono = now  # the stream is alive: skipping is the reader's choice, not a stall
        self._metrics.dropped(self.camera.id, "behind")
        return False

    def _stopped(self, conn: Connection) -> Outcome:
        if conn.up:
            self._status("camera_down", "stopped")
        return Outcome("stopped", "stopped")

    def _check_stall(self, conn: Connection) -> None:
        age = self._clock.monotonic() - conn.last_good_mono
        if age > self.camera.stall_s:
            raise ConnectionLostError(f"stalled {age:.1f}s", stalled=conn.up)

    def _decode(self, packet: av.Packet[VideoStream], conn: Connection) -> list[av.VideoFrame]:
        """Decode one packet; corrupt data is counted and skipped, persistent garbage reconnects."""
        started = self._metrics.stage_cpu.decode.start()
        try:
            frames = packet.decode()
        except av.error.EOFError:
            return []
        except av.error.FFmpegError as exc:
            self._metrics.corrupt_packets.labels(camera=self.camera.id).inc()
            conn.decode_errors += 1
            log.debug("camera_decode_error", camera=self.camera.id, error=describe_error(exc, opened=True))
            if conn.decode_errors > MAX_CONSECUTIVE_DECODE_ERRORS:
                reason = f"corrupt stream ({conn.decode_errors} decode errors in a row)"
                raise ConnectionLostError(reason) from None
            return []
        self._metrics.stage_cpu.decode.stop(started)
        if frames:
            conn.decode_errors = 0
        return frames

    def _handle(self, vframe: av.VideoFrame, conn: Connection) -> bool:
        """Route and hand off one decoded frame (the worker scales it); False once stop was requested."""
        if self.camera.is_file and self.camera.realtime and not self._pace(vframe, conn):
            return False
        now = self._clock.monotonic()
        if conn.capture is not None:
            captured_mono, captured_ms = self._stream_time(vframe, conn.capture, conn.tick, now)
        else:
            captured_mono = now
            captured_ms = time_ms(self._clock) if self.camera.realtime else self._file_time_ms(vframe, conn)
        seq = conn.seq
        conn.seq += 1
        self._count_frame(now, conn)
        if not conn.up:
            self._on_up(vframe.width, vframe.height, conn, now)
        letterbox = self._geometry.letterbox_for(vframe.width, vframe.height)
        if letterbox is None:
            self._metrics.dropped(self.camera.id, "no_model")
            return True
        frame = Frame(self.camera.id, seq, captured_ms, captured_mono, letterbox, partial(scale, vframe, letterbox))
        if self._keep_decoded:  # the device path letterboxes the decoded planes itself
            frame = replace(frame, decoded=vframe)
        if self.camera.is_file and not self.camera.realtime:
            return self._consumer.put(frame, wait=True, stop=self._stop)
        self._consumer.put(frame, wait=False)
        return True

    def _stream_time(
        self, vframe: av.VideoFrame, clock: CaptureClock, tick: float | None, now: float
    ) -> tuple[float, int]:
        """A live frame's capture instant, monotonic seconds and Unix ms, from its presentation time
        (`daemon.ingest.capture_clock`; the decode instant `now` where the frame has none)."""
        pts = vframe.pts
        source_ns = round(pts * tick * 1e9) if pts is not None and tick else None
        captured_mono = clock.capture_ns(source_ns, round(now * 1e9)) / 1e9
        return captured_mono, time_ms(self._clock) - round(1000 * (now - captured_mono))

    def _file_time_ms(self, vframe: av.VideoFrame, conn: Connection) -> int:
        """A `realtime = false` replay's `captured_ms`: the pass's start plus the frame's time in the
        file, so a replay faster (or slower) than real time keeps the recording's frame spacing,
        which the tracker's time-based limits and speeds need. Each pass (a loop) starts after the
        last frame of the one before, never earlier."""
        offset_ms = round(1000 * (vframe.time if vframe.time is not None else conn.seq / conn.nominal_fps))
        if conn.file_anchor_ms is None:
            start = time_ms(self._clock)
            if self._last_file_ms is not None:
                start = max(start, self._last_file_ms + round(1000 / conn.nominal_fps))
            conn.file_anchor_ms = start - offset_ms
        captured_ms = max(conn.file_anchor_ms + offset_ms, (self._last_file_ms or 0) + 1)
        self._last_file_ms = captured_ms
        return captured_ms

    def _pace(self, vframe: av.VideoFrame, conn: Connection) -> bool:
        """Sleep until this frame's time in the file; False when stop was requested."""
        offset_s = vframe.time if vframe.time is not None else conn.seq / conn.nominal_fps
        now = self._clock.monotonic()
        if conn.pace_anchor is None:
            conn.pace_anchor = now - offset_s
        delay_s = conn.pace_anchor + offset_s - now
        if delay_s < -MAX_PACING_LAG_S:
            conn.pace_anchor = now - offset_s
        return delay_s <= 0 or not self._stop.wait(delay_s)

    def _count_frame(self, now: float, conn: Connection) -> None:
        self.frames += 1
        self._metrics.frames_decoded.labels(camera=self.camera.id).inc()
        if conn.seq > 1 and self.last_frame_mono is not None:
            interval = now - self.last_frame_mono
            prev = self._frame_interval_s
            self._frame_interval_s = interval if prev is None else prev + FPS_SMOOTHING * (interval - prev)
        self.last_frame_mono = now
        conn.last_good_mono = now
