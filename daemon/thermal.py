"""Temperature sensors: NVML on GPU boxes, thermal zones in sysfs on a Jetson.

Both implement `TemperatureSensor`; `detect_sensors()` returns those that work here, plus
the reason each of the others does not. (The throttle governor builds on these.)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

JETSON_THERMAL_ROOT = Path("/sys/devices/virtual/thermal")


@dataclass(frozen=True, slots=True)
class Reading:
    sensor: str
    celsius: float


class TemperatureSensor(Protocol):
    name: str

    def read(self) -> list[Reading]: ...


class NvmlSensor:
    """GPU core temperature of every device NVML sees (package nvidia-ml-py, module pynvml)."""

    name = "nvml"

    def __init__(self) -> None:
        import pynvml  # noqa: PLC0415 - optional at runtime; raises NVMLError without a driver

        pynvml.nvmlInit()
        self._nvml = pynvml
        self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]

    def read(self) -> list[Reading]:
        gpu = self._nvml.NVML_TEMPERATURE_GPU
        return [
            Reading(f"gpu{i}", float(self._nvml.nvmlDeviceGetTemperature(h, gpu)))
            for i, h in enumerate(self._handles)
        ]


class SysfsThermalSensor:
    """Linux thermal zones (`thermal_zone*/type` and `temp` in millidegrees), as on a Jetson."""

    name = "sysfs"

    def __init__(self, root: Path = JETSON_THERMAL_ROOT) -> None:
        self._zones = sorted(root.glob("thermal_zone*"))
        if not self._zones:
            raise FileNotFoundError(f"no thermal zones under {root}")

    def read(self) -> list[Reading]:
        readings = []
        for zone in self._zones:
            try:
                kind = (zone / "type").read_text().strip()
                milli = int((zone / "temp").read_text().strip())
            except (OSError, ValueError):
                continue
            readings.append(Reading(kind, milli / 1000.0))
        return readings


def detect_sensors(sysfs_root: Path = JETSON_THERMAL_ROOT) -> tuple[list[TemperatureSensor], dict[str, str]]:
    """Sensors that work on this machine, and for the others why not."""
    found: list[TemperatureSensor] = []
    missing: dict[str, str] = {}
    try:
        found.append(NvmlSensor())
    except Exception as exc:  # pynvml raises NVMLError subclasses, or ImportError
        missing["nvml"] = f"{type(exc).__name__}: {exc}"
    try:
        found.append(SysfsThermalSensor(sysfs_root))
    except OSError as exc:
        missing["sysfs"] = str(exc)
    return found, missing
