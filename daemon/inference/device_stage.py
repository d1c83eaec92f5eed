"""The device path of one inference stage: YUV frames -> batch tensor -> engine, on one stream.

Inside `stream(engine)`, the inference stage calls `fill` then `infer` in place of
`engine.run(BatchTensor.fill(frames))` when `[engine] device` chose CUDA
(`daemon.inference.placement`): each frame's YUV planes (`daemon.core.yuv.yuv_frame`;
CPU-decoded ones uploaded through pinned buffers) are letterboxed into the preallocated device
batch (the CUDA kernel where given, else the xp code), the engine runs it through IO binding
without a host sync (`run_device`), and the output stays on the device for
`decode_batch(xp, ...)`, all queued on the engine's CUDA stream. `run(engine, frames)` does fill
and run in one call for tools and tests: where the engine is not on CUDA it runs the batch
through `engine.run` on the host and puts the output back on `xp`. With NumPy as `xp` the same
code runs here.

The stage takes this path for a batch when `serves(engine, frames)`: every frame carries its
decoded planes and the engine can run on the device now; otherwise (a breaker serving on its
CPU fallback) the host path of the CPU pipeline.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from daemon.core.frames import Frame, Letterbox
from daemon.core.xp import ArrayModule, is_device_array, to_host
from daemon.core.yuv import YuvFrame, YuvUploader, yuv_frame
from daemon.inference.device_preprocess import DeviceBatchTensor
from daemon.inference.engine import InferenceError
from daemon.inference.model_file import ModelInfo
from daemon.inference.protocols import DeviceEngine


class DeviceInference:
    """Batch tensor and uploads for one worker of one model size (one thread); the engine is the
    stage's, passed in."""

    def __init__(self, xp: ArrayModule, info: ModelInfo, max_batch: int, *, kernel: Any | None = None) -> None:
        self.xp = xp
        self.info = info
        self.tensor = DeviceBatchTensor(xp, max_batch, info.size, info.convention, kernel=kernel)
        self.uploader = YuvUploader(xp)

    def stream(self, engine: DeviceEngine) -> contextlib.AbstractContextManager[Any]:
        """The engine's CUDA stream as CuPy's current stream (a no-op with NumPy): fill, run and
        the stage's decode + NMS inside it are queued on that one stream, in order."""
        stream = engine.cuda_stream if self.xp is not np else None
        context: contextlib.AbstractContextManager[Any] = stream if stream is not None else contextlib.nullcontext()
        return context

    def serves(self, engine: DeviceEngine, frames: Sequence[Frame]) -> bool:
        """Whether this batch can take the device path now: the engine is on the device (not a
        breaker's CPU fallback) and every frame carries its decoded planes (`Frame.decoded`)."""
        return engine.on_cuda and all(f.decoded is not None for f in frames)

    def infer(self, engine: DeviceEngine, batch: Any) -> Any:
        """The engine's `run_device` on a filled batch, without a host sync: the output stays on
        the device for the decode queued after it on the same stream. Call inside `stream()`."""
        before = engine.cuda_stream
        output = engine.run_device(batch, synchronize=False)
        after = engine.cuda_stream
        if after is not None and after is not before:  # a rebuilt session swapped in: its own stream
            after.synchronize()
        return output

    def fill(self, frames: Sequence[tuple[Any, Letterbox]]) -> Any:
        """The batch from (decoded frame or YuvFrame, letterbox) pairs, on `xp`'s device."""
        made = []
        for slot, (decoded, lb) in enumerate(frames):
            yuv = decoded
            if not isinstance(decoded, YuvFrame):  # an av.VideoFrame: NVDEC's planes stay on the device
                try:
                    yuv = yuv_frame(decoded, self.xp if decoded.format.name == "cuda" else np)
                except ValueError as exc:  # e.g. a 10-bit NVDEC frame: this batch is dropped, not the lane
                    raise InferenceError(f"model {self.info.name}: frame not letterboxed on the device: {exc}") from exc
            made.append((yuv if is_device_array(yuv.y) else self.uploader.upload(slot, yuv), lb))
        return self.tensor.fill(made)

    def run(self, engine: DeviceEngine, frames: Sequence[tuple[Any, Letterbox]]) -> Any:
        """The model output for `frames`, on `xp`'s device (see the module docstring)."""
        with self.stream(engine):
            batch = self.fill(frames)
            if is_device_array(batch) and engine.on_cuda:
                return engine.run_device(batch, synchronize=False)
            return self.xp.asarray(engine.run(to_host(batch)))
