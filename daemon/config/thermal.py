"""The `[thermal]` settings section: sensors, the limit the governor holds, the pause, the controller.

Temperatures left unset come from the hardware: `limit_c` from the slowdown threshold each
sensor reports (NVML SLOWDOWN / GPU_MAX, a zone's passive trip) less `margin_c`, or
`fallback_limit_c` where a sensor reports none; `critical_c` and `resume_c` from the limit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import Field, model_validator

from daemon.config.base import Seconds, Section

DEFAULT_SYSFS_ROOT = Path("/sys/class/thermal")
DEFAULT_IGNORED = (
    "PMIC-Die",
    "thermal-fan-est*",
    "x86_pkg_temp",
    "acpitz",
    "pch_*",
    "iwlwifi*",
    "INT3400 Thermal",
    "B0D4",
    "TCPU",
)
"""Zones that are no device temperature: older L4T's PMIC-Die reads a constant 100 C, and the
fan estimate is a mix of other zones. And a PC or server platform's zones (the CPU package, ACPI,
the chipset, Wi-Fi): an x86 CPU throttles itself at its own TjMax, and with no trip point to read
the governor would hold it at `fallback_limit_c`, slowing CPU inference on a box that is not
overheating. To govern on them anyway, set `ignore` without them."""


class ThermalConfig(Section):
    enabled: bool = True
    """Run the governor. Without a usable sensor the daemon runs at full speed (and says so)."""
    sensors: Literal["auto", "nvml", "sysfs"] = "auto"
    """auto: NVML for the engine's CUDA device when the first provider is CUDA and NVML works,
    else the thermal zones under `sysfs_root` (a Jetson)."""
    sysfs_root: Path = DEFAULT_SYSFS_ROOT
    """Directory holding `thermal_zone*/` (tests point it at a tree they write)."""
    include: list[str] = Field(default_factory=list)
    """Sensor names (fnmatch patterns) that count; empty: all of the chosen kind."""
    ignore: list[str] = Field(default_factory=lambda: list(DEFAULT_IGNORED))
    """Sensor names (fnmatch patterns) that never count."""
    limit_c: float | None = Field(None, gt=0, lt=150)
    """The temperature the governor holds the hottest sensor at (None: from the hardware)."""
    margin_c: float = Field(5.0, ge=0, le=30)
    """A derived limit sits this far under the slowdown threshold the hardware reports."""
    fallback_limit_c: float = Field(80.0, gt=0, lt=150)
    """The limit for a sensor that reports no threshold (and no `limit_c` is set)."""
    critical_c: float | None = Field(None, gt=0, lt=160)
    """At this temperature inference pauses (None: the limit + 5 C, and at least 1 C under the
    hardware's own slowdown threshold where it reports one)."""
    resume_c: float | None = Field(None, gt=0, lt=150)
    """A pause ends once the hottest sensor is back at or below this (None: the limit - 5 C), or
    once it has settled idle half the pause margin (critical - limit) under the limit."""
    min_pause_s: Seconds = 20.0
    """A pause lasts at least this long; one that follows a resume within 8 times the last
    pause's length lasts twice as long as that one (up to 16 x) and resumes only 5 C further under
    `resume_c` (up to 15 C), so the two never alternate quickly."""
    interval_s: Seconds = 1.0
    """Seconds between sensor reads and governor updates."""
    min_share: float = Field(0.1, gt=0, le=1)
    """The least share of full speed the governor regulates down to before it pauses."""
    forecast_s: float = Field(8.0, ge=0, le=120)
    """Horizon of the trend forecast: the governor acts on T + slope x forecast_s (least-squares
    slope over `trend_window_s`), so it cuts before the limit rather than after."""
    trend_window_s: Seconds = 8.0
    """Seconds of readings the forecast's slope is fitted over (its last half when a fast change shows
    there clearly); also the unit of the reset to full speed (2.5 windows `reset_below_c` under)."""
    cut_gain: float = Field(0.006, gt=0, le=1)
    """Integral gain while over the limit: share per (C x s)."""
    raise_gain: float = Field(0.004, gt=0, le=1)
    """Integral gain while under the limit: share per (C x s), as if at most 5 C under it (a
    slower, bounded climb: after a pause or a cut the share creeps back instead of overshooting)."""
    proportional_gain: float = Field(0.02, ge=0, le=1)
    """Share per C of change of the forecast temperature error (the incremental P term)."""
    deadband_c: float = Field(0.5, ge=0, le=5)
    """No integral action while the forecast is this close to the limit (1 C sensor steps)."""
    reset_below_c: float = Field(10.0, gt=0, le=60)
    """This far below the limit (now and forecast) the governor goes straight back to full speed."""

    @model_validator(mode="after")
    def _check_order(self) -> Self:
        limit, critical, resume = self.limit_c, self.critical_c, self.resume_c
        if limit is not None and critical is not None and critical <= limit:
            raise ValueError(f"critical_c ({critical}) must be above limit_c ({limit})")
        if critical is not None and resume is not None and resume >= critical:
            raise ValueError(f"resume_c ({resume}) must be below critical_c ({critical})")
        return self
