"""The thermal room's values: one sensor reading, what a sensor knows, and the sensor Protocol.

Pure (stdlib only), so the governor that reads them stays pure too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

OFFLINE_BELOW_C = -200.0  # thermal zones report -256 C for a sensor that is not there


@dataclass(frozen=True, slots=True)
class Reading:
    """One sensor's temperature (NaN: offline). `slowdown_c`: where its hardware starts slowing
    itself (NVML SLOWDOWN / GPU_MAX, a zone's passive trip), None if it reports none;
    `hw_slowdown`: it reports a thermal clock slowdown now; `power_w`: board power, if known."""

    sensor: str
    celsius: float
    slowdown_c: float | None = None
    shutdown_c: float | None = None
    hw_slowdown: bool = False
    power_w: float | None = None

    @property
    def online(self) -> bool:
        return math.isfinite(self.celsius) and self.celsius > OFFLINE_BELOW_C


@dataclass(frozen=True, slots=True)
class SensorInfo:
    """What a sensor knows about one device or zone, for doctor."""

    sensor: str
    kind: str
    thresholds: dict[str, float] = field(default_factory=dict)
    trip_points: tuple[tuple[str, float], ...] = ()
    note: str = ""


class TemperatureSensor(Protocol):
    name: str

    def read(self) -> list[Reading]: ...

    def info(self) -> list[SensorInfo]: ...

    def close(self) -> None: ...
