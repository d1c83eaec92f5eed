"""The engine Protocols every stage imports: what the inference stage, the breaker and the
rebuilds need from an engine, and from what builds one.

`daemon.inference.engine.Engine` and `EngineFactory` satisfy them; `daemon.inference.rebuild.RebuildingEngine` and
`daemon.inference.resilience.ResilientEngine` wrap one and satisfy `InferenceEngine` themselves; tests use
fakes. `daemon.inference.rebuild` and `daemon.inference.resilience` re-export these names for older imports.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from daemon.core.frames import StatusEvent
from daemon.inference.model_file import ModelInfo
from daemon.inference.providers import Placement

__all__ = ["Clock", "DeviceEngine", "EngineBuilder", "HostArray", "InferenceEngine", "StatusCallback"]

HostArray = npt.NDArray[np.float32]
StatusCallback = Callable[[StatusEvent], None]


class InferenceEngine(Protocol):
    """What the inference stage needs from an engine (the host path: NumPy in, NumPy out)."""

    @property
    def max_batch(self) -> int: ...

    @property
    def providers(self) -> tuple[str, ...]: ...

    def run(self, batch: HostArray) -> HostArray: ...

    def close(self) -> None: ...


@runtime_checkable
class DeviceEngine(Protocol):
    """An engine that can also keep a batch on the GPU (`daemon.inference.engine.Engine` on CUDA).

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


class Clock(Protocol):
    """The two clocks read here (the `time` module satisfies it)."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...
