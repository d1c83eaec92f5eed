"""`ClipWriter`: the one thread that turns open clips into fragmented MP4 files, from the packet rings.

Policy:
- Each clip is muxed as it goes: its packets up to now when its job arrives, then, every `POLL_S`, the
  packets its camera's ring got since, until a packet past its end came (or `CLOSE_GRACE_MS` passed
  beyond its end without one: the camera went quiet) and no extension moved the end meanwhile.
- Remux only: the camera's packets go into the MP4 as they came (no decode, no encode), H.264 tagged
  `avc1`, H.265 tagged `hvc1` (browsers play only that), audio never (the ring holds video only);
  timestamps rebased so the first packet's dts is 0.
- Fragmented MP4 (`frag_keyframe+empty_moov+default_base_moof`): a fragment per keyframe, so a crash
  leaves a playable file up to its last fragment. It is written as `.<name>.part` beside its final name
  and renamed when complete, so the name an event carries appears whole; `.part` files found at start
  (a crash) are renamed to their final names.
- A clip whose ring lost packets it still needed (the thread fell behind by more than the ring's slack)
  ends there; one whose first packets are already gone when its job comes is dropped (`late`); a write
  error drops the clip (`disk_full`, `write_error`) and removes its partial file. Every drop is counted
  (`beltsight_clips_dropped_total{reason}`) and logged at most once a minute per reason.
- Retention (age, then total size, oldest first) after each clip and every `RETENTION_TICK_S`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import av
import av.container
import av.error
import structlog

from daemon.config.clips import ClipsConfig
from daemon.core.clock import SYSTEM_CLOCK, Clock, time_ms
from daemon.core.metrics import Metrics
from daemon.core.packets import Packet, PacketRing
from daemon.core.ratelimit import RateLimited
from daemon.publish.clips.open_clip import SUFFIX, OpenClip
from daemon.publish.files.retention import Retention
from daemon.publish.files.worker import FileWorker, failure_reason

log = structlog.get_logger("beltsight.clips")

QUEUE = 16
"""Clips waiting to be opened by the thread at most; a crossing that finds the queue full gets no clip."""
POLL_S = 0.2
"""How often the thread moves new packets from the rings into the open clips."""
CLOSE_GRACE_MS = 2000
"""A clip whose camera sent nothing past its end is closed this long after its end."""
RETENTION_TICK_S = 60.0
LOG_INTERVAL_S = 60.0
PART = ".part"
MOVFLAGS = "frag_keyframe+empty_moov+default_base_moof"
TAGS = {"h264": "avc1", "hevc": "hvc1"}


@dataclass(slots=True)
class _Writing:
    clip: OpenClip
    part: Path
    out: av.container.OutputContainer
    stream: av.video.stream.VideoStream
    last_index: int = -1
    size: int = field(default=0)


class ClipWriter:
    """See the module docstring. `offer` runs on the event loop; everything else on the thread."""

    def __init__(
        self, cfg: ClipsConfig, rings: Mapping[str, PacketRing], metrics: Metrics, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        assert cfg.dir is not None, "ClipsConfig checks dir when enabled"
        self.root = cfg.dir
        self._rings = rings
        self._metrics = metrics
        self._clock = clock
        self._log = RateLimited(LOG_INTERVAL_S, clock)
        self._writing: list[_Writing] = []
        self._retention = Retention(
            self.root, retain_s=cfg.retention_days * 86400, max_bytes=int(cfg.max_mib * 2**20), suffix=SUFFIX
        )
        self._last_retention_s = 0.0
        self._worker = FileWorker[OpenClip](
            "beltsight-clips", QUEUE, self._begin, prepare=self._prepare, tick=self._poll, tick_s=POLL_S
        )

    def offer(self, clip: OpenClip) -> bool:
        """Queue a new clip without waiting; False when the queue is full."""
        return self._worker.offer(clip)

    def start(self) -> None:
        self._worker.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Open what is queued, end the thread, then finish every open clip with what it has."""
        self._worker.stop(timeout_s)
        for writing in list(self._writing):
            self._finish(writing)

    # -- the thread -----------------------------------------------------------------------
    def _prepare(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            log.error("clips_dir_failed", dir=str(self.root), error=f"{type(exc).__name__}: {exc.strerror}")
        recovered = 0
        for part in self.root.rglob(f".*{SUFFIX}{PART}"):
            with contextlib.suppress(OSError):
                part.rename(part.with_name(part.name[1 : -len(PART)]))
                recovered += 1
        self._retention.scan()
        self._metrics.clips_bytes.set(self._retention.total_bytes)
        log.info("clips_started", dir=str(self.root), files=len(self._retention), recovered=recovered)

    def _begin(self, clip: OpenClip) -> None:
        """A new clip: open its file and mux what the ring holds of it."""
        part = self.root / Path(clip.path).with_name(f".{Path(clip.path).name}{PART}")
        try:
            part.parent.mkdir(parents=True, exist_ok=True)
            out = av.open(str(part), "w", format="mp4", options={"movflags": MOVFLAGS})
            stream = out.add_stream_from_template(clip.info.template)
            tag = TAGS.get(clip.info.codec)
            if tag is not None:
                stream.codec_tag = tag
        except (OSError, av.error.FFmpegError) as exc:
            clip.close()
            self._failed(None, part, exc)
            return
        writing = _Writing(clip, part, out, stream, last_index=clip.start.index - 1)
        self._writing.append(writing)
        self._advance(writing, first=True)
        self._poll()

    def _poll(self) -> None:
        for writing in list(self._writing):
            self._advance(writing, first=False)
        for camera, ring in self._rings.items():
            self._metrics.clip_ring_bytes.labels(camera=camera).set(ring.nbytes)
        now_s = self._clock.time()
        if now_s - self._last_retention_s >= RETENTION_TICK_S:
            self._last_retention_s = now_s
            self._expire()

    def _advance(self, writing: _Writing, *, first: bool) -> None:
        """Mux the clip's new packets; finish it when it is complete (or cannot go on)."""
        clip = writing.clip
        end_ms = clip.end_ms
        info, packets = clip.ring.since(writing.last_index)
        gap = bool(packets) and packets[0].index != writing.last_index + 1
        if first and (gap or not packets):
            self._drop(writing, "late")
            return
        if info is not clip.info or gap:  # a reconnect, or the ring overran: the clip ends here
            self._finish(writing)
            return
        past_end = False
        started = self._metrics.stage_cpu.clip.start()
        try:
            for packet in packets:
                self._mux(writing, packet)
                if packet.wall_ms > end_ms:
                    past_end = True
                    break
        except (OSError, av.error.FFmpegError) as exc:
            self._failed(writing, writing.part, exc)
            return
        finally:
            self._metrics.stage_cpu.clip.stop(started)
        quiet = time_ms(self._clock) > end_ms + CLOSE_GRACE_MS
        if (past_end or quiet) and clip.close_at(end_ms):
            self._finish(writing)

    def _mux(self, writing: _Writing, packet: Packet) -> None:
        zero = writing.clip.start.dts
        out = av.Packet(packet.data)
        out.pts, out.dts = packet.pts - zero, packet.dts - zero
        out.time_base = writing.clip.info.time_base
        out.stream = writing.stream
        out.is_keyframe = packet.keyframe
        writing.out.mux(out)
        writing.last_index = packet.index

    def _finish(self, writing: _Writing) -> None:
        """Close the file and give it its final name."""
        writing.clip.close()
        self._writing.remove(writing)
        target = self.root / writing.clip.path
        try:
            writing.out.close()
            size = writing.part.stat().st_size
            os.replace(writing.part, target)
        except (OSError, av.error.FFmpegError) as exc:
            self._failed(None, writing.part, exc)
            return
        self._expire(size)
        self._retention.added(target, size, self._clock.time())
        self._metrics.clips_written.labels(camera=writing.clip.camera).inc()
        self._metrics.clips_bytes.set(self._retention.total_bytes)

    def _drop(self, writing: _Writing, reason: str, error: str | None = None) -> None:
        writing.clip.close()
        self._writing.remove(writing)
        with contextlib.suppress(OSError, av.error.FFmpegError):
            writing.out.close()
        with contextlib.suppress(OSError):
            writing.part.unlink()
        self._dropped(reason, error)

    def _failed(self, writing: _Writing | None, part: Path, exc: BaseException) -> None:
        error = f"{type(exc).__name__}: {getattr(exc, 'strerror', None) or exc}"
        reason = failure_reason(exc) if isinstance(exc, OSError) else "write_error"
        if writing is not None:
            self._drop(writing, reason, error)
            return
        with contextlib.suppress(OSError):
            part.unlink()
        self._dropped(reason, error)

    def _dropped(self, reason: str, error: str | None = None) -> None:
        self._metrics.clips_dropped.labels(reason=reason).inc()
        held = self._log.allow(reason)
        if held is not None:
            log.warning("clip_dropped", reason=reason, held_back=held, error=error)

    def _expire(self, incoming: int = 0) -> None:
        by_age, by_size = self._retention.expire(self._clock.time(), incoming)
        if by_age:
            self._metrics.clips_removed.labels(reason="age").inc(by_age)
        if by_size:
            self._metrics.clips_removed.labels(reason="size").inc(by_size)
        if by_age or by_size:
            self._metrics.clips_bytes.set(self._retention.total_bytes)


__all__ = ["CLOSE_GRACE_MS", "POLL_S", "QUEUE", "ClipWriter"]
