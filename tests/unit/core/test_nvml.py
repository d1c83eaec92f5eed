"""daemon.core.nvml against a fake pynvml module with the real one's names and error behaviour.

There is no NVIDIA driver here, so NVML itself cannot run; the fake implements the functions
daemon.core.nvml calls with pynvml's signatures, its NVMLError (a `value` code) and its constants,
and can fail any call or lack any function (an old driver / binding). One test runs the real
pynvml on this machine and checks that the missing driver surfaces as NvmlError.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from daemon.core import nvml as nvml_mod
from daemon.core.memory import process_memory
from daemon.core.nvml import Nvml, NvmlError, gpu_memory_used_mb


class FakeNVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return {3: "Not Supported", 12: "NVML Shared Library Not Found", 15: "GPU is lost"}.get(self.value, "Unknown")


@dataclass
class _Mem:
    used: int
    total: int


@dataclass
class _FieldValue:
    value: Any
    valueType: int = 1  # uiVal
    nvmlReturn: int = 0


class FakeGpu:
    def __init__(self, name: str, temp: int, thresholds: dict[int, int], used_mb: int) -> None:
        self.name, self.temp, self.thresholds, self.used_mb = name, temp, thresholds, used_mb


def make_fake(
    gpus: list[FakeGpu], *, fail: dict[str, int] | None = None, missing: tuple[str, ...] = ()
) -> types.ModuleType:
    """A module like pynvml: `fail` maps a function to the NVML code it raises; `missing` lacks them."""
    fail = fail or {}
    m = types.ModuleType("fake_pynvml")
    m.NVMLError = FakeNVMLError  # type: ignore[attr-defined]
    m.NVML_TEMPERATURE_GPU = 0  # type: ignore[attr-defined]
    m.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0  # type: ignore[attr-defined]
    m.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1  # type: ignore[attr-defined]
    m.NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 3  # type: ignore[attr-defined]
    m.calls = []  # type: ignore[attr-defined]
    state = {"init": 0}

    def fn(name: str, impl: Any) -> None:
        if name in missing:
            return

        def wrapper(*args: Any) -> Any:
            m.calls.append(name)  # type: ignore[attr-defined]
            if name in fail:
                raise FakeNVMLError(fail[name])
            if name not in ("nvmlInit", "nvmlShutdown") and state["init"] <= 0:
                raise FakeNVMLError(1)  # NVML_ERROR_UNINITIALIZED
            return impl(*args)

        setattr(m, name, wrapper)

    def init() -> None:
        state["init"] += 1

    def shutdown() -> None:
        state["init"] -= 1

    def handle(i: int) -> FakeGpu:
        if i >= len(gpus):
            raise FakeNVMLError(2)  # invalid argument
        return gpus[i]

    def threshold(h: FakeGpu, kind: int) -> int:
        if kind not in h.thresholds:
            raise FakeNVMLError(3)
        return h.thresholds[kind]

    fn("nvmlInit", init)
    fn("nvmlShutdown", shutdown)
    fn("nvmlDeviceGetCount", lambda: len(gpus))
    fn("nvmlDeviceGetHandleByIndex", handle)
    fn("nvmlDeviceGetName", lambda h: h.name)
    fn("nvmlSystemGetDriverVersion", lambda: "580.65.06")
    fn("nvmlSystemGetCudaDriverVersion", lambda: 13000)
    fn("nvmlDeviceGetTemperature", lambda h, sensor: h.temp)
    fn("nvmlDeviceGetTemperatureThreshold", threshold)
    fn("nvmlDeviceGetCurrentClocksEventReasons", lambda h: 0x20)
    fn("nvmlDeviceGetCurrentClocksThrottleReasons", lambda h: 0x40)
    fn("nvmlDeviceGetPowerUsage", lambda h: 215_500)
    fn("nvmlDeviceGetMemoryInfo", lambda h: _Mem(used=h.used_mb * 2**20, total=80 * 1024 * 2**20))
    fn("nvmlDeviceGetMarginTemperature", lambda h: 20)
    fn("nvmlDeviceGetFieldValues", lambda h, ids: [_FieldValue(types.SimpleNamespace(uiVal=v)) for v in (5, 2, 0)])
    m.state = state  # type: ignore[attr-defined]
    return m


A100 = FakeGpu("NVIDIA A100", 61, {0: 92, 1: 89, 3: 87}, used_mb=1234)
L4 = FakeGpu("NVIDIA L4", 48, {}, used_mb=300)  # reports no threshold through the old call


@pytest.fixture(autouse=True)
def fresh_shared() -> Iterator[None]:
    nvml_mod.reset_shared()
    yield
    nvml_mod.reset_shared()


def test_readers_on_a_healthy_gpu() -> None:
    fake = make_fake([A100, L4])
    nv = Nvml.open(fake)
    assert nv.device_count() == 2
    assert nv.name(0) == "NVIDIA A100"
    assert nv.temperature_c(0) == 61.0
    assert nv.thresholds_c(0) == {"slowdown": 89.0, "gpu_max": 87.0, "shutdown": 92.0}
    assert nv.clock_reasons(0) == 0x20
    assert nv.power_w(0) == pytest.approx(215.5)
    assert nv.memory(0).used_mb == pytest.approx(1234.0)
    assert nv.cuda_driver_version() == 13000
    assert set(nv.handles()) == {0, 1}
    nv.close()
    assert fake.state["init"] == 0  # type: ignore[attr-defined]
    with pytest.raises(NvmlError, match="closed"):
        nv.temperature_c(0)


def test_handles_are_looked_up_once() -> None:
    fake = make_fake([A100])
    nv = Nvml.open(fake)
    for _ in range(3):
        nv.temperature_c(0)
        nv.memory(0)
    assert fake.calls.count("nvmlDeviceGetHandleByIndex") == 1  # type: ignore[attr-defined]


def test_thresholds_from_field_values_when_the_old_call_has_none() -> None:
    fake = make_fake([L4])
    fake.NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT = 195  # type: ignore[attr-defined]
    fake.NVML_FI_DEV_TEMPERATURE_GPU_MAX_TLIMIT = 196  # type: ignore[attr-defined]
    fake.NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT = 194  # type: ignore[attr-defined]
    nv = Nvml.open(fake)
    # offsets 5, 2, 0 below a T.Limit of 48 + 20 = 68 C
    assert nv.thresholds_c(0) == {"slowdown": 63.0, "gpu_max": 66.0, "shutdown": 68.0}


def test_no_thresholds_at_all_is_an_empty_dict_not_an_error() -> None:
    nv = Nvml.open(make_fake([L4]))
    assert nv.thresholds_c(0) == {}


def test_old_driver_without_the_clock_events_function_falls_back() -> None:
    nv = Nvml.open(make_fake([A100], missing=("nvmlDeviceGetCurrentClocksEventReasons",)))
    assert nv.clock_reasons(0) == 0x40
    nv2 = Nvml.open(make_fake([A100], fail={"nvmlDeviceGetCurrentClocksEventReasons": 13}))
    assert nv2.clock_reasons(0) == 0x40  # NVML_ERROR_FUNCTION_NOT_FOUND from the binding


def test_a_missing_function_is_an_unsupported_nvml_error() -> None:
    nv = Nvml.open(make_fake([A100], missing=("nvmlDeviceGetPowerUsage",)))
    with pytest.raises(NvmlError) as info:
        nv.power_w(0)
    assert info.value.unsupported
    assert info.value.code is None


@pytest.mark.parametrize(
    "call",
    [
        "nvmlDeviceGetHandleByIndex",
        "nvmlDeviceGetName",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetMemoryInfo",
        "nvmlSystemGetDriverVersion",
        "nvmlSystemGetCudaDriverVersion",
    ],
)
def test_nvml_error_at_any_call_is_one_exception(call: str) -> None:
    nv = Nvml.open(make_fake([A100], fail={call: 15}))
    readers = {
        "nvmlDeviceGetHandleByIndex": lambda: nv.temperature_c(0),
        "nvmlDeviceGetName": lambda: nv.name(0),
        "nvmlDeviceGetTemperature": lambda: nv.temperature_c(0),
        "nvmlDeviceGetCurrentClocksEventReasons": lambda: nv.clock_reasons(0),
        "nvmlDeviceGetPowerUsage": lambda: nv.power_w(0),
        "nvmlDeviceGetMemoryInfo": lambda: nv.memory(0),
        "nvmlSystemGetDriverVersion": nv.driver_version,
        "nvmlSystemGetCudaDriverVersion": nv.cuda_driver_version,
    }
    with pytest.raises(NvmlError) as info:
        readers[call]()
    assert info.value.code == 15
    assert not info.value.unsupported
    assert "GPU is lost" in str(info.value)


def test_shared_initialises_once_and_remembers_a_failure() -> None:
    fake = make_fake([A100])
    assert nvml_mod.shared(fake) is nvml_mod.shared(fake)
    assert fake.calls.count("nvmlInit") == 1  # type: ignore[attr-defined]
    nvml_mod.reset_shared()
    broken = make_fake([A100], fail={"nvmlInit": 12})
    for _ in range(3):
        with pytest.raises(NvmlError, match="Library Not Found"):
            nvml_mod.shared(broken)
    assert broken.calls.count("nvmlInit") == 1  # type: ignore[attr-defined]


def test_memory_probe_reads_through_the_shared_session(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml_mod.shared(make_fake([A100]))
    assert gpu_memory_used_mb(0) == (1234.0, "ok")
    assert process_memory(0).device_mb == 1234.0
    used, why = gpu_memory_used_mb(3)
    assert used is None
    assert why.startswith("unavailable")
    ok, line = nvml_mod.describe(0)
    assert ok
    assert "NVIDIA A100" in line
    assert "CUDA 13.0" in line


def test_the_real_pynvml_here_reports_no_driver() -> None:
    """This machine has no NVIDIA driver: the real binding's error comes out as NvmlError."""
    pytest.importorskip("pynvml")
    try:
        nv = nvml_mod.shared()
    except NvmlError as exc:
        assert exc.code in (9, 12) or "not installed" in str(exc)  # driver not loaded / library not found
        used, why = gpu_memory_used_mb(0)
        assert used is None
        assert "unavailable" in why
        assert nvml_mod.describe(0)[0] is False
        return
    assert nv.device_count() >= 1  # a GPU host: NVML works
