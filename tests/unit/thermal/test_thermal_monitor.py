"""The daemon's thermal loop without the daemon: governor -> actuator, metrics, events, status."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from daemon.config.engine import EngineConfig
from daemon.config.thermal import ThermalConfig
from daemon.core.frames import StatusEvent
from daemon.core.metrics import Metrics
from daemon.thermal.monitor import ThermalMonitor, read_all, thermal_report
from daemon.thermal.types import Reading, SensorInfo


class Recorder:
    def __init__(self) -> None:
        self.shares: list[float] = []
        self.events: list[StatusEvent] = []
        self.status: list[str] = []


def monitor(config: ThermalConfig) -> tuple[ThermalMonitor, Recorder, Metrics]:
    rec, metrics = Recorder(), Metrics()
    mon = ThermalMonitor(
        config,
        EngineConfig(providers=["cpu"]),
        metrics,
        apply=rec.shares.append,
        on_event=rec.events.append,
        on_status=rec.status.append,
    )
    return mon, rec, metrics


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_every_level_change_is_an_event_a_status_line_and_metrics() -> None:
    mon, rec, metrics = monitor(ThermalConfig(limit_c=70, critical_c=80, resume_c=60, min_pause_s=5))
    temps = [50.0] * 5 + [75.0] * 10 + [85.0] * 3 + [40.0] * 50
    for t, celsius in enumerate(temps):
        mon.step(float(t), [Reading("gpu-thermal", celsius), Reading("cv0-thermal", float("nan"))])
    details = [json.loads(e.detail) for e in rec.events]
    assert [(d["from"], d["to"]) for d in details] == [
        ("normal", "regulating"),
        ("regulating", "paused"),
        ("paused", "regulating"),
        ("regulating", "normal"),  # cool again: back to full speed, and normal once it stays there
    ]
    assert all(e.kind == "throttle_changed" for e in rec.events)
    assert details[1]["sensor"] == "gpu-thermal" and details[1]["celsius"] == 85.0 and details[1]["share"] == 0.0
    assert len(rec.status) == 4 and rec.status[1].startswith("thermal paused")
    assert rec.shares[:5] == [1.0] * 5 and min(rec.shares) == 0.0 and len(rec.shares) == len(temps)
    assert sample(metrics, "beltsight_temperature_celsius", sensor="gpu-thermal") == 40.0
    assert sample(metrics, "beltsight_temperature_celsius", sensor="cv0-thermal") is None  # offline: absent
    assert sample(metrics, "beltsight_throttle_level") == 0.0
    assert sample(metrics, "beltsight_throttle_share") == pytest.approx(mon.share)
    paused_s = sample(metrics, "beltsight_throttle_seconds_total", level="paused")
    assert paused_s is not None and paused_s >= 5.0
    levels = ("normal", "regulating", "paused")
    total = sum(sample(metrics, "beltsight_throttle_seconds_total", level=lv) or 0.0 for lv in levels)
    assert total == pytest.approx(len(temps) - 1)
    health = mon.health()
    assert health["level"] == "normal" and health["share"] == 1.0
    assert health["sensors"]["gpu-thermal"]["limit_c"] == 70.0
    assert health["sensors"]["cv0-thermal"]["celsius"] is None


def test_without_sensors_the_daemon_runs_at_full_speed_and_health_says_why(tmp_path: Path) -> None:
    mon, rec, _ = monitor(ThermalConfig(sysfs_root=tmp_path))
    asyncio.run(mon.run())  # returns: nothing to watch
    assert mon.share == 1.0 and rec.shares == []
    assert "sysfs" in mon.health()["missing"]


def test_doctor_report_shows_sensors_thresholds_trip_points_and_the_limits_applied(tmp_path: Path) -> None:
    zone = tmp_path / "thermal_zone0"
    zone.mkdir()
    (zone / "type").write_text("gpu-thermal\n")
    (zone / "temp").write_text("51000\n")
    (zone / "trip_point_0_type").write_text("passive\n")
    (zone / "trip_point_0_temp").write_text("92000\n")
    (zone / "trip_point_1_type").write_text("critical\n")
    (zone / "trip_point_1_temp").write_text("104000\n")
    pmic = tmp_path / "thermal_zone1"
    pmic.mkdir()
    (pmic / "type").write_text("PMIC-Die\n")
    (pmic / "temp").write_text("100000\n")
    data, lines = thermal_report(ThermalConfig(sysfs_root=tmp_path), EngineConfig(providers=["cpu"]))
    gpu, die = data["sensors"]
    assert (gpu["sensor"], gpu["celsius"], gpu["limit_c"], gpu["critical_c"]) == ("gpu-thermal", 51.0, 87.0, 91.0)
    assert gpu["trip_points"] == [["passive", 92.0], ["critical", 104.0]] and gpu["counts"]
    assert die["sensor"] == "PMIC-Die" and not die["counts"]
    assert "limit 87.0 C, pause at 91.0 C" in lines[0] and "ignored" in lines[1]
    _, none = thermal_report(ThermalConfig(sysfs_root=tmp_path / "absent"), EngineConfig(providers=["cpu"]))
    assert "no sensor" in none[0]


class FlakySensor:
    """A TemperatureSensor whose driver raises something unexpected on every other read."""

    name = "flaky"

    def __init__(self) -> None:
        self.reads = 0

    def read(self) -> list[Reading]:
        self.reads += 1
        if self.reads % 2:
            raise RuntimeError("driver hiccup")
        return [Reading("flaky0", 50.0)]

    def info(self) -> list[SensorInfo]:
        return []

    def close(self) -> None:
        pass


class SteadySensor(FlakySensor):
    name = "steady"

    def read(self) -> list[Reading]:
        return [Reading("steady0", 42.0)]


def test_a_sensor_that_raises_gives_no_reading_that_time_and_the_others_still_count() -> None:
    flaky, failing = FlakySensor(), set[str]()
    first = read_all([flaky, SteadySensor()], failing)
    assert [r.sensor for r in first] == ["steady0"] and failing == {"flaky"}
    second = read_all([flaky, SteadySensor()], failing)
    assert [r.sensor for r in second] == ["flaky0", "steady0"] and failing == set()
