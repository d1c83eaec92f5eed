"""The `[thermal]` section: keyword construction, the TOML file, the environment, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config.settings import ConfigError, Settings, load_settings
from daemon.config.thermal import ThermalConfig
from daemon.thermal import Reading, ThermalGovernor

BASE = """
[models]
640 = "m640.onnx"

[thermal]
sysfs_root = "/run/beltsight-test/thermal"
limit_c = 72.5
critical_c = 80
resume_c = 65
interval_s = 0.5
min_share = 0.2
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "beltsight.toml"
    path.write_text(text)
    return path


def test_keyword_construction_and_defaults() -> None:
    config = ThermalConfig(enabled=True, limit_c=70, critical_c=85, resume_c=60, interval_s=2, min_share=0.05)
    assert (config.limit_c, config.critical_c, config.resume_c, config.min_share) == (70, 85, 60, 0.05)
    assert ThermalConfig().limit_c is None and ThermalConfig().sysfs_root == Path("/sys/class/thermal")
    assert Settings.model_fields["thermal"].default == ThermalConfig()


def test_the_section_loads_from_the_file_and_the_environment_overrides_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings(write(tmp_path, BASE))
    assert settings.thermal.sysfs_root == Path("/run/beltsight-test/thermal")
    assert (settings.thermal.limit_c, settings.thermal.interval_s, settings.thermal.min_share) == (72.5, 0.5, 0.2)
    monkeypatch.setenv("BELTSIGHT_THERMAL__LIMIT_C", "70")
    monkeypatch.setenv("BELTSIGHT_THERMAL__ENABLED", "false")
    overridden = load_settings(write(tmp_path, BASE))
    assert overridden.thermal.limit_c == 70.0 and not overridden.thermal.enabled


def test_bad_thermal_settings_name_their_key(tmp_path: Path) -> None:
    bad = BASE.replace("critical_c = 80", "critical_c = 70\nlimt_c = 3").replace("min_share = 0.2", "min_share = 0")
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, bad))
    errors = "\n".join(info.value.errors)
    assert "thermal.limt_c: unknown key" in errors
    assert "thermal.min_share" in errors
    with pytest.raises(ValueError, match=r"critical_c \(70.0\) must be above limit_c \(72.5\)"):
        ThermalConfig(limit_c=72.5, critical_c=70)
    with pytest.raises(ValueError, match="resume_c"):
        ThermalConfig(critical_c=80, resume_c=85)


def test_a_pc_platforms_zones_are_not_governed_by_default() -> None:
    """An x86 box's CPU package and ACPI zones, with no trip point to read, would be held at the
    fallback limit: ignored unless the integrator asks for them (a Jetson's zones still count)."""
    governor = ThermalGovernor(ThermalConfig())
    hot_pc = [Reading("x86_pkg_temp", 95.0), Reading("acpitz", 90.0), Reading("pch_cannonlake", 85.0)]
    assert governor.update(0.0, hot_pc).share == 1.0
    jetson = ThermalGovernor(ThermalConfig())
    throttle = jetson.update(0.0, [Reading("x86_pkg_temp", 40.0), Reading("gpu-thermal", 95.0)])
    assert throttle.share < 1.0
    asked = ThermalGovernor(ThermalConfig(ignore=[]))
    assert asked.update(0.0, hot_pc).share < 1.0
