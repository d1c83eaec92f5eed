"""One model size's inference stage: batch tensor, engine, post-processing, per-camera rules.

`infer()` runs in a lane worker's thread, never on the event loop. The batch tensor is
allocated once per worker in the model's input convention (`daemon.inference.layouts`); each
frame's letterboxed content is made (colour conversion and scaling of a live frame happen
here, see `Frame`), copied (in the model's channel order, scaled, centred or at the top-left)
straight into it, and the padding of a slot is rewritten only when its geometry changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from daemon.core.frames import Detection, Frame, FrameResult, Letterbox
from daemon.core.metrics import Metrics
from daemon.core.xp import array_module_of
from daemon.inference.device_preprocess import placed
from daemon.inference.device_stage import DeviceInference
from daemon.inference.layouts import InputConvention
from daemon.inference.model_file import ModelInfo
from daemon.inference.postprocess import decode_batch, source_mapping, to_detections
from daemon.inference.protocols import DeviceEngine


@dataclass(frozen=True, slots=True)
class CameraRules:
    """Per-camera post-processing: confidence threshold and class filter (ids of allowed labels).

    `track_floor` (a tracked camera: `[tracking] low_score`): detections from it up to
    `conf_threshold` are kept apart as the result's `weak` ones, which only the tracker's second
    stage sees; they are never published. NMS runs from the lower of the two, and since a box
    never suppresses a better one, the published detections are the same as without it.
    """

    conf_threshold: float
    classes: frozenset[int] | None = None
    track_floor: float | None = None

    @property
    def floor(self) -> float:
        """The lowest score this camera's image keeps out of NMS."""
        return self.conf_threshold if self.track_floor is None else min(self.conf_threshold, self.track_floor)


@dataclass(frozen=True, slots=True)
class PostprocessConfig:
    conf_threshold: float
    iou_threshold: float
    max_det: int


class BatchTensor:
    """A preallocated (rows, 3, S, S) input in the model's convention, letterbox padding kept between batches.

    `convention` (the model's): channel order (RGB or BGR planes), scale applied to 0..255
    pixels, letterbox content centred or at the top-left, pad value, dtype (float32 or
    float16), and a static batch: such a model always gets exactly its batch size, the slots
    no frame uses filled with padding. Otherwise `rows` is `max_batch` and `fill` returns the
    leading `len(frames)` images.

    `pixels` (a session with the pixel prefix, `daemon.inference.pixel_input`): the tensor holds
    the `uint8` planes as they are, padding `pad_value`; the graph casts and scales them.
    """

    def __init__(
        self, max_batch: int, size: int, convention: InputConvention | None = None, *, pixels: bool = False
    ) -> None:
        self.size = size
        self.convention = convention or InputConvention()
        conv = self.convention
        self.rows = conv.batch if conv.batch is not None else max_batch
        if max_batch > self.rows:
            raise ValueError(f"batches of {max_batch} for a model with a static batch of {self.rows}")
        self._pixels = pixels
        self._dtype: type[np.generic] = np.uint8 if pixels else np.float16 if conv.dtype == "float16" else np.float32
        self._scale = np.float32(conv.scale)
        self._pad = self._dtype(conv.pad_value if pixels else conv.pad_value * conv.scale)
        self._bgr = conv.color == "bgr"
        self.array: npt.NDArray[Any] = np.full((self.rows, 3, size, size), self._pad, dtype=self._dtype)
        self._geometry: list[Letterbox | None] = [None] * self.rows

    def fill(self, frames: list[Frame]) -> npt.NDArray[Any]:
        if len(frames) > self.rows:
            raise ValueError(f"{len(frames)} frames for a batch tensor of {self.rows}")
        for i, frame in enumerate(frames):
            lb = placed(frame.letterbox, self.convention)
            if lb.size != self.size:
                raise ValueError(f"frame for size {lb.size} in a {self.size} batch")
            if self._geometry[i] != lb:
                self.array[i].fill(self._pad)
                self._geometry[i] = lb
            region = self.array[i, :, lb.pad_y : lb.pad_y + lb.new_h, lb.pad_x : lb.pad_x + lb.new_w]
            planes = frame.planes
            ordered = (planes[2], planes[1], planes[0]) if self._bgr else planes
            for channel, plane in zip(region, ordered, strict=True):
                if self._pixels:
                    np.copyto(channel, plane)
                else:
                    np.multiply(plane, self._scale, out=channel, dtype=np.float32, casting="unsafe")
        if self.convention.batch is None:
            return self.array[: len(frames)]
        for i in range(len(frames), self.rows):  # a static batch: unused slots hold padding only
            if self._geometry[i] is not None:
                self.array[i].fill(self._pad)
                self._geometry[i] = None
        return self.array


