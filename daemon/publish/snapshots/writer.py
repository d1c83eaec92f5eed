"""`SnapshotWriter`: a JPEG per `crossed` event, encoded and written by one thread off the hot path.

Policy, in order of what matters:
- Frames and events are never dropped or delayed for a snapshot. On the event loop the writer only
  keeps references (`observe`: each inferred frame until its result is published) and, in `attach`,
  puts one job per `crossed` event into a bounded queue without waiting.
- The event carries `snapshot` (its path relative to `[snapshots] dir`) only when its job was queued:
  a crossing that finds the queue full (or whose frame is gone) is published without the field and
  counted, `beltsight_snapshots_dropped_total{reason="queue_full"|"no_frame"}`. The path is decided
  before the event is published, so the sink writes it exactly once with the event.
- A queued job can still fail in the thread (disk full, another write error, an undecodable frame):
  the event then names a file that never appears (HTTP 404), counted with reason `disk_full`,
  `write_error` or `encode_error`, and logged at most once a minute per reason (`snapshot_dropped`).
- Files appear whole (written beside, then renamed). The queue, the thread and retention are
  `daemon.publish.files`' (shared with the frame capture). Retention (`daemon.publish.files.retention`) runs after
  each write and at least once a minute.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from daemon.config.snapshots import SnapshotsConfig
from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.core.frames import Frame, FrameResult
from daemon.core.metrics import Metrics
from daemon.core.objects import ObjectEvent
from daemon.core.ratelimit import RateLimited
from daemon.publish.files.jpeg import Box, picture_of, render
from daemon.publish.files.pending import PendingFrames
from daemon.publish.files.retention import Retention
from daemon.publish.files.worker import FileWorker, failure_reason, write_atomic
from daemon.publish.snapshots.paths import SUFFIX, snapshot_path

log = structlog.get_logger("beltsight.snapshots")

RETENTION_TICK_S = 60.0
LOG_INTERVAL_S = 60.0


@dataclass(frozen=True, slots=True)
class Job:
    """One snapshot to write: the frame, the crossing part's box in camera pixels (None: not among the
    frame's published detections) and its class."""

    path: str
    camera: str
    frame: Frame
    box: Box | None
    cls: int


class SnapshotWriter:
    """See the module docstring. `observe` and `attach` run on the event loop; `start` runs the thread."""

    def __init__(self, cfg: SnapshotsConfig, metrics: Metrics, clock: Clock = SYSTEM_CLOCK) -> None:
        assert cfg.dir is not None, "SnapshotsConfig checks dir when enabled"
        self.cfg = cfg
        self.root = cfg.dir
        self._metrics = metrics
        self._clock = clock
        self._pending = PendingFrames()
        self._loop_log = RateLimited(LOG_INTERVAL_S, clock)
        self._thread_log = RateLimited(LOG_INTERVAL_S, clock)
        max_bytes = int(cfg.max_mb * 2**20)
        self._retention = Retention(self.root, retain_s=cfg.retain_days * 86400, max_bytes=max_bytes, suffix=SUFFIX)
        self._worker = FileWorker[Job](
            "beltsight-snapshots",
            cfg.queue,
            self.write,
            prepare=self._prepare,
            tick=lambda: self._expire(0),
            tick_s=RETENTION_TICK_S,
        )

    # -- the event loop's side ------------------------------------------------------------
    def observe(self, frames: Sequence[Frame], results: Sequence[FrameResult]) -> None:
        """Keep a reference to each inferred frame until its result comes to `attach`."""
        self._pending.keep(frames)

    def attach(self, result: FrameResult) -> FrameResult:
        """`result` with each `crossed` event's `snapshot` set where its job was queued; frees the frame
        (and any older one of the camera that never came, e.g. after an engine error)."""
        frame = self._pending.take(result.camera_id, result.captured_mono)
        if not any(e.event == "crossed" for e in result.objects):
            return result
        events = tuple(self._queue(e, result, frame) if e.event == "crossed" else e for e in result.objects)
        return dataclasses.replace(result, objects=events)

    def _queue(self, event: ObjectEvent, result: FrameResult, frame: Frame | None) -> ObjectEvent:
        if frame is None:
            self._dropped("no_frame", self._loop_log)
            return event
        box = next((d.box for d in result.detections if d.track == event.track), None)
        path = snapshot_path(event)
        if not self._worker.offer(Job(path, event.camera, frame, box, event.cls)):
            self._dropped("queue_full", self._loop_log)
            return event
        return dataclasses.replace(event, snapshot=path)

    def _dropped(self, reason: str, limiter: RateLimited, error: str | None = None) -> None:
        self._metrics.snapshots_dropped.labels(reason=reason).inc()
        held = limiter.allow(reason)
        if held is not None:
            log.warning("snapshot_dropped", reason=reason, held_back=held, error=error)

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        """Start the thread (which first indexes the directory: one walk)."""
        self._worker.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Write what is queued (within `timeout_s`), then end the thread (blocks: call it off the loop)."""
        self._worker.stop(timeout_s)
        self._pending.clear()

    # -- the thread -----------------------------------------------------------------------
    def _prepare(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            log.error("snapshots_dir_failed", dir=str(self.root), error=f"{type(exc).__name__}: {exc.strerror}")
        self._retention.scan()
        self._metrics.snapshots_bytes.set(self._retention.total_bytes)
        log.info("snapshots_started", dir=str(self.root), files=len(self._retention), queue=self.cfg.queue)

    def write(self, job: Job) -> None:
        """Encode and write one job, then apply retention (the thread's work; callable directly in tests)."""
        cfg = self.cfg
        started = self._metrics.stage_cpu.snapshot.start()
        try:
            jpeg = render(
                picture_of(job.frame), job.box, job.cls, crop=cfg.crop, draw_box=cfg.draw_box, quality=cfg.quality
            )
        except Exception as exc:  # a frame that cannot be encoded costs its snapshot only
            self._dropped("encode_error", self._thread_log, f"{type(exc).__name__}: {exc}")
            return
        finally:
            self._metrics.stage_cpu.snapshot.stop(started)
        self._expire(len(jpeg))
        target = self.root / job.path
        try:
            write_atomic(target, jpeg)
        except OSError as exc:
            self._dropped(failure_reason(exc), self._thread_log, f"{type(exc).__name__}: {exc.strerror}")
            return
        self._retention.added(target, len(jpeg), self._clock.time())
        self._metrics.snapshots_written.labels(camera=job.camera).inc()
        self._metrics.snapshots_bytes.set(self._retention.total_bytes)

    def _expire(self, incoming: int) -> None:
        by_age, by_size = self._retention.expire(self._clock.time(), incoming)
        if by_age:
            self._metrics.snapshots_removed.labels(reason="age").inc(by_age)
        if by_size:
            self._metrics.snapshots_removed.labels(reason="size").inc(by_size)
        if by_age or by_size:
            self._metrics.snapshots_bytes.set(self._retention.total_bytes)


__all__ = ["Job", "SnapshotWriter"]
