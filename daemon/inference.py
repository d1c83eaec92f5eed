"""One model size's inference stage: batch tensor, engine, post-processing, per-camera rules.

`infer()` runs in a lane worker's thread, never on the event loop. The batch tensor is
allocated once per worker; each frame's letterboxed content is made (colour conversion and
scaling of a live frame happen here, see `Frame`), copied (and scaled to 0..1) straight into
it, and the padding of a slot is rewritten only when its geometry changes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType

import numpy as np
import numpy.typing as npt

from daemon.engine import ModelInfo
from daemon.frames import LETTERBOX_PAD_VALUE, Frame, FrameResult, Letterbox
from daemon.metrics import Metrics
from daemon.postprocess import decode_batch, to_detections
from daemon.resilience import InferenceEngine

_INV_255 = np.float32(1.0 / 255.0)
_PAD = np.float32(LETTERBOX_PAD_VALUE / 255.0)


@dataclass(frozen=True, slots=True)
class CameraRules:
    """Per-camera post-processing: confidence threshold and class filter (ids of allowed labels)."""

    conf_threshold: float
    classes: frozenset[int] | None = None


@dataclass(frozen=True, slots=True)
class PostprocessConfig:
    conf_threshold: float
    iou_threshold: float
    max_det: int


class BatchTensor:
    """A preallocated (max_batch, 3, S, S) float32 input, letterbox padding kept between batches."""

    def __init__(self, max_batch: int, size: int) -> None:
        self.size = size
        self.array: npt.NDArray[np.float32] = np.full((max_batch, 3, size, size), _PAD, dtype=np.float32)
        self._geometry: list[Letterbox | None] = [None] * max_batch

    def fill(self, frames: list[Frame]) -> npt.NDArray[np.float32]:
        for i, frame in enumerate(frames):
            lb = frame.letterbox
            if lb.size != self.size:
                raise ValueError(f"frame for size {lb.size} in a {self.size} batch")
            if self._geometry[i] != lb:
                self.array[i].fill(_PAD)
                self._geometry[i] = lb
            region = self.array[i, :, lb.pad_y : lb.pad_y + lb.new_h, lb.pad_x : lb.pad_x + lb.new_w]
            for channel, plane in zip(region, frame.planes, strict=True):
                np.multiply(plane, _INV_255, out=channel, dtype=np.float32)
        return self.array[: len(frames)]


class InferenceStage:
    """Runs batches of one model size: fill tensor -> engine -> decode + NMS -> FrameResults."""

    def __init__(
        self,
        info: ModelInfo,
        engine: InferenceEngine,
        *,
        max_batch: int,
        post: PostprocessConfig,
        rules: Mapping[str, CameraRules],
        metrics: Metrics,
        xp: ModuleType = np,
    ) -> None:
        self.info = info
        self.engine = engine
        self._tensor = BatchTensor(max_batch, info.size)
        self._post = post
        self._rules = dict(rules)
        self._metrics = metrics
        self._xp = xp
        self._model_label = str(info.size)

    def swap_engine(self, engine: InferenceEngine) -> InferenceEngine:
        """Put a new engine in service between batches; returns the old one (caller closes it)."""
        old, self.engine = self.engine, engine
        return old

    def _rules_for(self, camera_id: str) -> CameraRules:
        rules = self._rules.get(camera_id)
        return rules if rules is not None else CameraRules(self._post.conf_threshold)

    def infer(self, frames: list[Frame]) -> list[FrameResult]:
        batch = self._tensor.fill(frames)
        started, cpu_started = time.perf_counter(), time.thread_time()
        output = self.engine.run(batch)
        self._metrics.inference_cpu_seconds.labels(model=self._model_label).inc(time.thread_time() - cpu_started)
        self._metrics.inference_seconds.labels(model=self._model_label).observe(time.perf_counter() - started)
        self._metrics.batch_size.labels(model=self._model_label).observe(len(frames))
        rules = [self._rules_for(f.camera_id) for f in frames]
        floor = min(r.conf_threshold for r in rules)
        rows = decode_batch(
            self._xp,
            output,
            conf_threshold=floor,
            iou_threshold=self._post.iou_threshold,
            max_det=self._post.max_det,
        )
        results: list[FrameResult] = []
        for frame, frame_rows, rule in zip(frames, rows, rules, strict=True):
            dets = to_detections(
                frame_rows,
                frame.letterbox,
                self.info.names,
                conf_threshold=rule.conf_threshold,
                classes=rule.classes,
            )
            self._metrics.frames_inferred.labels(camera=frame.camera_id, model=self._model_label).inc()
            results.append(
                FrameResult(
                    camera_id=frame.camera_id,
                    seq=frame.seq,
                    captured_ms=frame.captured_ms,
                    captured_mono=frame.captured_mono,
                    width=frame.width,
                    height=frame.height,
                    model_size=self.info.size,
                    model_name=self.info.name,
                    detections=dets,
                )
            )
        return results
