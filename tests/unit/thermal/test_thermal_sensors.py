"""The real sensor readers: sysfs thermal zones against a tree the test writes, NVML through a fake
module with pynvml's interface (its real NVMLError classes and constants; no GPU here)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pynvml
import pytest

from daemon.config.engine import EngineConfig
from daemon.config.thermal import ThermalConfig
from daemon.thermal import Reading, ThermalGovernor
from daemon.thermal.monitor import open_sensors
from daemon.thermal.sensors import NvmlSensor, SysfsThermalSensor, detect_sensors

# -- sysfs -------------------------------------------------------------------------------------


def write_zone(root: Path, index: int, kind: str, milli: str, trips: Iterable[tuple[str, int]] = ()) -> Path:
    zone = root / f"thermal_zone{index}"
    zone.mkdir(parents=True)
    (zone / "type").write_text(kind + "\n")
    (zone / "temp").write_text(milli + "\n")
    for n, (trip_type, trip_milli) in enumerate(trips):
        (zone / f"trip_point_{n}_type").write_text(trip_type + "\n")
        (zone / f"trip_point_{n}_temp").write_text(f"{trip_milli}\n")
    return zone


def by_name(readings: list[Reading]) -> dict[str, Reading]:
    return {r.sensor: r for r in readings}


def test_jetpack6_zones_with_trip_points(tmp_path: Path) -> None:
    write_zone(tmp_path, 0, "cpu-thermal", "61500", [("passive", 95500), ("critical", 102500)])
    write_zone(tmp_path, 1, "gpu-thermal", "70250", [("passive", 95500), ("hot", 100000), ("critical", 103000)])
    write_zone(tmp_path, 2, "cv0-thermal", "-256000")  # an unused engine: offline
    write_zone(tmp_path, 10, "tj-thermal", "71000", [("critical", 104500)])
    readings = by_name(SysfsThermalSensor(tmp_path).read())
    assert list(readings) == ["cpu-thermal", "gpu-thermal", "cv0-thermal", "tj-thermal"]  # zone order, 10 last
    gpu = readings["gpu-thermal"]
    assert (gpu.celsius, gpu.slowdown_c, gpu.shutdown_c, gpu.online) == (70.25, 95.5, 100.0, True)
    assert readings["tj-thermal"].slowdown_c is None and readings["tj-thermal"].shutdown_c == 104.5
    assert not readings["cv0-thermal"].online and math.isnan(readings["cv0-thermal"].celsius)


def test_older_l4t_names_unreadable_and_garbage_temps_are_offline(tmp_path: Path) -> None:
    write_zone(tmp_path, 0, "GPU-therm", "45500", [("passive", 90000)])
    write_zone(tmp_path, 1, "CPU-therm", "not a number")
    unreadable = write_zone(tmp_path, 2, "AO-therm", "40000")
    (unreadable / "temp").unlink()
    (unreadable / "temp").mkdir()  # reading it raises IsADirectoryError, as a broken driver's EIO would
    readings = by_name(SysfsThermalSensor(tmp_path).read())
    assert readings["GPU-therm"].celsius == 45.5 and readings["GPU-therm"].slowdown_c == 90.0
    assert not readings["CPU-therm"].online and not readings["AO-therm"].online
    info = {i.sensor: i for i in SysfsThermalSensor(tmp_path).info()}
    assert info["GPU-therm"].trip_points == (("passive", 90.0),)
    assert info["GPU-therm"].thresholds == {"slowdown": 90.0}


def test_zones_sharing_a_type_get_distinct_names_and_the_temperature_is_read_each_time(tmp_path: Path) -> None:
    write_zone(tmp_path, 0, "acpitz", "30000")
    second = write_zone(tmp_path, 1, "acpitz", "31000")
    sensor = SysfsThermalSensor(tmp_path)
    assert [r.sensor for r in sensor.read()] == ["acpitz@thermal_zone0", "acpitz@thermal_zone1"]
    (second / "temp").write_text("88000\n")
    assert sensor.read()[1].celsius == 88.0


def test_no_zones_is_reported_not_raised(tmp_path: Path) -> None:
    found, missing = detect_sensors(tmp_path, kinds=("sysfs",))
    assert found == [] and "no thermal zones" in missing["sysfs"]


def test_the_governor_takes_its_limit_from_a_zone_passive_trip(tmp_path: Path) -> None:
    write_zone(tmp_path, 0, "gpu-thermal", "89000", [("passive", 92000), ("critical", 100000)])
    governor = ThermalGovernor(ThermalConfig())  # no limit_c: 92 - margin 5 = 87
    throttle = governor.update(0.0, SysfsThermalSensor(tmp_path).read())
    assert governor.limits(Reading("gpu-thermal", 0.0, slowdown_c=92.0)).limit_c == 87.0
    assert throttle.sensor == "gpu-thermal" and "limit 87.0" in throttle.reason


# -- NVML through a fake with pynvml's interface --------------------------------------------------


class Value:
    def __init__(self, **members: float) -> None:
        self.__dict__.update(members)


class FieldValue:
    def __init__(self, value: int, ret: int = 0) -> None:
        self.nvmlReturn = ret
        self.valueType = pynvml.NVML_VALUE_TYPE_SIGNED_INT
        self.value = Value(siVal=value)


class FakeNvml:
    """pynvml's functions over a table of devices; `fail` names calls that raise NVMLError, `missing`
    names functions this binding lacks, `old_driver` makes the clock-event call FunctionNotFound."""

    NVMLError = pynvml.NVMLError

    def __init__(self, devices: list[dict[str, Any]], *, fail: Iterable[str] = (), old_driver: bool = False) -> None:
        for name in dir(pynvml):
            if name.startswith("NVML_"):
                setattr(self, name, getattr(pynvml, name))
        self.devices = devices
        self.fail = set(fail)
        self.old_driver = old_driver
        self.calls: list[str] = []
        self.shut_down = False

    def _enter(self, fn: str, code: int = pynvml.NVML_ERROR_UNKNOWN) -> None:
        self.calls.append(fn)
        if fn in self.fail:
            raise pynvml.NVMLError(code)

    def nvmlInit(self) -> None:
        self._enter("nvmlInit", pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    def nvmlShutdown(self) -> None:
        self.shut_down = True

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> dict[str, Any]:
        self._enter("nvmlDeviceGetHandleByIndex", pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self.devices[index]

    def nvmlDeviceGetTemperature(self, handle: dict[str, Any], sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        self._enter("nvmlDeviceGetTemperature", pynvml.NVML_ERROR_GPU_IS_LOST)
        return int(handle["temp"])

    def nvmlDeviceGetTemperatureThreshold(self, handle: dict[str, Any], which: int) -> int:
        self._enter("nvmlDeviceGetTemperatureThreshold", pynvml.NVML_ERROR_NOT_SUPPORTED)
        value = handle.get("thresholds", {}).get(which)
        if value is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(value)

    def nvmlDeviceGetFieldValues(self, handle: dict[str, Any], ids: list[int]) -> list[FieldValue]:
        self._enter("nvmlDeviceGetFieldValues", pynvml.NVML_ERROR_NOT_SUPPORTED)
        fields = handle.get("fields", {})
        return [FieldValue(fields.get(i, 0), 0 if i in fields else pynvml.NVML_ERROR_NOT_SUPPORTED) for i in ids]

    def nvmlDeviceGetMarginTemperature(self, handle: dict[str, Any]) -> int:
        self._enter("nvmlDeviceGetMarginTemperature", pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(handle["margin"])

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: dict[str, Any]) -> int:
        if self.old_driver:
            self._enter("nvmlDeviceGetCurrentClocksEventReasons")
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        self._enter("nvmlDeviceGetCurrentClocksEventReasons")
        return int(handle.get("reasons", 0))

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: dict[str, Any]) -> int:
        self._enter("nvmlDeviceGetCurrentClocksThrottleReasons")
        return int(handle.get("reasons", 0))

    def nvmlDeviceGetPowerUsage(self, handle: dict[str, Any]) -> int:
        self._enter("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_NOT_SUPPORTED)
        if "power_mw" not in handle:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(handle["power_mw"])


T = pynvml


def a100(temp: int = 60, reasons: int = 0) -> dict[str, Any]:
    thresholds = {T.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: 90, T.NVML_TEMPERATURE_THRESHOLD_GPU_MAX: 87,
                  T.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: 95}  # fmt: skip
    return {"temp": temp, "thresholds": thresholds, "reasons": reasons, "power_mw": 251_500}


def test_nvml_temperatures_thresholds_and_power_of_the_engine_devices_only() -> None:
    fake = FakeNvml([a100(50), a100(71), a100(99)])
    sensor = NvmlSensor(fake, device_ids=[1])
    (reading,) = sensor.read()
    assert reading == Reading("gpu1", 71.0, slowdown_c=87.0, shutdown_c=95.0, hw_slowdown=False, power_w=251.5)
    (info,) = sensor.info()
    assert info.thresholds == {"slowdown": 90.0, "gpu_max": 87.0, "shutdown": 95.0}
    sensor.close()
    assert fake.shut_down


@pytest.mark.parametrize(
    ("bits", "hot"),
    [(0x0, False), (0x1, False), (0x20, True), (0x40, True), (0x08, True), (0x80, False), (0x80 | 0x40, True)],
)
def test_clock_event_reasons_hw_and_thermal_slowdowns_count_as_too_hot(bits: int, hot: bool) -> None:
    (reading,) = NvmlSensor(FakeNvml([a100(55, bits)])).read()
    assert reading.hw_slowdown is hot


def test_an_old_driver_without_clock_event_reasons_falls_back_to_throttle_reasons_once() -> None:
    fake = FakeNvml([a100(55, 0x40)], old_driver=True)
    sensor = NvmlSensor(fake)
    assert [r.hw_slowdown for r in sensor.read()] == [True]
    assert [r.hw_slowdown for r in sensor.read()] == [True]
    assert fake.calls.count("nvmlDeviceGetCurrentClocksEventReasons") == 1  # not retried every second
    assert fake.calls.count("nvmlDeviceGetCurrentClocksThrottleReasons") == 2


def test_a_binding_that_lacks_the_newer_function_uses_the_older_one() -> None:
    class OldBinding(FakeNvml):
        nvmlDeviceGetCurrentClocksEventReasons = None  # type: ignore[assignment]

    assert [r.hw_slowdown for r in NvmlSensor(OldBinding([a100(55, 0x08)])).read()] == [True]


@pytest.mark.parametrize(
    "failing",
    [
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetTemperatureThreshold",
        "nvmlDeviceGetFieldValues",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        "nvmlDeviceGetPowerUsage",
    ],
)
def test_an_nvml_error_at_any_read_call_leaves_that_value_unknown_and_never_escapes(failing: str) -> None:
    fake = FakeNvml([a100(66, 0x40)], fail={failing})
    (reading,) = NvmlSensor(fake).read()
    if failing == "nvmlDeviceGetTemperature":
        assert not reading.online and not ThermalGovernor(ThermalConfig()).update(0.0, [reading]).sensor
    else:
        assert reading.celsius == 66.0
    if failing == "nvmlDeviceGetPowerUsage":
        assert reading.power_w is None
    if failing == "nvmlDeviceGetCurrentClocksEventReasons":
        assert reading.hw_slowdown is False  # a failure is not a FunctionNotFound: unknown, not hot


@pytest.mark.parametrize("failing", ["nvmlInit", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex"])
def test_an_nvml_error_while_opening_is_reported_as_missing(failing: str) -> None:
    found, missing = detect_sensors(nvml=FakeNvml([a100()], fail={failing}), kinds=("nvml",))
    assert found == [] and missing["nvml"].startswith("NvmlError")


def test_newer_gpus_report_tlimit_field_values_absolute_or_as_offsets() -> None:
    absolute = {"temp": 60, "fields": {T.NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT: 91,
                                       T.NVML_FI_DEV_TEMPERATURE_GPU_MAX_TLIMIT: 88}}  # fmt: skip
    (reading,) = NvmlSensor(FakeNvml([absolute])).read()
    assert reading.slowdown_c == 88.0
    # T.Limit offsets: slowdown 2 C past the T.Limit; the GPU at 60 C has 25 C margin -> T.Limit 85
    relative = {"temp": 60, "margin": 25, "fields": {T.NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT: -2,
                                                     T.NVML_FI_DEV_TEMPERATURE_SHUTDOWN_TLIMIT: -5}}  # fmt: skip
    (reading,) = NvmlSensor(FakeNvml([relative])).read()
    assert (reading.slowdown_c, reading.shutdown_c) == (87.0, 90.0)
    bare = {"temp": 60}
    assert NvmlSensor(FakeNvml([bare])).read()[0].slowdown_c is None


def test_auto_uses_nvml_for_the_cuda_device_and_sysfs_otherwise(tmp_path: Path) -> None:
    write_zone(tmp_path, 0, "gpu-thermal", "50000")
    config = ThermalConfig(sysfs_root=tmp_path)
    cuda = EngineConfig(providers=["cuda", "cpu"], cuda={"device_id": 1})
    found, _ = open_sensors(config, cuda, nvml=FakeNvml([a100(40), a100(77)]))
    assert [r.sensor for s in found for r in s.read()] == ["gpu1"]
    found, missing = open_sensors(config, cuda, nvml=FakeNvml([a100()], fail={"nvmlInit"}))
    assert [s.name for s in found] == ["sysfs"] and "nvml" in missing  # no driver: the zones
    found, _ = open_sensors(config, EngineConfig(providers=["cpu"]), nvml=FakeNvml([a100()]))
    assert [s.name for s in found] == ["sysfs"]
