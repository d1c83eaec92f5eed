"""ONNX Runtime sessions: providers verified, warm-up, IO binding (`daemon.inference.iobinding`).

Model files are checked by `daemon.inference.model_file` (`load_model_info`) and providers
mapped and verified by `daemon.inference.providers`: a session whose first configured
provider is missing raises `ProviderError`, or with `engine.allow_fallback` logs an ERROR
event `provider_fallback` and serves anyway.

An `Engine` is one session for one model size, self-contained and cheap to build twice, so
a lane worker's `daemon.inference.serving.ServingEngine` can keep a CPU session beside the GPU
one and build a replacement beside the serving one before a swap (`EngineFactory.build`).
Errors from `session.run` are raised as `InferenceError`, the one exception a breaker counts.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
import structlog

from daemon.config.engine import EngineConfig, Provider
from daemon.core.metrics import Metrics
from daemon.core.xp import GpuUnavailableError, get_xp, is_device_array, to_host
from daemon.inference import iobinding, tensorrt_cache
from daemon.inference.layouts import warm_up_mismatch
from daemon.inference.layouts.registry import family_of
from daemon.inference.model_file import ModelError, ModelInfo
from daemon.inference.postprocess import join_outputs
from daemon.inference.providers import (
    EngineError,
    Placement,
    on_cuda,
    placement_providers,
    provider_specs,
    session_options,
    verify_providers,
    worker_batch,
)

log = structlog.get_logger("beltsight.engine")

HostArray = npt.NDArray[np.float32]
_ORT_FLOAT_TYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64"}
"""ONNX Runtime's output type names -> the array dtype a preallocated output buffer takes."""


