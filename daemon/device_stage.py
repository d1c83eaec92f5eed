"""The device path of one inference stage: YUV frames -> batch tensor -> engine, on one stream.

`DeviceInference.run(frames)` is what the inference stage calls in place of
`engine.run(BatchTensor.fill(frames))` when `[engine] device` chose CuPy (`daemon.xp
.choose_device`): each frame's YUV planes (`daemon.hwdecode.yuv_frame`; CPU-decoded ones
uploaded through pinned buffers) are letterboxed into the preallocated device batch (the CUDA
kernel where given, else the xp code), the engine runs it through IO binding without a host
sync, and the output stays on the device for `decode_batch(xp, ...)`, all queued on the
engine's CUDA stream. When the engine cannot run on the device right now (a breaker serving
on its CPU fallback, or `xp` is NumPy), the batch goes through `engine.run` on the host and the
output is put back on `xp`: the same code path with NumPy is how it is tested here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from daemon.device_preprocess import DeviceBatchTensor, YuvFrame
from daemon.engine_types import DeviceEngine, InferenceEngine
from daemon.frames import Letterbox
from daemon.hwdecode import YuvUploader, yuv_frame
from daemon.model_file import ModelInfo
from daemon.xp import ArrayModule, is_device_array, to_host


class DeviceInference:
    """Batch tensor and uploads for one worker of one model size (one thread)."""

    def __init__(
        self, xp: ArrayModule, engine: InferenceEngine, info: ModelInfo, max_batch: int, *, kernel: Any | None = None
    ) -> None:
        self.xp = xp
        self.engine = engine
        self.tensor = DeviceBatchTensor(xp, max_batch, info.size, info.convention, kernel=kernel)
        self.uploader = YuvUploader(xp)

    def _stream(self) -> Any:
        stream = getattr(self.engine, "cuda_stream", None) if self.xp is not np else None
        return stream if stream is not None else contextlib.nullcontext()

    def fill(self, frames: Sequence[tuple[Any, Letterbox]]) -> Any:
        """The batch from (decoded frame or YuvFrame, letterbox) pairs, on `xp`'s device."""
        made = []
        for slot, (decoded, lb) in enumerate(frames):
            yuv = decoded
            if not isinstance(decoded, YuvFrame):  # an av.VideoFrame: NVDEC's planes stay on the device
                yuv = yuv_frame(decoded, self.xp if decoded.format.name == "cuda" else np)
            made.append((yuv if is_device_array(yuv.y) else self.uploader.upload(slot, yuv), lb))
        return self.tensor.fill(made)

    def run(self, frames: Sequence[tuple[Any, Letterbox]]) -> Any:
        """The model output for `frames`, on `xp`'s device (see the module docstring)."""
        with self._stream():
            batch = self.fill(frames)
            engine = self.engine
            if is_device_array(batch) and isinstance(engine, DeviceEngine) and engine.on_cuda:
                return engine.run_device(batch, synchronize=False)
            return self.xp.asarray(engine.run(to_host(batch)))
