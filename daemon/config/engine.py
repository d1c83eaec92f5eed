"""The `[engine]` settings section: providers, array device, batching, threads, breaker, rebuilds,
CUDA and TensorRT options."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator

from daemon.config.base import Seconds, Section


class CudaOptions(Section):
    """`[engine.cuda]`: ONNX Runtime's CUDA execution provider options, and the GPU the daemon uses."""

    device_id: int = Field(0, ge=0)
    """The GPU (CUDA device index) for the CUDA and TensorRT providers, CuPy pre- and post-processing
    (`device`), NVDEC decoding, the NVML thermal sensor and `beltsight doctor`."""
    gpu_mem_limit_mb: int | None = Field(None, gt=0)
    """Cap on the CUDA provider's memory arena in MiB (`gpu_mem_limit`; None: ONNX Runtime's default, no cap)."""
    arena_extend_strategy: Literal["kNextPowerOfTwo", "kSameAsRequested"] = "kSameAsRequested"
    """How the CUDA arena grows: by exactly what is requested, or in powers of two (ORT's default)."""
    cudnn_conv_algo_search: Literal["EXHAUSTIVE", "HEURISTIC", "DEFAULT"] = "HEURISTIC"
    """How cuDNN convolution algorithms are chosen: EXHAUSTIVE benchmarks them all (a slower first
    run), HEURISTIC asks cuDNN's heuristics, DEFAULT takes the default algorithm."""
    do_copy_in_default_stream: bool = True
    """ORT's `do_copy_in_default_stream`: memory copies on the default stream (false: separate
    streams, possibly faster, with the race conditions ONNX Runtime warns about)."""


class BreakerConfig(Section):
    """Circuit breaker around the primary (first-provider) engine, with a CPU fallback session."""

    enabled: bool = True
    """Only takes effect when the primary provider is not the CPU."""
    fail_max: int = Field(3, ge=1)
    """Consecutive failed batches that open the breaker."""
    reset_timeout_s: Seconds = 30.0
    """Open this long, then one batch probes a freshly built primary; success closes it."""


class RebuildConfig(Section):
    """Periodic session rebuilds (built and warmed up beside the serving one, then swapped in)."""

    every_frames: int = Field(0, ge=0)
    """Rebuild after this many frames (0: never)."""
    every_s: float = Field(0.0, ge=0)
    """Rebuild after this many seconds (0: never)."""
    max_growth_mb: float = Field(0.0, ge=0)
    """Rebuild when RSS or device memory grew by more than this since the last build (0: off)."""


class TensorRTOptions(Section):
    """`[engine.tensorrt]`: used when `providers` starts with "tensorrt" (opt-in; on a Jetson the
    provider to choose). Engines and timing caches live in `cache_dir`, one subdirectory per
    model file, ONNX Runtime and TensorRT version (`daemon.inference.tensorrt_cache.cache_key`): a cache
    built for anything else is rebuilt, not loaded. The first build takes minutes (tens of them
    on a Jetson); it happens while the session is built and warmed up, before READY."""

    fp16: bool = False
    """Let TensorRT choose FP16 kernels (`trt_fp16_enable`): faster, slightly different boxes."""
    cache_dir: Path | None = None
    """Where engine and timing caches go; default the state directory: `$STATE_DIRECTORY/tensorrt`
    (systemd's StateDirectory=), else `$XDG_STATE_HOME/beltsight/tensorrt` (~/.local/state)."""
    max_workspace_mb: int | None = Field(None, gt=0)
    """TensorRT's builder workspace (`trt_max_workspace_size`; None: TensorRT's default)."""
    builder_optimization_level: int | None = Field(None, ge=0, le=5)
    """0..5 (`trt_builder_optimization_level`; None: TensorRT's default, 3); lower builds faster."""


Provider = Literal["tensorrt", "cuda", "cpu"]
_DEFAULT_PROVIDERS: tuple[Provider, ...] = ("cuda", "cpu")
ArrayDevice = Literal["cpu", "cuda", "auto"]


