"""NVML in one place: the engine's memory probe, `doctor` and the thermal sensors share it.

API (package nvidia-ml-py, module `pynvml`; a fake module with the same functions in tests):

- `shared()` -> the process's `Nvml`, initialised once (`nvmlInit` on first use, never shut
  down while the process runs); raises `NvmlError` where NVML cannot start (no driver, no
  library, a Jetson), and keeps raising the same error without retrying.
- `Nvml.open(module)` -> a private session (tests, tools); `close()` ends it.
- Readers take a CUDA device index (the engine's `cuda.device_id`); handles are looked up once
  and cached: `device_count`, `name`, `driver_version`, `cuda_driver_version`,
  `temperature_c`, `thresholds_c` (slowdown / gpu_max / shutdown, whichever the GPU reports:
  `nvmlDeviceGetTemperatureThreshold`, else the T.Limit field values), `clock_reasons`
  (`...CurrentClocksEventReasons`, on older drivers `...ClocksThrottleReasons`), `power_w`,
  `memory`.
- Every failure is one exception, `NvmlError`: a pynvml `NVMLError` from any call (its NVML
  return code in `code`), a function this binding or driver does not have (`unsupported`), or
  pynvml not installed. `thresholds_c` is the one reader that returns what it found instead
  of raising for each missing threshold.
- `gpu_memory_used_mb(device_id)` -> (MiB used by all processes, or None, and why): the
  engine's memory probe and doctor's before/after session figures.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from dataclasses import dataclass
from types import ModuleType
from typing import Any

NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_FUNCTION_NOT_FOUND = 13
THRESHOLDS = ("slowdown", "gpu_max", "shutdown")
_VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")  # by nvmlValueType_t
_OFFSET_LIMIT_C = 40.0
"""Field-value thresholds below this are offsets to the GPU's T.Limit, not temperatures."""


