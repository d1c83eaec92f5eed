"""What `beltsight doctor` says about the GPU pipeline: NVML, hardware decode, the array module
and device the stages would use, CuPy's CUDA against ONNX Runtime's, TensorRT caches.

`ok` is False when `[engine] device = "cuda"` cannot be honoured (no CUDA session or no usable
CuPy), or when CuPy's CUDA major differs from ONNX Runtime's while the device is not the CPU
(the two would share one stream and one context).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnxruntime as ort

from daemon.config.engine import EngineConfig
from daemon.core import nvml
from daemon.core.xp import GpuUnavailableError, choose_device, get_xp
from daemon.inference import tensorrt_cache
from daemon.ingest.hwdecode import nvdec_status


@dataclass(frozen=True, slots=True)
class GpuFindings:
    ok: bool
    lines: tuple[str, ...]
    data: dict[str, Any] = field(default_factory=dict)


def ort_cuda_version() -> str | None:
    """The CUDA version this onnxruntime-gpu was built for ("13.0"), None for a CPU build."""
    version = getattr(ort, "cuda_version", None)
    return str(version) if version else None


def cupy_cuda_version(device_id: int) -> str | None:
    try:
        cupy = get_xp("cuda", device_id)
    except GpuUnavailableError:
        return None
    runtime = int(cupy.cuda.runtime.runtimeGetVersion())
    return f"{runtime // 1000}.{runtime % 1000 // 10}"


def _major(version: str | None) -> str | None:
    return version.split(".")[0] if version else None


def gpu_findings(cfg: EngineConfig, models: Mapping[int, Path], session_providers: Sequence[str]) -> GpuFindings:
    """`session_providers`: what a session built by doctor really got (empty if none was built)."""
    device_id = cfg.cuda.device_id
    ok = True
    nvml_ok, nvml_line = nvml.describe(device_id)
    decode = nvdec_status(device_id)
    lines = [f"gpu (NVML): {nvml_line}", f"hardware decode (NVDEC): {decode.line()}"]
    try:
        choice = choose_device(cfg.device, session_providers, device_id)
        module = getattr(choice.xp, "__name__", "?")
        lines.append(f"array module: {module} on {choice.device} ([engine] device = {cfg.device!r}: {choice.reason})")
        device: str = choice.device
    except GpuUnavailableError as exc:
        ok, device = False, "unavailable"
        lines.append(f"array module: NOT OK: {exc}")
    ort_cuda, cupy_cuda = ort_cuda_version(), cupy_cuda_version(device_id)
    versions = f"CUDA: onnxruntime built for {ort_cuda or 'none (CPU build)'}, CuPy runtime {cupy_cuda or 'absent'}"
    if ort_cuda and cupy_cuda and _major(ort_cuda) != _major(cupy_cuda):
        versions += " (majors differ: install the CuPy build for onnxruntime's CUDA)"
        ok = ok and device == "cpu"
    lines.append(versions)
    trt: dict[str, str] = {}
    if "tensorrt" in cfg.providers:
        lines.append(f"tensorrt: version {tensorrt_cache.tensorrt_version() or 'not found on the library path'}")
        for size, path in sorted(models.items()):
            if Path(path).is_file():
                trt[str(size)] = tensorrt_cache.cache_state(cfg.tensorrt, Path(path)).line()
                lines.append(f"tensorrt cache {size}: {trt[str(size)]}")
    data = {
        "nvml": nvml_line,
        "nvml_ok": nvml_ok,
        "hardware_decode": {"available": decode.available, "reason": decode.reason, "pyav": decode.pyav},
        "array_device": device,
        "device_asked": cfg.device,
        "ort_cuda": ort_cuda,
        "cupy_cuda": cupy_cuda,
        "tensorrt_cache": trt,
    }
    return GpuFindings(ok, tuple(lines), data)
