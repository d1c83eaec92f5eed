"""Execution providers: config names to ONNX Runtime's, and checking what a session really got.

ONNX Runtime quietly gives a session the CPU when the CUDA provider cannot load (and
`get_available_providers()` lists CUDA regardless), so the providers are read back from
every session: a missing first provider is a `ProviderError`, or, with
`engine.allow_fallback`, an ERROR event `provider_fallback`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import onnxruntime as ort
import structlog

from daemon.config.engine import CudaOptions, EngineConfig, Provider, TensorRTOptions

log = structlog.get_logger("beltsight.engine")

ORT_PROVIDERS: dict[Provider, str] = {
    "tensorrt": "TensorrtExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "cpu": "CPUExecutionProvider",
}

Placement = Literal["configured", "cuda", "cpu"]
"""configured: `engine.providers` with `engine.allow_fallback`; cuda: CUDA required (a breaker's
primary); cpu: CPU only (a breaker's fallback)."""

ProviderSpec = str | tuple[str, dict[str, str]]


class EngineError(Exception):
    """Base of the errors raised while building or running an inference session."""


class ProviderError(EngineError):
    """The session did not get the execution provider it was configured to require."""


def on_cuda(providers: Sequence[str]) -> bool:
    """Whether a session that got these (ORT) providers runs on CUDA."""
    return ORT_PROVIDERS["cuda"] in providers


def cuda_provider_options(cuda: CudaOptions, stream_ptr: int | None = None) -> dict[str, str]:
    """CUDA provider options from the config; `stream_ptr` shares a CuPy stream with ORT."""
    opts = {
        "device_id": str(cuda.device_id),
        "arena_extend_strategy": cuda.arena_extend_strategy,
        "cudnn_conv_algo_search": cuda.cudnn_conv_algo_search,
        "do_copy_in_default_stream": "1" if cuda.do_copy_in_default_stream else "0",
    }
    if cuda.gpu_mem_limit_mb is not None:
        opts["gpu_mem_limit"] = str(cuda.gpu_mem_limit_mb * 1024 * 1024)
    if stream_ptr is not None:
        opts["has_user_compute_stream"] = "1"
        opts["user_compute_stream"] = str(stream_ptr)
    return opts


def tensorrt_provider_options(
    trt: TensorRTOptions, cuda: CudaOptions, cache_dir: Path, stream_ptr: int | None = None
) -> dict[str, str]:
    """TensorRT provider options: engine and timing caches in `cache_dir` (one directory per
    model/ORT/TensorRT version, `daemon.inference.tensorrt_cache`), FP16 if asked, the shared stream."""
    opts = {
        "device_id": str(cuda.device_id),
        "trt_engine_cache_enable": "1",
        "trt_engine_cache_path": str(cache_dir),
        "trt_timing_cache_enable": "1",
        "trt_timing_cache_path": str(cache_dir),
        "trt_fp16_enable": "1" if trt.fp16 else "0",
    }
    if trt.max_workspace_mb is not None:
        opts["trt_max_workspace_size"] = str(trt.max_workspace_mb * 1024 * 1024)
    if trt.builder_optimization_level is not None:
        opts["trt_builder_optimization_level"] = str(trt.builder_optimization_level)
    if stream_ptr is not None:
        opts["has_user_compute_stream"] = "1"
        opts["user_compute_stream"] = str(stream_ptr)
    return opts


def provider_specs(
    names: Sequence[Provider],
    cuda: CudaOptions,
    stream_ptr: int | None = None,
    *,
    tensorrt: TensorRTOptions | None = None,
    trt_cache_dir: Path | None = None,
) -> list[ProviderSpec]:
    """Config provider names -> the `providers` argument of `ort.InferenceSession`
    ("tensorrt" needs `trt_cache_dir`, from `daemon.inference.tensorrt_cache.prepare`)."""
    specs: list[ProviderSpec] = []
    for n in names:
        if n == "cuda":
            specs.append((ORT_PROVIDERS[n], cuda_provider_options(cuda, stream_ptr)))
        elif n == "tensorrt":
            if trt_cache_dir is None:
                raise ValueError("the TensorRT provider needs its cache directory")
            trt = tensorrt or TensorRTOptions()
            specs.append((ORT_PROVIDERS[n], tensorrt_provider_options(trt, cuda, trt_cache_dir, stream_ptr)))
        else:
            specs.append(ORT_PROVIDERS[n])
    return specs


def cpu_cores() -> int:
    """Cores this process may run on (its affinity mask: a systemd CPUAffinity= or taskset counts)."""
    return max(1, len(os.sched_getaffinity(0)))


MAX_AUTO_WORKERS = 4


def lane_workers(cfg: EngineConfig) -> int:
    """Sessions per model size running batches side by side (`engine.workers`, 0 = auto)."""
    if cfg.workers:
        return cfg.workers
    return min(cpu_cores(), MAX_AUTO_WORKERS) if cfg.providers[0] == "cpu" else 1


def worker_batch(cfg: EngineConfig) -> int | None:
    """Frames per batch of one worker (`engine.worker_batch`; auto: 1 on the CPU, None = the
    worker's share of the cameras elsewhere)."""
    if cfg.worker_batch:
        return cfg.worker_batch
    return 1 if cfg.providers[0] == "cpu" else None


def intra_op_threads(cfg: EngineConfig) -> int:
    """ORT intra-op threads per session: `engine.intra_op_threads`, or (0 = auto) the cores shared
    out among the lane's workers; 0 (ORT's default, one per core) for a single worker. A breaker's
    CPU fallback gets the same share: when the GPU fails, every worker falls back at once."""
    if cfg.intra_op_threads:
        return cfg.intra_op_threads
    workers = lane_workers(cfg)
    return 0 if workers <= 1 else max(1, cpu_cores() // workers)


@functools.cache
def register_shared_cpu_arena() -> None:
    """Register one CPU arena allocator in ONNX Runtime's environment, once per process; sessions
    opt in with `session.use_env_allocators` (see `engine.shared_cpu_arena`)."""
    mem = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
    try:
        ort.create_and_register_allocator(mem, ort.OrtArenaCfg(0, -1, -1, -1))  # ORT's arena defaults
    except Exception as exc:  # registered before (other code, or a concurrent first call): share that one
        log.debug("shared_cpu_arena_exists", error=str(exc))


def session_options(cfg: EngineConfig) -> ort.SessionOptions:
    opts = ort.SessionOptions()
    if cfg.shared_cpu_arena:
        register_shared_cpu_arena()
        opts.add_session_config_entry("session.use_env_allocators", "1")
        # Weights outside the shared arena: plain allocations (mmapped when large), returned to
        # the OS when a rebuilt session's predecessor is released, instead of holes in the arena
        # that the next build may not fit into. The arena keeps only per-run activations.
        opts.add_session_config_entry("session.use_device_allocator_for_initializers", "1")
    opts.intra_op_num_threads = intra_op_threads(cfg)
    opts.inter_op_num_threads = 1
    # Spinning ORT workers steal the cores that the camera decode threads need (measured by
    # python -m tools.bench on 2 cores: 2.5 -> 4+ img/s with spinning off under shared load).
    opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if cfg.allow_spinning else "0")
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    return opts


def placement_providers(cfg: EngineConfig, placement: Placement) -> tuple[list[Provider], bool]:
    """(providers to ask for, whether losing the first one is allowed)."""
    if placement == "configured":
        return list(cfg.providers), cfg.allow_fallback
    if placement == "cuda":  # the GPU providers configured (TensorRT kept), the CPU for the rest
        gpu = [p for p in cfg.providers if p != "cpu"]
        return [*(gpu if "cuda" in gpu else ["cuda"]), "cpu"], False
    return ["cpu"], False


def _fix_hint(first: Provider) -> str:
    if first == "tensorrt":
        return (
            f"onnxruntime-gpu {ort.__version__} loads the TensorRT it was built for (libnvinfer) from the "
            "library path (JetPack ships it; on x86_64 NVIDIA's tensorrt packages); run "
            '`beltsight doctor`, or set engine.providers = ["cuda", "cpu"] to run without TensorRT'
        )
    if first == "cuda":
        return (
            f"onnxruntime-gpu {ort.__version__} needs CUDA 13 and cuDNN 9 on the library path "
            "(NVIDIA's wheel on Jetson); install them and run `beltsight doctor`, "
            'or set engine.providers = ["cpu"] to run on the CPU on purpose'
        )
    return f"check the ONNX Runtime installation ({ort.__version__})"


def verify_providers(model: str, asked: Sequence[Provider], got: Sequence[str], *, allow_fallback: bool) -> None:
    """Raise ProviderError (or log `provider_fallback`) when the first asked provider is missing."""
    if ORT_PROVIDERS[asked[0]] in got:
        return
    asked_ort = [ORT_PROVIDERS[p] for p in asked]
    if not allow_fallback:
        raise ProviderError(
            f"model {model}: asked ONNX Runtime for {asked_ort} but the session got {list(got)}; "
            f"{_fix_hint(asked[0])} (or set engine.allow_fallback = true to accept this)"
        )
    log.error("provider_fallback", model=model, asked=asked_ort, got=list(got), hint=_fix_hint(asked[0]))
