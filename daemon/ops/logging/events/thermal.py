"""The thermal room's rows: the sensors and the governor's share of full speed."""

from __future__ import annotations

from daemon.ops.logging.event import LogEvent

THERMAL_EVENTS: tuple[LogEvent, ...] = (
    LogEvent(
        "thermal_read_failed",
        "error",
        "a temperature sensor raised while being read; it gives no reading this time (the governor holds)",
        ("sensor", "error"),
    ),
    LogEvent(
        "thermal_started",
        "info",
        "the thermal governor watches these sensors (limit_c null: from the hardware's thresholds)",
        ("sensors", "interval_s", "limit_c"),
    ),
    LogEvent(
        "thermal_unavailable",
        "info",
        "no usable temperature sensor (NVML, thermal zones): inference runs at full speed unthrottled",
        ("missing",),
    ),
    LogEvent(
        "throttle_changed",
        "warning",
        "the thermal throttle level changed (normal, regulating, paused); also an entry in beltsight:events",
        ("from_level", "to_level", "share", "sensor", "celsius", "reason"),
    ),
)
