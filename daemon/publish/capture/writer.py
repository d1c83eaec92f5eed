"""`FrameCapture`: the frames the model is unsure of, written as a YOLO dataset by one thread.

Policy, in order of what matters:
- Frames are never dropped or delayed for a capture. On the event loop the capture keeps references
  (`observe`: each inferred frame until its result is published) and, in `offer`, asks the `Sampler`
  whether a strategy captures the frame, then puts one job into a bounded queue without waiting.
- A capture that finds the queue full, or whose frame is gone, is dropped and counted
  (`beltsight_capture_dropped_total{reason="queue_full"|"no_frame"}`); a queued one can still fail
  in the thread (`disk_full`, `write_error`, `encode_error`). Each reason is logged at most once a
  minute (`capture_dropped`); a strategy's per-camera limit, once a minute per camera, strategy and
  limit (`capture_limited`).
- The thread encodes the whole frame (JPEG from the decoded YUV planes, timed as the `capture` stage),
  writes the labels then the image (each whole: written beside, then renamed), and keeps the images and
  labels under `[capture] max_mb`, the oldest removed first. `data.yaml` is written when it starts.
- Labels use the dataset's own class ids (`DatasetClasses`): from the `data.yaml` an earlier run left
  and the served model's names; a detection's class is its label, the name the model that served the
  frame gave it, and a label the dataset has not seen (a model swapped in with other classes) is
  appended to `data.yaml` before the label file that uses it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from daemon.config.capture import CaptureConfig
from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.core.frames import Detection, Frame, FrameResult
from daemon.core.metrics import Metrics
from daemon.core.ratelimit import RateLimited
from daemon.publish.capture.dataset import (
    DATA_YAML,
    IMAGE_SUFFIX,
    DatasetClasses,
    data_yaml,
    image_path,
    label_of,
    label_text,
    names_in,
)
from daemon.publish.capture.strategies import Refused, Sampler
from daemon.publish.files.jpeg import picture_of, render
from daemon.publish.files.pending import PendingFrames
from daemon.publish.files.retention import Retention
from daemon.publish.files.worker import FileWorker, failure_reason, write_atomic

log = structlog.get_logger("beltsight.capture")

LOG_INTERVAL_S = 60.0
RETENTION_TICK_S = 60.0


@dataclass(frozen=True, slots=True)
class Job:
    """One frame to write: the frame, its published detections (the pre-labels) and why it was captured."""

    camera: str
    captured_ms: int
    frame: Frame
    detections: tuple[Detection, ...]
    width: int
    height: int
    strategy: str


class FrameCapture:
    """See the module docstring. `observe` and `offer` run on the event loop; `start` runs the thread."""

    def __init__(
        self,
        cfg: CaptureConfig,
        metrics: Metrics,
        *,
        names: Sequence[str],
        thresholds: Mapping[str, float],
        clock: Clock = SYSTEM_CLOCK,
        sampler: Sampler | None = None,
    ) -> None:
        assert cfg.dir is not None, "CaptureConfig checks dir when strategies are listed"
        self.cfg = cfg
        self.root = cfg.dir
        self.names = tuple(names)
        self.classes = DatasetClasses([], self.names)
        """The dataset's class ids (`daemon.publish.capture.dataset.DatasetClasses`), the writer thread's."""
        self.sampler = sampler or Sampler(cfg.strategies, thresholds, clock=clock)
        self._metrics = metrics
        self._clock = clock
        self._pending = PendingFrames()
        self._loop_log = RateLimited(LOG_INTERVAL_S, clock)
        self._thread_log = RateLimited(LOG_INTERVAL_S, clock)
        self._retention = Retention(
            self.root,
            retain_s=float("inf"),
            max_bytes=int(cfg.max_mb * 2**20),
            suffix=IMAGE_SUFFIX,
            companions=_companions,
        )
        self._worker = FileWorker[Job](
            "beltsight-capture",
            cfg.queue,
            self.write,
            prepare=self._prepare,
            tick=lambda: self._expire(0),
            tick_s=RETENTION_TICK_S,
        )

    # -- the event loop's side ------------------------------------------------------------
    def observe(self, frames: Sequence[Frame], results: Sequence[FrameResult]) -> None:
        """Keep a reference to each inferred frame until its result comes to `offer`."""
        self._pending.keep(frames)

    def offer(self, before: FrameResult, after: FrameResult) -> None:
        """One published frame: `before` tracking (with its weak detections) and `after` (track ids,
        events). Queues its capture when a strategy picks it; frees the frame either way."""
        frame = self._pending.take(after.camera_id, after.captured_mono)
        pick, refused = self.sampler.choose(before, after)
        for r in refused:
            self._limited(after.camera_id, r)
        if pick is None:
            return
        if frame is None:
            self._dropped("no_frame", self._loop_log)
            return
        job = Job(
            after.camera_id, after.captured_ms, frame, after.detections, after.width, after.height, pick.strategy.type
        )
        if not self._worker.offer(job):
            self._dropped("queue_full", self._loop_log)
            return
        self.sampler.record(after.camera_id, pick)

    def _limited(self, camera: str, refused: Refused) -> None:
        self._metrics.capture_limited.labels(camera=camera, strategy=refused.strategy, limit=refused.limit).inc()
        held = self._loop_log.allow(("limited", camera, refused.strategy, refused.limit))
        if held is not None:
            log.info("capture_limited", camera=camera, strategy=refused.strategy, limit=refused.limit, held_back=held)

    def _dropped(self, reason: str, limiter: RateLimited, error: str | None = None) -> None:
        self._metrics.capture_dropped.labels(reason=reason).inc()
        held = limiter.allow(reason)
        if held is not None:
            log.warning("capture_dropped", reason=reason, held_back=held, error=error)

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        """Start the thread (which first writes `data.yaml` and indexes the directory: one walk)."""
        self._worker.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Write what is queued (within `timeout_s`), then end the thread (blocks: call it off the loop)."""
        self._worker.stop(timeout_s)
        self._pending.clear()

    # -- the thread -----------------------------------------------------------------------
    def _prepare(self) -> None:
        try:
            earlier = names_in((self.root / DATA_YAML).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            earlier = []
        self.classes = DatasetClasses(earlier, self.names)
        try:
            write_atomic(self.root / DATA_YAML, data_yaml(self.root, self.classes.names).encode())
        except OSError as exc:
            log.error("capture_dir_failed", dir=str(self.root), error=f"{type(exc).__name__}: {exc.strerror}")
        self._retention.scan()
        self._metrics.capture_bytes.set(self._retention.total_bytes)
        log.info("capture_started", dir=str(self.root), files=len(self._retention), queue=self.cfg.queue)

    def write(self, job: Job) -> None:
        """Encode and write one job, then apply the size cap (the thread's work; callable directly in tests)."""
        started = self._metrics.stage_cpu.capture.start()
        try:
            jpeg = render(picture_of(job.frame), None, 0, crop=False, draw_box=False, quality=self.cfg.quality)
        except Exception as exc:  # a frame that cannot be encoded costs its capture only
            self._dropped("encode_error", self._thread_log, f"{type(exc).__name__}: {exc}")
            return
        finally:
            self._metrics.stage_cpu.capture.stop(started)
        labels = label_text(job.detections, job.width, job.height, self.classes.id_of).encode()
        if self.classes.changed:  # a class no earlier frame had (a swapped model's): data.yaml first
            try:
                write_atomic(self.root / DATA_YAML, data_yaml(self.root, self.classes.names).encode())
                self.classes.changed = False
                log.info("capture_classes_added", dir=str(self.root), names=self.classes.names)
            except OSError as exc:
                self._dropped(failure_reason(exc), self._thread_log, f"{type(exc).__name__}: {exc.strerror}")
                return
        size = len(jpeg) + len(labels)
        self._expire(size)
        image = self.root / image_path(job.camera, job.captured_ms)
        try:
            write_atomic(_label(image), labels)
            write_atomic(image, jpeg)
        except OSError as exc:
            self._dropped(failure_reason(exc), self._thread_log, f"{type(exc).__name__}: {exc.strerror}")
            _label(image).unlink(missing_ok=True)
            return
        self._retention.added(image, size, self._clock.time())
        self._metrics.capture_written.labels(camera=job.camera, strategy=job.strategy).inc()
        self._metrics.capture_bytes.set(self._retention.total_bytes)

    def _expire(self, incoming: int) -> None:
        _by_age, by_size = self._retention.expire(self._clock.time(), incoming)
        if by_size:
            self._metrics.capture_removed.inc(by_size)
            self._metrics.capture_bytes.set(self._retention.total_bytes)


_label = label_of


def _companions(image: Path) -> tuple[Path, ...]:
    return (label_of(image),)


__all__ = ["FrameCapture", "Job"]