class InferenceError(EngineError):
    """`session.run` failed (what a circuit breaker counts)."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _cuda_stream(cfg: EngineConfig, names: Sequence[Provider]) -> Any | None:
    """A CuPy stream for ORT to share when CuPy can use the configured device, else None."""
    if "cuda" not in names:
        return None
    try:
        cupy = get_xp("cuda", cfg.cuda.device_id)
    except GpuUnavailableError:
        return None
    with cupy.cuda.Device(cfg.cuda.device_id):
        return cupy.cuda.Stream(non_blocking=True)


class Engine:
    """One ONNX Runtime session for one model size, verified and warmed up.

    `run` takes a float32 batch [n, 3, S, S] (n <= `max_batch`) as a NumPy array, or on
    CUDA also a CuPy array (bound by device pointer, no host copy), and returns the host
    output [n, 4 + C, A]. `run_device` returns the output as a CuPy array for NMS on the
    GPU. Produce CuPy inputs on `cuda_stream` (ORT runs on it too); otherwise the current
    stream is synchronised first. Call from one worker thread; `close` may come from another.
    """

    def __init__(
        self,
        session: ort.InferenceSession,
        info: ModelInfo,
        *,
        max_batch: int,
        device_id: int = 0,
        cuda_stream: Any | None = None,
        pixels: bool = False,
    ) -> None:
        self.info = info
        self.pixels = pixels
        """The session takes `uint8` pixels (`daemon.inference.pixel_input`); `run` still accepts
        a float batch in the model's convention (the warm-up's, a swap's canary) and converts it."""
        self.max_batch = max_batch
        self.device_id = device_id
        self.cuda_stream = cuda_stream
        self.warmup_s: float | None = None
        self._session: ort.InferenceSession | None = session
        self._providers = tuple(session.get_providers())
        self._lock = threading.Lock()

    @classmethod
    def create(
        cls,
        info: ModelInfo,
        cfg: EngineConfig,
        *,
        placement: Placement = "configured",
        verify: bool = True,
    ) -> Engine:
        """Build the session, verify its providers (unless `verify` is False) and warm it up."""
        names, allow_fallback = placement_providers(cfg, placement)
        stream = _cuda_stream(cfg, names)
        trt = tensorrt_cache.prepare(cfg.tensorrt, info.path) if "tensorrt" in names else None
        with tensorrt_cache.building(trt) if trt is not None else contextlib.nullcontext():
            return cls._build(info, cfg, names=names, fallback=allow_fallback, stream=stream, trt=trt, verify=verify)

    @classmethod
    def _build(
        cls,
        info: ModelInfo,
        cfg: EngineConfig,
        *,
        names: list[Provider],
        fallback: bool,
        stream: Any | None,
        trt: tensorrt_cache.CacheState | None,
        verify: bool,
    ) -> Engine:
        stream_ptr = int(stream.ptr) if stream is not None else None
        trt_dir = trt.directory if trt is not None else None
        pixels = cfg.pixels_in_graph
        model: str | bytes = str(info.path)
        if pixels:  # the prefix is built with onnx, which only "graph" needs: imported only then
            model = importlib.import_module("daemon.inference.pixel_input").pixel_model_bytes(info)
        try:
            session = ort.InferenceSession(
                model,
                sess_options=session_options(cfg),
                providers=provider_specs(names, cfg.cuda, stream_ptr, tensorrt=cfg.tensorrt, trt_cache_dir=trt_dir),
            )
        except Exception as exc:
            raise EngineError(f"model {info.path}: could not create a session on {names}: {exc}") from exc
        if verify:
            verify_providers(info.name, names, session.get_providers(), allow_fallback=fallback)
        # the largest batch this session will run: warm-up and the input buffer are sized by it
        max_batch = min(n for n in (cfg.max_batch, info.batch, worker_batch(cfg)) if n is not None)
        engine = cls(
            session,
            info,
            max_batch=max_batch,
            device_id=cfg.cuda.device_id,
            cuda_stream=stream if on_cuda(session.get_providers()) else None,
            pixels=pixels,
        )
        engine.warm_up()
        return engine

    @property
    def providers(self) -> tuple[str, ...]:
        """The providers the session actually got, in ORT's priority order."""
        return self._providers

    @property
    def on_cuda(self) -> bool:
        return on_cuda(self._providers)

    def warm_up(self) -> float:
        """One `max_batch` zero batch (a static-batch model's own size; allocates arenas, picks
        kernels); returns seconds taken."""
        size = self.info.size
        dtype = np.uint8 if self.pixels else self.info.input_dtype
        zeros = np.zeros((self.info.batch or self.max_batch, 3, size, size), dtype=dtype)
        start = time.perf_counter()
        out = self.run(zeros)
        self.warmup_s = time.perf_counter() - start
        problem = warm_up_mismatch(self.info.decoding, out, int(zeros.shape[0]))
        if problem:
            raise ModelError(self.info.path, f"output has shape {list(out.shape)} at run time, {problem}")
        return self.warmup_s

    def _check_batch(self, batch: Any) -> None:
        size, static = self.info.size, self.info.batch
        dtype = "uint8" if self.pixels else self.info.convention.dtype
        shape = tuple(batch.shape)
        if len(shape) != 4 or shape[1:] != (3, size, size) or str(batch.dtype) != dtype:
            raise ValueError(f"batch must be {dtype} [n, 3, {size}, {size}], got {batch.dtype} {list(shape)}")
        if static is not None and shape[0] != static:
            raise ValueError(f"batch of {shape[0]} images; this model's batch is static: exactly {static}")
        if static is None and not 1 <= shape[0] <= self.max_batch:
            raise ValueError(f"batch of {shape[0]} images; this engine takes 1..{self.max_batch}")

    def run(self, batch: HostArray | Any) -> HostArray:
        """Inference on one batch; returns the host output [n, 4 + C, A]."""
        if is_device_array(batch):
            return to_host(self.run_device(batch))
        if self.pixels and batch.dtype != np.uint8:
            batch = self._to_pixels(batch)
        self._check_batch(batch)
        with self._lock:
            session = self._live_session()
            try:
                outs = session.run(list(self.info.output_names), {self.info.input_name: batch})
            except Exception as exc:
                raise InferenceError(f"model {self.info.name} on {self._providers[0]}: {_first_line(exc)}") from exc
        out: HostArray = join_outputs(np, outs, self.info.decoding)
        return out

    def _to_pixels(self, batch: npt.NDArray[Any]) -> npt.NDArray[np.uint8]:
        """A float batch in the model's convention as the pixels it was scaled from."""
        scaled = np.rint(np.asarray(batch, dtype=np.float32) / np.float32(self.info.convention.scale))
        pixels: npt.NDArray[np.uint8] = np.clip(scaled, 0, 255).astype(np.uint8)
        return pixels

    def run_device(self, batch: HostArray | Any, *, synchronize: bool = True) -> Any:
        """Inference with IO binding on CUDA: input and outputs stay on the device; returns the
        joined output as CuPy (every layout, float32 or float16 input; `daemon.inference.iobinding`).
        With the shared stream, `synchronize=False` returns without waiting for ORT's kernels:
        work queued next on `cuda_stream` (the NMS) runs after them, in order."""
        if not self.on_cuda:
            raise ValueError(f"run_device needs a CUDA session; this one has {list(self._providers)}")
        self._check_batch(batch)
        cupy = get_xp("cuda", self.device_id)
        dtype = cupy.float16 if self.info.convention.dtype == "float16" else cupy.float32
        if self.pixels:
            dtype = cupy.uint8
        with cupy.cuda.Device(self.device_id), self._lock:
            session = self._live_session()
            current = cupy.cuda.get_current_stream()
            shared = self.cuda_stream is not None and current.ptr == self.cuda_stream.ptr
            if not shared:
                current.synchronize()  # the input may still be being written on another stream
            stream = self.cuda_stream if self.cuda_stream is not None else current
            with stream:
                images = cupy.ascontiguousarray(cupy.asarray(batch, dtype=dtype))
                fixed = self._preallocated(cupy, session, int(images.shape[0]))
                if self.cuda_stream is None:
                    stream.synchronize()  # ORT runs on its own stream: the upload must be complete
            try:
                outs = iobinding.run_bound(
                    session,
                    images,
                    input_name=self.info.input_name,
                    output_names=self.info.output_names,
                    device_id=self.device_id,
                    cupy=cupy,
                    preallocated=fixed,
                    synchronize=synchronize or self.cuda_stream is None,
                )
            except Exception as exc:
                raise InferenceError(f"model {self.info.name} on {self._providers[0]}: {_first_line(exc)}") from exc
            with stream:
                return join_outputs(cupy, outs, self.info.decoding)

    def _preallocated(self, cupy: Any, session: ort.InferenceSession, batch: int) -> dict[str, Any]:
        """The output buffer the layout family knows the shape of, in the type the graph declares
        for it (float16 exports get a float16 buffer); {} where ONNX Runtime must allocate."""
        layout = self.info.decoding
        shape = family_of(layout).output_shape(layout, batch)
        if shape is None or len(layout.outputs) != 1:
            return {}
        declared = {o.name: o.type for o in session.get_outputs()}.get(layout.outputs[0], "")
        dtype = _ORT_FLOAT_TYPES.get(declared)
        return {} if dtype is None else {layout.outputs[0]: cupy.empty(shape, getattr(cupy, dtype))}

    def _live_session(self) -> ort.InferenceSession:
        if self._session is None:
            raise InferenceError(f"model {self.info.name}: engine is closed")
        return self._session

    def close(self) -> None:
        """Release the session (waits for a run in progress); later runs raise InferenceError."""
        with self._lock:
            self._session = None


class EngineFactory:
    """Builds engines from one engine config; counts builds by reason (startup, rebuild, ...)."""

    def __init__(self, cfg: EngineConfig, metrics: Metrics | None = None) -> None:
        self.cfg = cfg
        self.metrics = metrics

    def build(
        self,
        info: ModelInfo,
        placement: Placement = "configured",
        reason: str = "startup",
    ) -> Engine:
        engine = Engine.create(info, self.cfg, placement=placement)
        if self.metrics is not None:
            self.metrics.session_builds.labels(model=str(info.size), reason=reason).inc()
        log.info(
            "session_built",
            model=info.name,
            size=info.size,
            reason=reason,
            placement=placement,
            providers=list(engine.providers),
            warmup_ms=round((engine.warmup_s or 0.0) * 1000, 1),
        )
        return engine
