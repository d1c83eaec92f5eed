"""The array module (NumPy or CuPy) chosen once, and the only place CuPy is imported.

Code that runs on either device takes `xp` as an argument (the CuPy `get_array_module`
pattern) and is written once; `to_host` brings any result back as a NumPy array.
CuPy is imported lazily, so a CPU-only install never needs it. `choose_device` turns
`[engine] device` and the session's providers into the module the stages use.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import numpy as np
import numpy.typing as npt
import structlog

ArrayModule: TypeAlias = types.ModuleType
"""`numpy` or `cupy`: both expose the subset of the NumPy API the postprocess code uses."""

Device = Literal["cpu", "cuda"]

log = structlog.get_logger("beltsight.engine")

_CUPY_HINT = (
    "install the CuPy build matching ONNX Runtime's CUDA: `pip install beltsight[gpu]` "
    "(cupy-cuda13x, x86_64 with onnxruntime-gpu from PyPI) or `beltsight[jetson]` (cupy-cuda12x)"
)


class GpuUnavailableError(RuntimeError):
    """CuPy was asked for, but it is not installed or no CUDA device can be used."""


def _import_cupy() -> Any:
    try:
        import cupy  # noqa: PLC0415 - lazy on purpose: CPU installs never import it
    except ImportError as exc:
        raise GpuUnavailableError(f"CuPy is not installed ({exc}); {_CUPY_HINT}") from exc
    return cupy


def get_xp(device: Device, device_id: int = 0) -> ArrayModule:
    """The array module for `device`; for "cuda" also checks that device `device_id` is usable."""
    if device == "cpu":
        return np
    if device != "cuda":
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    cupy = _import_cupy()
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # CUDARuntimeError (a RuntimeError) without a driver or device
        raise GpuUnavailableError(f"CuPy is installed but CUDA is not usable: {exc}") from exc
    if device_id >= count:
        raise GpuUnavailableError(f"CUDA device {device_id} does not exist ({count} device(s) found)")
    module: ArrayModule = cupy
    return module


def cupy_status(device_id: int = 0) -> tuple[bool, str]:
    """(usable, one line saying why) for `beltsight doctor`."""
    try:
        cupy = get_xp("cuda", device_id)
    except GpuUnavailableError as exc:
        return False, str(exc)
    version = getattr(cupy, "__version__", "?")
    runtime = int(cupy.cuda.runtime.runtimeGetVersion())
    return True, f"CuPy {version}, CUDA runtime {runtime // 1000}.{runtime % 1000 // 10}, device {device_id}"


CUDA_PROVIDER = "CUDAExecutionProvider"


@dataclass(frozen=True, slots=True)
class DeviceChoice:
    """Where pre- and post-processing run: `xp` (NumPy or CuPy), on `device`, and why.

    `kernel`: what makes the device path's letterbox kernel for `xp` where it is not CUDA's
    (`daemon.inference.placement.device_path`); None everywhere but the null-model bench, whose
    stand-in for the GPU does the host's share of the fill only (`tools.kit.device_standin`)."""

    asked: str
    device: Device
    xp: ArrayModule
    reason: str
    kernel: Callable[[ArrayModule], Any] | None = None


def choose_device(asked: str, session_providers: Sequence[str], device_id: int = 0) -> DeviceChoice:
    """The array module for `[engine] device` ("cpu" | "cuda" | "auto") given the providers the
    session really got: CUDA needs both the CUDA provider in that session and CuPy able to use
    `device_id`. "cuda" raises GpuUnavailableError (with why) when either is missing; "auto"
    then picks the CPU. Logs `array_device` with the outcome."""
    if asked not in ("cpu", "cuda", "auto"):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'auto', got {asked!r}")
    if asked == "cpu":
        choice = DeviceChoice(asked, "cpu", np, "configured")
    else:
        problem = None
        if CUDA_PROVIDER not in session_providers:
            problem = f"the session did not get {CUDA_PROVIDER} (it has {list(session_providers)})"
        try:
            module = get_xp("cuda", device_id)
        except GpuUnavailableError as exc:
            problem = f"{problem}; {exc}" if problem else str(exc)
        if problem is None:
            choice = DeviceChoice(asked, "cuda", module, f"CUDA session and CuPy on device {device_id}")
        elif asked == "cuda":
            raise GpuUnavailableError(f'[engine] device = "cuda" but {problem}')
        else:
            choice = DeviceChoice(asked, "cpu", np, f"auto: {problem}")
    log.info("array_device", asked=asked, device=choice.device, reason=choice.reason)
    return choice


def pinned_empty(shape: tuple[int, ...], dtype: npt.DTypeLike, device: Device) -> npt.NDArray[Any]:
    """A host array for uploads: page-locked (CUDA pinned) memory for "cuda", so a copy to the
    device can run asynchronously on a stream; ordinary memory for "cpu"."""
    dt = np.dtype(dtype)
    if device == "cpu":
        return np.empty(shape, dt)
    cupy = _import_cupy()
    count = int(np.prod(shape))
    memory = cupy.cuda.alloc_pinned_memory(max(1, count * dt.itemsize))
    out: npt.NDArray[Any] = np.frombuffer(memory, dt, count).reshape(shape)
    return out


def is_device_array(arr: object) -> bool:
    """True for a CuPy array (checked without importing CuPy)."""
    return type(arr).__module__.split(".", 1)[0] == "cupy"


def array_module_of(arr: object) -> ArrayModule:
    """The module an array belongs to: `cupy` for device arrays, else `numpy`."""
    module: ArrayModule = _import_cupy() if is_device_array(arr) else np
    return module


def to_host(arr: Any) -> npt.NDArray[Any]:
    """A NumPy array with the same contents (a copy from the device for CuPy; as-is for NumPy)."""
    if isinstance(arr, np.ndarray):
        return arr
    if is_device_array(arr):
        host: npt.NDArray[Any] = arr.get()
        return host
    return np.asarray(arr)
