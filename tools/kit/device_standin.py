"""The device path without a GPU, for the tests and the null-model bench: NumPy as the "cuda" array
module (`SEAM`), and real CPU engines behind the `DeviceEngine` interface (`CudaStandIn`, built by
`StandInFactory`). The tests run the device path's own letterbox (NumPy's); the bench (`BENCH`)
stands in for the GPU's with `HostShareKernel`, which does only what the host does for it."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import numpy.typing as npt

from daemon.config.seam import EngineConfig
from daemon.core.seam import DeviceChoice, Letterbox, Metrics
from daemon.inference.seam import Engine, EngineFactory, InferenceEngine, InferenceError, ModelInfo, Placement

HostArray = npt.NDArray[Any]

SEAM = DeviceChoice("cuda", "cuda", np, "test: the device path with NumPy as its array module")


class HostShareKernel:
    """Stands in for the CUDA letterbox kernel (`DeviceChoice.kernel`) where the model ignores its
    input (the null model): it does the host's share of the device path's fill for each frame, the
    copy of its planes into staging buffers (what `YuvUploader` copies into pinned memory before
    the asynchronous upload: with NumPy as `xp` the uploader hands the planes on as they are), and
    leaves the letterbox, GPU work, undone: the batch keeps its padding."""

    def __init__(self, xp: Any) -> None:
        self._staging: dict[tuple[int, int, tuple[int, ...]], HostArray] = {}

    def write(self, array: Any, index: int, frame: Any, *, lb: Letterbox, k: Any, conv: Any) -> None:
        planes = (frame.y, frame.u) if frame.v is None else (frame.y, frame.u, frame.v)
        for n, plane in enumerate(planes):
            key = (index, n, tuple(plane.shape))
            staging = self._staging.get(key)
            if staging is None:
                staging = self._staging[key] = np.empty(plane.shape, np.uint8)
            np.copyto(staging, plane)


BENCH = DeviceChoice(
    "cuda", "cuda", np, "bench: the device path's host side, the GPU's work left out", kernel=HostShareKernel
)


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
