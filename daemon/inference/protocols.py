"""The engine Protocols of the inference room: what the serving engine needs from a session and
from what builds one, and what the inference stage needs from the serving engine.

`daemon.inference.engine.Engine` (one ONNX Runtime session) satisfies `DeviceEngine`, and
`EngineFactory` satisfies `EngineBuilder`; `daemon.inference.serving.ServingEngine` (a lane
worker's engine: rebuilds, breaker, CPU fallback) satisfies `DeviceEngine`; tests use fakes.
`BatchSource` and `ResultOrder` are what a lane (`daemon.inference.lanes`) needs from batching,
which this room may not import: the builder (`daemon.pipeline`) wires `daemon.batching`'s in.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from daemon.core.frames import Frame, FrameResult
from daemon.inference.model_file import ModelInfo
from daemon.inference.providers import Placement

HostArray = npt.NDArray[np.float32]


class InferenceEngine(Protocol):
    """An engine's host path: NumPy in, NumPy out (every session has it; a CPU one only this)."""

    @property
    def max_batch(self) -> int: ...

    @property
    def providers(self) -> tuple[str, ...]: ...

    def run(self, batch: HostArray) -> HostArray: ...

    def close(self) -> None: ...


@runtime_checkable
class DeviceEngine(InferenceEngine, Protocol):
    """An engine that can also keep a batch on the GPU.

    `run_device` takes a CuPy batch written on `cuda_stream` and returns the model's output
    as a CuPy array (IO binding: nothing crosses to the host). Only meaningful when `on_cuda`.
    """

    @property
    def on_cuda(self) -> bool: ...

    @property
    def cuda_stream(self) -> Any | None: ...

    def run_device(self, batch: Any, *, synchronize: bool = ...) -> Any: ...


class EngineBuilder(Protocol):
    """Builds a verified, warmed-up engine and counts it in `session_builds{model,reason}`."""

    def build(self, info: ModelInfo, placement: Placement = ..., reason: str = ...) -> InferenceEngine: ...


class BatchSource(Protocol):
    """Where a lane's workers take their batches (`daemon.batching.batcher.Batcher`, wired by app)."""

    async def next_batch(self, busy_s: float = ...) -> list[Frame]: ...

    def set_share(self, share: float) -> None: ...

    def notify(self) -> None: ...

    def stop(self) -> None: ...


class ResultOrder(Protocol):
    """Hands a lane's results on in the order its batches were taken (`daemon.batching.batcher.InOrder`)."""

    def ticket(self) -> int: ...

    def complete(self, ticket: int, results: list[FrameResult]) -> list[FrameResult]: ...

    @property
    def issued(self) -> int: ...

    @property
    def published(self) -> int: ...
