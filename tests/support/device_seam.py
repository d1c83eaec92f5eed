"""The device path without a GPU: NumPy as the "cuda" array module (`SEAM`), and real CPU engines
behind the `DeviceEngine` interface (`CudaStandIn`, built by `StandInFactory`)."""

from __future__ import annotations

from typing import cast

import numpy as np

from daemon.config.engine import EngineConfig
from daemon.core.metrics import Metrics
from daemon.core.xp import DeviceChoice
from daemon.inference.engine import Engine, EngineFactory, InferenceError
from daemon.inference.model_file import ModelInfo
from daemon.inference.protocols import HostArray, InferenceEngine
from daemon.inference.providers import Placement

SEAM = DeviceChoice("cuda", "cuda", np, "test: the device path with NumPy as its array module")


class CudaStandIn:
    """A real CPU `Engine` behind the `DeviceEngine` interface, standing in for a CUDA session
    (no GPU here): `run_device` runs the batch through ORT on the host, and fails while `failing`
    (as a GPU fault would); counts which entry point served each batch."""

    def __init__(self, inner: Engine) -> None:
        self.inner = inner
        self.failing = False
        self.runs = 0
        self.device_runs = 0

    @property
    def max_batch(self) -> int:
        return self.inner.max_batch

    @property
    def providers(self) -> tuple[str, ...]:
        return ("CUDAExecutionProvider", *self.inner.providers)

    @property
    def on_cuda(self) -> bool:
        return True

    @property
    def cuda_stream(self) -> None:
        return None

    def run(self, batch: HostArray) -> HostArray:
        self.runs += 1
        return self._serve(batch)

    def run_device(self, batch: HostArray, *, synchronize: bool = True) -> HostArray:
        self.device_runs += 1
        return self._serve(batch)

    def _serve(self, batch: HostArray) -> HostArray:
        if self.failing:
            raise InferenceError("stand-in: injected fault (CUDA error: an illegal memory access)")
        return self.inner.run(batch)

    def close(self) -> None:
        self.inner.close()


class StandInFactory:
    """Real CPU engines for every placement; those not on the CPU come as `CudaStandIn`."""

    def __init__(self, cfg: EngineConfig, metrics: Metrics | None = None) -> None:
        self.inner = EngineFactory(cfg, metrics or Metrics())
        self.built: list[tuple[Placement, InferenceEngine]] = []

    def build(self, info: ModelInfo, placement: Placement = "configured", reason: str = "startup") -> InferenceEngine:
        engine: InferenceEngine = self.inner.build(info, "cpu", reason)
        if placement != "cpu":
            engine = CudaStandIn(cast(Engine, engine))
        self.built.append((placement, engine))
        return engine