class InferenceStage:
    """Runs batches of one model size: fill tensor -> engine -> decode + NMS -> FrameResults."""

    def __init__(
        self,
        info: ModelInfo,
        engine: DeviceEngine,
        *,
        max_batch: int,
        post: PostprocessConfig,
        rules: Mapping[str, CameraRules],
        metrics: Metrics,
        device: DeviceInference | None = None,
        pixels: bool = False,
    ) -> None:
        """`device` (lanes where `[engine] device` chose CUDA): the device path, taken for every
        batch it `serves`; the others (a breaker on its CPU fallback) take the host path below.
        `pixels`: the engine's sessions take `uint8` pixels (`engine.preprocess = "graph"`)."""
        self.info = info
        self.engine = engine
        self._tensor = BatchTensor(max_batch, info.size, info.convention, pixels=pixels)
        self._layout = info.decoding
        self._post = post
        self._rules = dict(rules)
        self._metrics = metrics
        self._device = device
        self._model_label = str(info.size)

    def set_rules(self, rules: Mapping[str, CameraRules]) -> None:
        """Each camera's rules from the next batch on (a reload; one reference swap, safe across threads)."""
        self._rules = dict(rules)

    def _rules_for(self, camera_id: str) -> CameraRules:
        rules = self._rules.get(camera_id)
        return rules if rules is not None else CameraRules(self._post.conf_threshold)

    def infer(self, frames: list[Frame]) -> list[FrameResult]:
        device = self._device
        cpu = self._metrics.stage_cpu
        if device is not None and device.serves(self.engine, frames):  # YUV planes -> device batch -> run_device
            with device.stream(self.engine):  # fill, inference, decode + NMS queued on the engine's stream
                started = cpu.letterbox.start()  # the host's share: uploads through pinned memory, the launches
                batch = device.fill([(f.decoded, f.letterbox) for f in frames])
                cpu.letterbox.stop(started)
                return self._infer(frames, batch, partial(device.infer, self.engine), None)
        started = cpu.letterbox.start()  # the frames' scaling (swscale, on first `planes`) and the fill
        batch = self._tensor.fill(frames)
        cpu.letterbox.stop(started)
        return self._infer(frames, batch, self.engine.run, np)

    def _infer(
        self, frames: list[Frame], batch: Any, run: Callable[[Any], Any], xp: ModuleType | None
    ) -> list[FrameResult]:
        """Run a filled batch and decode it (on `xp`, or where the output lies when None)."""
        cpu = self._metrics.stage_cpu
        started, cpu_started = time.perf_counter(), time.thread_time()
        run_started = cpu.session_run.start()
        output = run(batch)
        cpu.session_run.stop(run_started)
        self._metrics.inference_cpu_seconds.labels(model=self._model_label).inc(time.thread_time() - cpu_started)
        post_started = cpu.postprocess.start()
        self._metrics.inference_seconds.labels(model=self._model_label).observe(time.perf_counter() - started)
        self._metrics.batch_size.labels(model=self._model_label).observe(len(frames))
        rules = [self._rules_for(f.camera_id) for f in frames]
        rows = decode_batch(
            xp if xp is not None else array_module_of(output),
            output,
            conf_threshold=np.array([r.floor for r in rules], dtype=np.float32),
            iou_threshold=self._post.iou_threshold,
            max_det=self._post.max_det,
            layout=self._layout,
            images=len(frames),
            class_agnostic=self.info.class_agnostic_nms,
            iou_offset=np.array([f.letterbox.scale for f in frames]) if self.info.iou_plus_one else None,
        )
        results: list[FrameResult] = []
        for frame, frame_rows, rule in zip(frames, rows, rules, strict=True):
            mapping = source_mapping(placed(frame.letterbox, self._tensor.convention), self._tensor.convention.boxes)
            dets = to_detections(
                frame_rows, mapping, self.info.names, conf_threshold=rule.conf_threshold, classes=rule.classes
            )
            weak: tuple[Detection, ...] = ()
            if rule.floor < rule.conf_threshold:  # the complement of to_detections' `>= conf_threshold`
                below = frame_rows[frame_rows[:, 4] < rule.conf_threshold]
                weak = to_detections(below, mapping, self.info.names, conf_threshold=rule.floor, classes=rule.classes)
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
                    weak=weak,
                )
            )
        cpu.postprocess.stop(post_started)
        return results