class NvmlError(Exception):
    """NVML is unavailable or a call failed; `code` is NVML's return code where it gave one."""

    def __init__(self, message: str, *, code: int | None = None, unsupported: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.unsupported = unsupported or code in (NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND)


@dataclass(frozen=True, slots=True)
class MemoryInfo:
    """Device memory in MiB (all processes)."""

    used_mb: float
    total_mb: float


def import_pynvml() -> ModuleType:
    """The `pynvml` module of nvidia-ml-py, or NvmlError where it is not installed."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the deprecated `pynvml` wrapper package warns on import
            import pynvml  # noqa: PLC0415 - optional at runtime
    except ImportError as exc:
        raise NvmlError(f"pynvml (nvidia-ml-py) not installed: {exc}") from exc
    module: ModuleType = pynvml
    return module


class Nvml:
    """One NVML session; see the module docstring. Thread-safe: NVML itself is."""

    def __init__(self, module: ModuleType) -> None:
        """Wraps an initialised module; use `Nvml.open` or `shared()`."""
        self._module = module
        error = getattr(module, "NVMLError", None)
        self._error: type[BaseException] = error if isinstance(error, type) else Exception
        self._handles: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._old_reasons = False

    @classmethod
    def open(cls, module: ModuleType | None = None) -> Nvml:
        nvml = cls(module if module is not None else import_pynvml())
        nvml.call("nvmlInit")
        return nvml

    def call(self, fn: str, *args: Any) -> Any:
        """`module.fn(*args)` with every failure raised as NvmlError."""
        if self._closed:
            raise NvmlError(f"{fn}: this NVML session is closed")
        function = getattr(self._module, fn, None)
        if function is None:
            raise NvmlError(f"{fn} is not in this NVML binding (older driver or nvidia-ml-py)", unsupported=True)
        try:
            return function(*args)
        except self._error as exc:
            code = getattr(exc, "value", None)
            raise NvmlError(f"{fn}: {exc}", code=code if isinstance(code, int) else None) from exc

    def _const(self, name: str, default: int) -> int:
        value = getattr(self._module, name, default)
        return value if isinstance(value, int) else default

    def handle(self, device_id: int) -> Any:
        with self._lock:
            found = self._handles.get(device_id)
        if found is None:
            found = self.call("nvmlDeviceGetHandleByIndex", device_id)
            with self._lock:
                self._handles[device_id] = found
        return found

    def handles(self, device_ids: list[int] | None = None) -> dict[int, Any]:
        """Handles of `device_ids` (default: every device NVML sees)."""
        ids = device_ids if device_ids is not None else list(range(self.device_count()))
        return {i: self.handle(i) for i in ids}

    def device_count(self) -> int:
        return int(self.call("nvmlDeviceGetCount"))

    def name(self, device_id: int) -> str:
        value = self.call("nvmlDeviceGetName", self.handle(device_id))
        return value.decode() if isinstance(value, bytes) else str(value)

    def driver_version(self) -> str:
        value = self.call("nvmlSystemGetDriverVersion")
        return value.decode() if isinstance(value, bytes) else str(value)

    def cuda_driver_version(self) -> int:
        """The CUDA version the driver supports, as CUDA writes it (13000 for 13.0)."""
        return int(self.call("nvmlSystemGetCudaDriverVersion"))

    def temperature_c(self, device_id: int) -> float:
        sensor = self._const("NVML_TEMPERATURE_GPU", 0)
        return float(self.call("nvmlDeviceGetTemperature", self.handle(device_id), sensor))

    def thresholds_c(self, device_id: int) -> dict[str, float]:
        """Slowdown / gpu_max / shutdown temperatures the GPU reports (absent ones left out)."""
        handle, found = self.handle(device_id), {}
        for key in THRESHOLDS:
            const = getattr(self._module, f"NVML_TEMPERATURE_THRESHOLD_{key.upper()}", None)
            if not isinstance(const, int):
                continue
            try:
                value = self.call("nvmlDeviceGetTemperatureThreshold", handle, const)
            except NvmlError:
                continue
            if isinstance(value, int | float) and value > 0:
                found[key] = float(value)
        return found or self._field_thresholds(device_id)

    def _field_thresholds(self, device_id: int) -> dict[str, float]:
        keys = [k for k in THRESHOLDS if hasattr(self._module, f"NVML_FI_DEV_TEMPERATURE_{k.upper()}_TLIMIT")]
        if not keys:
            return {}
        ids = [getattr(self._module, f"NVML_FI_DEV_TEMPERATURE_{k.upper()}_TLIMIT") for k in keys]
        try:
            values = self.call("nvmlDeviceGetFieldValues", self.handle(device_id), ids)
        except NvmlError:
            return {}
        found: dict[str, float] = {}
        for key, value in zip(keys, values, strict=False):
            if getattr(value, "nvmlReturn", 0) != 0:
                continue
            member = _VALUE_MEMBERS[int(getattr(value, "valueType", 5)) % len(_VALUE_MEMBERS)]
            number = getattr(getattr(value, "value", None), member, None)
            if isinstance(number, int | float):
                found[key] = float(number)
        if found and max(found.values()) < _OFFSET_LIMIT_C:  # offsets below the T.Limit
            try:
                margin = self.call("nvmlDeviceGetMarginTemperature", self.handle(device_id))
                now = self.temperature_c(device_id)
            except NvmlError:
                return {}
            limit = now + float(getattr(margin, "margin", margin))
            found = {k: limit - v for k, v in found.items()}
        return found

    def clock_reasons(self, device_id: int) -> int:
        """The bit mask of why clocks are held down (`nvmlClocksEventReason*` constants). A driver
        or binding without `...CurrentClocksEventReasons` (R535 and newer) moves this session to
        `...CurrentClocksThrottleReasons` for good, so an old driver is not asked twice a call."""
        handle = self.handle(device_id)
        if not self._old_reasons:
            try:
                return int(self.call("nvmlDeviceGetCurrentClocksEventReasons", handle))
            except NvmlError as exc:
                if exc.code != NVML_ERROR_FUNCTION_NOT_FOUND and not (exc.code is None and exc.unsupported):
                    raise
                self._old_reasons = True
        return int(self.call("nvmlDeviceGetCurrentClocksThrottleReasons", handle))

    def power_w(self, device_id: int) -> float:
        return float(self.call("nvmlDeviceGetPowerUsage", self.handle(device_id))) / 1000.0

    def memory(self, device_id: int) -> MemoryInfo:
        info = self.call("nvmlDeviceGetMemoryInfo", self.handle(device_id))
        return MemoryInfo(used_mb=float(info.used) / 2**20, total_mb=float(info.total) / 2**20)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            # shutting down a session whose driver went away: nothing is left to release
            with contextlib.suppress(self._error):
                getattr(self._module, "nvmlShutdown", lambda: None)()


_shared_lock = threading.Lock()
_shared: Nvml | NvmlError | None = None


def shared(module: ModuleType | None = None) -> Nvml:
    """The process's NVML session, opened on first use (see the module docstring)."""
    global _shared  # noqa: PLW0603 - one NVML session per process, by design
    with _shared_lock:
        if _shared is None:
            try:
                _shared = Nvml.open(module)
            except NvmlError as exc:
                _shared = exc
        if isinstance(_shared, NvmlError):
            raise NvmlError(str(_shared), code=_shared.code, unsupported=_shared.unsupported)
        return _shared


def reset_shared() -> None:
    """Close and forget the shared session (tests; a later `shared()` opens a new one)."""
    global _shared  # noqa: PLW0603
    with _shared_lock:
        if isinstance(_shared, Nvml):
            _shared.close()
        _shared = None


def gpu_memory_used_mb(device_id: int) -> tuple[float | None, str]:
    """Device memory in use (all processes) in MiB, or (None, why not) where NVML cannot say."""
    try:
        used = shared().memory(device_id).used_mb
    except NvmlError as exc:
        return None, f"unavailable ({exc})"
    return round(used, 1), "ok"


def describe(device_id: int) -> tuple[bool, str]:
    """(NVML works for `device_id`, one line for `doctor`)."""
    try:
        nvml = shared()
        name, driver = nvml.name(device_id), nvml.driver_version()
        cuda = nvml.cuda_driver_version()
        memory = nvml.memory(device_id)
    except NvmlError as exc:
        return False, f"unavailable ({exc})"
    return True, (
        f"{name} (device {device_id}), driver {driver} (CUDA {cuda // 1000}.{cuda % 1000 // 10}), "
        f"memory {memory.used_mb:.0f} / {memory.total_mb:.0f} MiB used"
    )
