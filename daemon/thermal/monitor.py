"""The thermal loop of a running daemon: sensors -> governor -> the lanes' batchers, and reporting.

Every `interval_s` the sensors are read in a thread, `ThermalGovernor.update` decides the share,
and `apply(share)` hands it to every lane's batcher. Each change of level is logged
(`throttle_changed`), sent to `beltsight:events` (kind `throttle_changed`, detail JSON with
from/to/share/sensor/celsius/reason), and shown in the sd_notify STATUS line; the metrics and
`/healthz` carry the current state. Without a usable sensor the daemon runs at full speed and
says why once (`thermal_unavailable`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from daemon.config.engine import EngineConfig
from daemon.config.thermal import ThermalConfig
from daemon.core.clock import SYSTEM_CLOCK, Clock, time_ms
from daemon.core.frames import StatusEvent
from daemon.core.metrics import Metrics
from daemon.core.status import StatusCallback
from daemon.thermal.governor import LEVELS, Limits, ThermalGovernor, Throttle, relevant
from daemon.thermal.sensors import detect_sensors
from daemon.thermal.types import Reading, TemperatureSensor

log = structlog.get_logger("beltsight.thermal")


def open_sensors(
    config: ThermalConfig, engine: EngineConfig, nvml: Any = None
) -> tuple[list[TemperatureSensor], dict[str, str]]:
    """The sensors the governor should watch here (blocking: call from a thread).

    NVML counts only the CUDA device the engine runs on, and only when CUDA is the first
    provider (`auto`); otherwise, or without NVML, the thermal zones under `sysfs_root`."""
    uses_cuda = engine.providers[0] == "cuda"
    missing: dict[str, str] = {}
    if config.sensors == "nvml" or (config.sensors == "auto" and uses_cuda):
        found, missing = detect_sensors(nvml=nvml, device_ids=[engine.cuda.device_id], kinds=("nvml",))
        if found or config.sensors == "nvml":
            return found, missing
    found, more = detect_sensors(config.sysfs_root, kinds=("sysfs",))
    return found, missing | more


def read_all(sensors: Sequence[TemperatureSensor], failing: set[str] | None = None) -> list[Reading]:
    """Every sensor's readings; a sensor that fails unexpectedly gives none this time (logged
    once until it reads again, when `failing` keeps track across calls)."""
    failing = set() if failing is None else failing
    readings: list[Reading] = []
    for sensor in sensors:
        try:
            readings.extend(sensor.read())
        except Exception as exc:  # a bug or an odd driver must not stop the thermal loop
            if sensor.name not in failing:
                log.error("thermal_read_failed", sensor=sensor.name, error=f"{type(exc).__name__}: {exc}")
            failing.add(sensor.name)
        else:
            failing.discard(sensor.name)
    return readings


class ThermalMonitor:
    """Owns the sensors and the governor of one daemon; `run()` is its long-lived task."""

    def __init__(
        self,
        config: ThermalConfig,
        engine: EngineConfig,
        metrics: Metrics,
        *,
        apply: Callable[[float], None],
        on_event: StatusCallback,
        on_status: Callable[[str], None],
        nvml: Any = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.config = config
        self.governor = ThermalGovernor(config)
        self._engine = engine
        self._metrics = metrics
        self._apply = apply
        self._on_event = on_event
        self._on_status = on_status
        self._nvml = nvml
        self._clock = clock
        self._sensors: list[TemperatureSensor] = []
        self._missing: dict[str, str] = {}
        self._readings: list[Reading] = []
        self._failing: set[str] = set()
        self._last_update: float | None = None
        self.throttle = Throttle(1.0, "normal", "not started")

    @property
    def share(self) -> float:
        return self.throttle.share

    async def run(self) -> None:
        """Read, decide, apply, report every `interval_s` until cancelled (cancellation propagates)."""
        if not self.config.enabled:
            self.throttle = Throttle(1.0, "normal", "disabled")
            return
        loop = asyncio.get_running_loop()
        self._sensors, self._missing = await loop.run_in_executor(
            None, open_sensors, self.config, self._engine, self._nvml
        )
        if not self._sensors:
            self.throttle = Throttle(1.0, "normal", "no sensor")
            log.info("thermal_unavailable", missing=self._missing)
            return
        log.info(
            "thermal_started",
            sensors=[s.name for s in self._sensors],
            interval_s=self.config.interval_s,
            limit_c=self.config.limit_c,
        )
        try:
            while True:
                readings = await loop.run_in_executor(None, read_all, self._sensors, self._failing)
                self.step(self._clock.monotonic(), readings)
                await asyncio.sleep(self.config.interval_s)
        finally:
            for sensor in self._sensors:
                sensor.close()

    def step(self, now_s: float, readings: list[Reading]) -> Throttle:
        """One update: governor, actuator, metrics, and the reports of a change of level."""
        before = self.throttle
        throttle = self.governor.update(now_s, readings)
        self._readings = readings
        self._apply(throttle.share)
        self._record(now_s, before, throttle, readings)
        self.throttle = throttle
        if throttle.level != before.level:
            self._report_change(before, throttle)
        return throttle

    def _record(self, now_s: float, before: Throttle, throttle: Throttle, readings: list[Reading]) -> None:
        m = self._metrics
        if self._last_update is not None:
            m.throttle_seconds.labels(level=before.level).inc(max(0.0, now_s - self._last_update))
        self._last_update = now_s
        m.throttle_share.set(throttle.share)
        m.throttle_level.set(LEVELS.index(throttle.level))
        for r in readings:
            if not relevant(self.config, r.sensor):
                continue
            if r.online:
                m.temperature.labels(sensor=r.sensor).set(r.celsius)
            else:
                with contextlib.suppress(KeyError):  # not set yet
                    m.temperature.remove(r.sensor)

    def _report_change(self, before: Throttle, after: Throttle) -> None:
        log.warning(
            "throttle_changed",
            from_level=before.level,
            to_level=after.level,
            share=after.share,
            sensor=after.sensor,
            celsius=after.celsius,
            reason=after.reason,
        )
        detail = {
            "from": before.level,
            "to": after.level,
            "share": after.share,
            "sensor": after.sensor,
            "celsius": after.celsius,
            "reason": after.reason,
        }
        self._on_event(StatusEvent(kind="throttle_changed", detail=json.dumps(detail), at_ms=time_ms(self._clock)))
        self._on_status(f"thermal {after.level}: share {after.share:.2f}, {after.reason}")

    def health(self) -> dict[str, Any]:
        t = self.throttle
        sensors: dict[str, Any] = {}
        for r in self._readings:
            if relevant(self.config, r.sensor):
                limits: Limits = self.governor.limits(r)
                sensors[r.sensor] = {
                    "celsius": r.celsius if r.online else None,
                    "limit_c": limits.limit_c,
                    "critical_c": limits.critical_c,
                    "hw_slowdown": r.hw_slowdown,
                }
        report: dict[str, Any] = {
            "enabled": self.config.enabled,
            "level": t.level,
            "share": t.share,
            "reason": t.reason,
            "sensors": sensors,
        }
        if self._missing and not self._sensors:
            report["missing"] = self._missing
        return report


def thermal_report(config: ThermalConfig, engine: EngineConfig, nvml: Any = None) -> tuple[dict[str, Any], list[str]]:
    """What doctor shows (as data, and as lines): the sensors the governor would watch, their
    readings, thresholds and trip points, and the limits that would apply to each."""
    sensors, missing = open_sensors(config, engine, nvml)
    governor = ThermalGovernor(config)
    found: list[dict[str, Any]] = []
    lines: list[str] = []
    for sensor in sensors:
        infos = {i.sensor: i for i in sensor.info()}
        for r in read_all([sensor]):
            info = infos.get(r.sensor)
            limits = governor.limits(r)
            counts = relevant(config, r.sensor)
            entry: dict[str, Any] = {
                "sensor": r.sensor,
                "kind": sensor.name,
                "celsius": r.celsius if r.online else None,
                "counts": counts,
                "thresholds": info.thresholds if info else {},
                "trip_points": [list(t) for t in info.trip_points] if info else [],
                "hw_slowdown": r.hw_slowdown,
                "power_w": r.power_w,
                "limit_c": limits.limit_c,
                "critical_c": limits.critical_c,
                "resume_c": limits.resume_c,
            }
            found.append(entry)
            now = f"{r.celsius:.1f} C" if r.online else "offline"
            th = ", ".join(f"{k} {v:g} C" for k, v in entry["thresholds"].items()) or "no thresholds reported"
            trips = ", ".join(f"{kind} {c:g} C" for kind, c in (info.trip_points if info else ()))
            rule = (
                f"limit {limits.limit_c:.1f} C, pause at {limits.critical_c:.1f} C, resume at {limits.resume_c:.1f} C"
                if counts
                else "ignored ([thermal] ignore/include)"
            )
            extra = (f"; trip points {trips}" if trips else "") + (f"; {info.note}" if info and info.note else "")
            lines.append(f"thermal {sensor.name} {r.sensor}: {now} ({th}{extra}) -> {rule}")
        sensor.close()
    if not found:
        why = "; ".join(f"{k}: {v}" for k, v in missing.items())
        lines.append(f"thermal: no sensor ({why}): inference would run unthrottled")
    if not config.enabled:
        lines.append("thermal: governor disabled ([thermal] enabled = false)")
    return {"enabled": config.enabled, "sensors": found, "missing": missing}, lines
