"""`ClipRecorder`: on the event loop, decides each selected crossing's clip; the writer's thread makes the file.

Policy:
- Frames and events are never dropped or delayed for a clip. `attach` does a lookup in the camera's packet
  ring (a short scan under its lock) and, for a crossing that opens a clip, offers one job to the writer's
  bounded queue without waiting.
- A crossing on a selected line (`lines`; every line when empty) of a selected label (`labels`) that falls
  inside its camera's open clip extends it to the crossing's own `post_s`, while the clip stays within
  `max_s` and within `EXTEND_MS` past its first crossing's `post_s` (each crossing a clip names finds it
  complete within `post_s` + 5 s); any other opens a clip from the keyframe at or before `pre_s` before it
  (the oldest one held when the ring covers less: just after a connection opened). So a busy belt makes
  one clip for the parts of a few seconds, not one per part.
- The event names the clip when its path is decided, before it is published (`clip`, `clip_offset_ms`:
  the crossing's time in the clip, from the packets' own timestamps); the file appears when the clip is
  complete, at most `post_s` + 5 s after the crossing.
- A crossing whose clip cannot be opened (the writer's queue full, no packets from the camera yet) is
  published without `clip`, counted in `beltsight_clips_dropped_total` and logged at most once a minute
  per reason (`clip_dropped`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

import structlog

from daemon.config.clips import ClipsConfig
from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.core.frames import FrameResult
from daemon.core.metrics import Metrics
from daemon.core.objects import ObjectEvent
from daemon.core.packets import PacketRing
from daemon.core.ratelimit import RateLimited
from daemon.publish.clips.open_clip import OpenClip, clip_path
from daemon.publish.clips.writer import ClipWriter

log = structlog.get_logger("beltsight.clips")

LOG_INTERVAL_S = 60.0
RING_SLACK_MS = 3000
"""A packet ring keeps `pre_s` plus this (a crossing reaches the recorder some hundreds of ms after its frame
was read) plus at most one keyframe interval."""
EXTEND_MS = 3000
"""How far past its first crossing's `post_s` a clip may be extended: every crossing a clip names must find it
complete within `post_s` + 5 s (the contract), and the writer needs the rest (a frame past the end, a poll)."""
RING_MAX_BYTES = 64 * 2**20
"""A packet ring's byte bound: 8 s of a 64 Mbit/s camera; beyond it the ring keeps less than `pre_s`."""


class ClipRecorder:
    """See the module docstring. `attach` runs on the event loop; `start`/`stop` run the writer's thread."""

    def __init__(
        self, cfg: ClipsConfig, rings: Mapping[str, PacketRing], metrics: Metrics, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.cfg = cfg
        self.rings = dict(rings)
        """camera id -> its ring; the writer reads this same dict, so rings added live (`ring_for`) reach it."""
        self.writer = ClipWriter(cfg, self.rings, metrics, clock)
        self.root = self.writer.root
        self._metrics = metrics
        self._pre_ms = round(cfg.pre_s * 1000)
        self._post_ms = round(cfg.post_s * 1000)
        self._max_ms = round(cfg.max_s * 1000)
        self._lines = frozenset(cfg.lines)
        self._labels = frozenset(cfg.labels)
        self._open: dict[str, OpenClip] = {}
        self._log = RateLimited(LOG_INTERVAL_S, clock)

    @classmethod
    def build(cls, cfg: ClipsConfig, camera_ids: Iterable[str], metrics: Metrics) -> ClipRecorder | None:
        """The recorder with a packet ring per camera (for their readers), or None when clips are off.
        `camera_ids`: the cameras that send encoded video (a GigE Vision camera sends raw frames: no clips)."""
        if not cfg.enabled:
            return None
        keep_ms = round(cfg.pre_s * 1000) + RING_SLACK_MS
        rings = {c: PacketRing(c, keep_ms=keep_ms, max_bytes=RING_MAX_BYTES) for c in camera_ids}
        return cls(cfg, rings, metrics)

    def ring_for(self, camera_id: str, kind: str) -> PacketRing | None:
        """The camera's ring, made when a camera is added live; None for a GigE Vision camera (raw
        frames: nothing to remux)."""
        if kind == "gige":
            return None
        ring = self.rings.get(camera_id)
        if ring is None:
            keep_ms = round(self.cfg.pre_s * 1000) + RING_SLACK_MS
            ring = self.rings[camera_id] = PacketRing(camera_id, keep_ms=keep_ms, max_bytes=RING_MAX_BYTES)
        return ring

    def forget(self, camera_id: str) -> None:
        """A camera removed live: its ring's memory goes (a clip being written keeps what it read)."""
        self.rings.pop(camera_id, None)
        self._open.pop(camera_id, None)

    def selected(self, event: ObjectEvent) -> bool:
        """A `crossed` event of a selected line and label."""
        return (
            event.event == "crossed"
            and (not self._lines or event.line in self._lines)
            and (not self._labels or event.label in self._labels)
        )

    def attach(self, result: FrameResult) -> FrameResult:
        """`result` with each selected `crossed` event naming its clip (where one could be opened)."""
        if not any(self.selected(e) for e in result.objects):
            return result
        events = tuple(self._clip_for(e) if self.selected(e) else e for e in result.objects)
        return dataclasses.replace(result, objects=events)

    def _clip_for(self, event: ObjectEvent) -> ObjectEvent:
        ring = self.rings.get(event.camera)
        if ring is None:
            return event
        at_ms, end_ms = event.at_ms, event.at_ms + self._post_ms
        clip = self._open.get(event.camera)
        if clip is not None and at_ms <= clip.end_ms and ring.info is clip.info and clip.extend(end_ms):
            located = ring.locate(at_ms, at_ms, base=clip.start)
            if located is not None:
                return dataclasses.replace(event, clip=clip.path, clip_offset_ms=located.offset_ms)
        located = ring.locate(at_ms - self._pre_ms, at_ms)
        if located is None:
            self._dropped("no_packets")
            return event
        start = located.start
        path = clip_path(event.camera, start.wall_ms, at_ms)
        limit_ms = min(start.wall_ms + self._max_ms, end_ms + EXTEND_MS)
        clip = OpenClip(path, ring, located.info, start, end_ms=end_ms, limit_ms=limit_ms)
        if not self.writer.offer(clip):
            self._dropped("queue_full")
            return event
        self._open[event.camera] = clip
        return dataclasses.replace(event, clip=path, clip_offset_ms=located.offset_ms)

    def _dropped(self, reason: str) -> None:
        self._metrics.clips_dropped.labels(reason=reason).inc()
        held = self._log.allow(reason)
        if held is not None:
            log.warning("clip_dropped", reason=reason, held_back=held, error=None)

    def start(self) -> None:
        """Start the writer's thread (which first indexes the directory and recovers unfinished clips)."""
        self.writer.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Finish what is queued and open (within `timeout_s`), then end the thread (blocks: off the loop)."""
        self.writer.stop(timeout_s)
        self._open.clear()


__all__ = ["ClipRecorder"]