class EngineConfig(Section):
    providers: list[Provider] = Field(default_factory=lambda: list(_DEFAULT_PROVIDERS), min_length=1)
    """Execution providers in order; the first one is required unless `allow_fallback`.
    `["tensorrt", "cuda", "cpu"]` opts in to TensorRT (`[engine.tensorrt]`)."""
    device: ArrayDevice = "cpu"
    """Where pre- and post-processing run (`daemon.core.xp.choose_device`): "cpu" (NumPy), "cuda"
    (CuPy on `cuda.device_id`; an error at startup if the session did not get CUDA or CuPy
    cannot use the device), or "auto" (CUDA only when both hold, else the CPU, logged)."""
    preprocess: Literal["host", "graph"] = "host"
    """Where a frame's pixels become the model's float input on the host path: "host" (the
    worker scales the letterboxed planes into a float32 batch with NumPy) or "graph" (the session
    takes the `uint8` planes and a prefix added to the graph casts and scales them inside ONNX
    Runtime, the scale folded into the first convolution where the graph allows:
    `daemon.inference.pixel_input`). "graph" applies with `device = "cpu"` and without TensorRT;
    elsewhere the file runs as it is. Needs the `onnx` package (`pip install onnx`), which the
    daemon does not otherwise need."""
    processes: Literal["auto"] | Annotated[int, Field(ge=1, le=64)] = "auto"
    """Processes the daemon runs, itself included: 1 reads every camera in a thread of the daemon
    (the single-process path); N > 1 reads the RTSP cameras and files in N - 1 decoder processes
    (started with `spawn`, cameras spread round-robin), each decoding and scaling its cameras'
    frames to the model's planes into shared memory (`daemon.ingest.decoders`), so the decoders
    no longer compete with inference, tracking and publishing for one interpreter lock. Streams,
    entries, ids, `seq`, metrics, status events and the live view are the same in both; a decoder
    process that dies is started again and its cameras report `camera_down` / `camera_up` as on a
    reconnect. Decoder processes run 5 nicer than the daemon: where the cores are contended the
    daemon's own work goes first, and a camera whose decoding then falls behind its stream skips to
    its live edge (`behind`, `daemon.ingest.lag`). GigE cameras, and cameras that NVDEC decodes
    (lanes on the device, frames kept there), stay in threads. Where lanes run on the device but
    NVDEC is unavailable (a PyAV built without CUDA), the decoder processes decode on the CPU and
    hand on each frame's decoded YUV 4:2:0 planes instead (half the bytes, no scaling in the
    decoder), which the device letterboxes as it does NVDEC's. "auto": the readers' estimated load,
    cameras x 15 fps x 3.3 ms (decode and scale of a 640x480 frame), stays in the daemon up to 0.7
    of a core; beyond it, one decoder process per 0.7 of a core of it, at most one process per CPU
    core
    (`daemon.ingest.decoder_plan.plan_processes`; the choice and its reason are logged as
    `engine_processes`)."""
    allow_fallback: bool = False
    """A session that did not get the first provider: false refuses to start (`provider_unavailable`,
    exit 69); true runs on what it got and logs an ERROR `provider_fallback`."""
    models_dropin: Path = Path("/var/lib/beltsight/models.toml")
    """Where models swapped through the API (`POST /api/models/{size}`) are kept: per size, the model
    that serves and the `[models.<size>]` entry of this file it replaced. Such an entry overrides
    `[models.<size>]` at start and on reload while this file's entry is still the one it replaced;
    an edit of that entry made after the swap wins (`daemon.config.models_dropin`)."""
    max_batch: int = Field(8, ge=1, le=64)
    """Most frames in one inference batch of a model size (and the device batch tensor's size)."""
    max_wait_ms: float = Field(15.0, ge=0)
    """A batch runs when full or when its oldest frame has waited this long."""
    max_age_ms: float = Field(500.0, gt=0)
    """Frames older than this when their batch would start are dropped (reason `stale`)."""
    workers: int = Field(0, ge=0, le=16)
    """Batches of one model size in flight at once, each on its own session (0: auto = one per
    CPU core, at most 4, when the first provider is the CPU; 1 otherwise, where a GPU scales by
    batch size instead). On the CPU, two single-threaded sessions running side by side outrun one
    two-threaded session (no straggler waits inside each operator; measured by python -m tools.bench)."""
    worker_batch: int = Field(0, ge=0, le=64)
    """Frames one worker's batch takes at most, within `max_batch` (0: auto). Auto on the CPU
    (first provider) is 1: a batch of N costs N times a batch of 1 there, so a free worker takes
    the freshest waiting frame instead of holding older ones through a bigger batch (OpenVINO's
    throughput streams; python -m tools.bench measured 0.84 x the bare model instead of 0.79, and p50
    latency 175 ms instead of 282).
    Auto elsewhere is ceil(cameras / workers): a GPU runs every camera's frame in one batch for
    little more than the cost of one."""
    intra_op_threads: int = Field(0, ge=0)
    """ONNX Runtime intra-op threads per session (0: auto = the CPU's cores shared out among the
    `workers`: ORT's default of one per core with one worker, 1 each with one worker per core)."""
    shared_cpu_arena: bool = False
    """All sessions of the process allocate host memory from one ONNX Runtime arena registered in
    its environment (`session.use_env_allocators`) instead of one arena per session. Off by
    default: ORT's arenas never shrink, so with a shared arena a rebuilt session's memory stays
    in the process, and a rebuild made while other sessions run can push its high-water mark up
    (the 40-minute soak's RSS stepped +8.6 MiB in that arena at minute 29). A session's own arena
    goes back to the OS with the session (its regions are mmapped: `tune_malloc` fixes glibc's
    mmap threshold), which is what a rebuild is for. On: one arena sized for the workers' peak
    together, somewhat less RSS, weights kept out of it (device allocator for initializers)."""
    allow_spinning: bool = False
    """Let ORT's worker threads spin-wait between operators. Off: they would steal the cores the
    camera decode threads need; on a box with cores to spare, on can shave latency."""
    conf_threshold: float = Field(0.25, ge=0, le=1)
    """Lowest detection score published, for every camera without its own `conf_threshold`."""
    iou_threshold: float = Field(0.5, gt=0, le=1)
    """NMS: a box overlapping a better one by more than this IoU is suppressed (dense layouts; an
    `end2end` model's rows are not suppressed again)."""
    max_det: int = Field(300, gt=0)
    """Most detections kept per image after NMS, best first."""
    cuda: CudaOptions = CudaOptions()
    """The `[engine.cuda]` section: CUDA provider options."""
    tensorrt: TensorRTOptions = TensorRTOptions()
    """The `[engine.tensorrt]` section: TensorRT provider options."""
    breaker: BreakerConfig = BreakerConfig()
    """The `[engine.breaker]` section: the circuit breaker with its CPU fallback."""
    rebuild: RebuildConfig = RebuildConfig()
    """The `[engine.rebuild]` section: periodic session rebuilds."""

    @field_validator("preprocess")
    @classmethod
    def _check_preprocess(cls, v: str) -> str:
        if v == "graph" and importlib.util.find_spec("onnx") is None:
            raise ValueError(
                '"graph" builds the prefix with the onnx package, which is not installed (pip install onnx)'
            )
        return v

    @property
    def pixels_in_graph(self) -> bool:
        """Whether sessions take `uint8` pixels (`preprocess = "graph"` on the CPU path, not TensorRT)."""
        return self.preprocess == "graph" and self.device == "cpu" and "tensorrt" not in self.providers

    @field_validator("providers")
    @classmethod
    def _unique(cls, v: list[Provider]) -> list[Provider]:
        if len(set(v)) != len(v):
            raise ValueError("providers must not repeat")
        if "tensorrt" in v and "cuda" not in v[v.index("tensorrt") :]:
            raise ValueError('"tensorrt" needs "cuda" after it (nodes TensorRT cannot take run there)')
        return v
