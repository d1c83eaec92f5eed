"""`tools/checks/gpu_check.py`'s thermal section: the real NVML reader (pynvml, no fake) on a GPU host.

Reads the engine's device through `daemon.thermal.sensors.NvmlSensor` exactly as the daemon does, checks
what the driver reports (temperature, slowdown thresholds, clock-event reasons, power), and runs
the governor once on the real reading to show the limit it would hold.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from daemon.config.seam import ThermalConfig
from daemon.thermal.seam import LEVELS, NvmlSensor, ThermalGovernor

Check = Callable[[str, bool, str], None]
Skip = Callable[[str, str], None]


def thermal_checks(device_id: int, check: Check, skip: Skip) -> None:
    try:
        sensor = NvmlSensor(device_ids=[device_id])
    except Exception as exc:  # NVMLError subclasses, ImportError
        skip("NVML thermal sensor (real pynvml)", f"{type(exc).__name__}: {exc}")
        return
    try:
        readings = sensor.read()
        reading = readings[0]
        check(
            "NVML temperature of the engine's device",
            reading.online and 5.0 <= reading.celsius <= 110.0,
            f"{reading.sensor} {reading.celsius} C",
        )
        (info,) = sensor.info()
        check(
            "NVML slowdown threshold reported (SLOWDOWN / GPU_MAX or the TLIMIT fields)",
            reading.slowdown_c is not None and reading.slowdown_c > reading.celsius,
            f"{info.thresholds}",
        )
        check("NVML clock-event reasons readable", "unavailable" not in info.note, info.note)
        check("NVML power draw", reading.power_w is not None and reading.power_w > 0, f"{reading.power_w} W")
        start = time.perf_counter()
        for _ in range(20):
            sensor.read()
        per_read_ms = (time.perf_counter() - start) / 20 * 1000
        print(f"       NVML: one read of the thermal sensor takes {per_read_ms:.2f} ms")
        governor = ThermalGovernor(ThermalConfig())
        throttle = governor.update(0.0, readings)
        limits = governor.limits(reading)
        check(
            "governor on the real reading",
            throttle.level in LEVELS and 0.0 <= throttle.share <= 1.0,
            f"limit {limits.limit_c} C, pause at {limits.critical_c} C: {throttle.level}, share {throttle.share}",
        )
    finally:
        sensor.close()
