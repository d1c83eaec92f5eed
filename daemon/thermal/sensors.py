"""Temperature sensors: NVML on GPU boxes, Linux thermal zones in sysfs on a Jetson.

Both implement `TemperatureSensor`: `read()` returns one `Reading` per device or zone, with the
slowdown threshold the hardware reports and whether it is slowing its clocks for heat now;
`info()` what doctor shows (thresholds, trip points). A sensor that cannot be read this time
(an NVML error, an unreadable file, -256 C) gives an offline reading (NaN), never a number.
`read()` does blocking I/O: call it from a thread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from daemon.config.thermal import DEFAULT_SYSFS_ROOT
from daemon.core.nvml import Nvml, NvmlError, shared
from daemon.thermal.types import OFFLINE_BELOW_C, Reading, SensorInfo, TemperatureSensor

OFFLINE = math.nan

# nvmlClocksEventReasons bits (the same values as the older ClocksThrottleReasons)
SW_THERMAL_SLOWDOWN = 0x20
HW_THERMAL_SLOWDOWN = 0x40
HW_SLOWDOWN = 0x08
HW_POWER_BRAKE = 0x80
THERMAL_REASONS = SW_THERMAL_SLOWDOWN | HW_THERMAL_SLOWDOWN | HW_SLOWDOWN
REASON_NAMES = {
    SW_THERMAL_SLOWDOWN: "sw_thermal_slowdown",
    HW_THERMAL_SLOWDOWN: "hw_thermal_slowdown",
    HW_SLOWDOWN: "hw_slowdown",
    HW_POWER_BRAKE: "hw_power_brake",
}


class NvmlSensor:
    """GPU temperature of the devices the engine uses, read through `daemon.core.nvml` (the one NVML
    session the engine's memory probe and `doctor` share).

    `nvml` is an `Nvml` session, or a pynvml-like module (tests pass fakes with pynvml's
    functions; the sensor then opens, and closes, a private session on it); default: the
    process's shared session. Thresholds come from `Nvml.thresholds_c` (SLOWDOWN, GPU_MAX,
    SHUTDOWN, or where a GPU reports none the `NVML_FI_DEV_TEMPERATURE_*_TLIMIT` field values),
    clock-event reasons from `Nvml.clock_reasons` (the older ThrottleReasons call on old drivers).
    Any NVML failure leaves that value unknown (the temperature: the reading offline); it never
    escapes `read()`.
    """

    name = "nvml"

    def __init__(self, nvml: Any = None, device_ids: Sequence[int] | None = None) -> None:
        if nvml is None:
            session, self._owned = shared(), False
        elif isinstance(nvml, Nvml):
            session, self._owned = nvml, False
        else:
            session, self._owned = Nvml.open(nvml), True
        self._nvml = session
        try:
            self._ids = list(device_ids) if device_ids is not None else list(range(session.device_count()))
            for i in self._ids:
                session.handle(i)  # a device NVML does not have fails here, not every second
        except NvmlError:
            self.close()
            raise
        self._thresholds = {i: session.thresholds_c(i) for i in self._ids}
        self._power = True

    def _reasons(self, device_id: int) -> int | None:
        try:
            return self._nvml.clock_reasons(device_id)
        except NvmlError:
            return None

    def _power_w(self, device_id: int) -> float | None:
        if not self._power:
            return None
        try:
            return self._nvml.power_w(device_id)
        except NvmlError:
            self._power = False  # not supported here: do not ask every second
            return None

    def read(self) -> list[Reading]:
        readings = []
        for i in self._ids:
            try:
                celsius = self._nvml.temperature_c(i)
            except NvmlError:
                celsius = OFFLINE
            reasons = self._reasons(i) if math.isfinite(celsius) else None
            th = self._thresholds[i]
            slowdown = min((th[k] for k in ("slowdown", "gpu_max") if k in th), default=None)
            readings.append(
                Reading(
                    f"gpu{i}",
                    celsius,
                    slowdown_c=slowdown,
                    shutdown_c=th.get("shutdown"),
                    hw_slowdown=bool(reasons is not None and reasons & THERMAL_REASONS),
                    power_w=self._power_w(i) if math.isfinite(celsius) else None,
                )
            )
        return readings

    def info(self) -> list[SensorInfo]:
        result = []
        for i in self._ids:
            reasons = self._reasons(i)
            names = [n for bit, n in REASON_NAMES.items() if reasons is not None and reasons & bit]
            note = "clock-event reasons unavailable" if reasons is None else "reasons: " + (", ".join(names) or "none")
            result.append(SensorInfo(f"gpu{i}", "nvml", dict(self._thresholds[i]), (), note))
        return result

    def close(self) -> None:
        if self._owned:
            self._nvml.close()


class SysfsThermalSensor:
    """Linux thermal zones under `root` (`thermal_zone*/type`, `temp` in millidegrees and the
    zone's `trip_point_N_temp` / `_type`), as on a Jetson: JetPack 6 names them `gpu-thermal`,
    `cpu-thermal`, `tj-thermal`..., older L4T `GPU-therm`, `CPU-therm`. A zone's lowest passive
    trip is its slowdown threshold, its critical (or hot) trip its shutdown."""

    name = "sysfs"

    def __init__(self, root: Path = DEFAULT_SYSFS_ROOT) -> None:
        zones = sorted(root.glob("thermal_zone*"), key=lambda p: (len(p.name), p.name))
        if not zones:
            raise FileNotFoundError(f"no thermal zones under {root}")
        kinds = [self._text(z / "type") or z.name for z in zones]
        self._zones = [
            (z, kind if kinds.count(kind) == 1 else f"{kind}@{z.name}") for z, kind in zip(zones, kinds, strict=True)
        ]
        self._trips = {name: self._trip_points(z) for z, name in self._zones}

    @staticmethod
    def _text(path: Path) -> str | None:
        try:
            return path.read_text().strip()
        except (OSError, UnicodeDecodeError):
            return None

    @classmethod
    def _millidegrees(cls, path: Path) -> float:
        text = cls._text(path)
        try:
            celsius = int(text or "") / 1000.0
        except ValueError:
            return OFFLINE
        return celsius if celsius > OFFLINE_BELOW_C else OFFLINE

    def _trip_points(self, zone: Path) -> tuple[tuple[str, float], ...]:
        trips = []
        for temp_file in sorted(zone.glob("trip_point_*_temp")):
            kind = self._text(zone / temp_file.name.replace("_temp", "_type")) or "unknown"
            celsius = self._millidegrees(temp_file)
            if math.isfinite(celsius) and celsius > 0:
                trips.append((kind, celsius))
        return tuple(trips)

    def _threshold(self, name: str, kinds: tuple[str, ...]) -> float | None:
        return min((c for kind, c in self._trips[name] if kind in kinds), default=None)

    def read(self) -> list[Reading]:
        return [
            Reading(
                name,
                self._millidegrees(zone / "temp"),
                slowdown_c=self._threshold(name, ("passive",)),
                shutdown_c=self._threshold(name, ("critical", "hot")),
            )
            for zone, name in self._zones
        ]

    def info(self) -> list[SensorInfo]:
        result = []
        for _zone, name in self._zones:
            th = {
                "slowdown": self._threshold(name, ("passive",)),
                "shutdown": self._threshold(name, ("critical", "hot")),
            }
            known = {k: v for k, v in th.items() if v is not None}
            result.append(SensorInfo(name, "sysfs", known, self._trips[name]))
        return result

    def close(self) -> None:
        pass


def detect_sensors(
    sysfs_root: Path = DEFAULT_SYSFS_ROOT,
    *,
    nvml: Any = None,
    device_ids: Sequence[int] | None = None,
    kinds: Sequence[str] = ("nvml", "sysfs"),
) -> tuple[list[TemperatureSensor], dict[str, str]]:
    """The sensors of `kinds` that work on this machine, and for the others why not."""
    found: list[TemperatureSensor] = []
    missing: dict[str, str] = {}
    if "nvml" in kinds:
        try:
            found.append(NvmlSensor(nvml, device_ids))
        except Exception as exc:  # pynvml raises NVMLError subclasses, or ImportError
            missing["nvml"] = f"{type(exc).__name__}: {exc}"
    if "sysfs" in kinds:
        try:
            found.append(SysfsThermalSensor(sysfs_root))
        except OSError as exc:
            missing["sysfs"] = str(exc)
    return found, missing
