"""`gige://` cameras in the config: the URL, `[cameras.gige]`, and check-config where Aravis is or is not installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from daemon.__main__ import main
from daemon.config.settings import EX_CONFIG, ConfigError, load_settings
from tests.support.fixtures_gige import need_aravis

REPO = Path(__file__).resolve().parents[3]

CONFIG = f"""
[models]
640 = "{REPO / "models" / "conveyor-640.onnx"}"

[engine]
providers = ["cpu"]

[[cameras]]
id = "sorter"
url = "gige://127.0.0.1"
{{extra}}
"""


def write(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "beltsight.toml"
    path.write_text(CONFIG.replace("{extra}", extra))
    return path


def errors(tmp_path: Path, extra: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, extra))
    return info.value.errors


def test_check_config_accepts_a_gige_camera_and_its_settings(tmp_path: Path) -> None:
    need_aravis()
    extra = """
[cameras.gige]
frame_rate = 30.0
exposure_us = 1500.0
gain = 6.0
pixel_format = "BayerRG8"
packet_size = 8192
trigger = "Line1"
"""
    path = write(tmp_path, extra)
    assert main(["check-config", "-c", str(path)]) == 0
    camera = load_settings(path).cameras[0]
    assert camera.kind == "gige" and camera.gige_device == "127.0.0.1"
    assert camera.gige_settings.hardware_trigger and camera.gige_settings.pixel_format == "BayerRG8"


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ('[cameras.gige]\ntrigger = "software"', "trigger = 'software' needs frame_rate"),
        ('[cameras.gige]\ntrigger = "on a whim"', "must be 'free', 'software' or a trigger line name"),
        ('[cameras.gige]\npixel_format = "Mono16"', "cameras.0.gige.pixel_format"),
        ("[cameras.gige]\npacket_size = 100", "cameras.0.gige.packet_size"),
    ],
)
def test_bad_gige_settings_are_config_errors(tmp_path: Path, extra: str, expected: str) -> None:
    need_aravis()
    assert any(expected in e for e in errors(tmp_path, extra)), errors(tmp_path, extra)


def test_gige_settings_on_an_rtsp_camera_and_a_gige_url_without_device_are_errors(tmp_path: Path) -> None:
    text = CONFIG.replace("gige://127.0.0.1", "rtsp://10.0.0.2/s").replace("{extra}", "[cameras.gige]\ngain = 1.0")
    (tmp_path / "a.toml").write_text(text)
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path / "a.toml")
    assert any("[cameras.gige] is for gige:// cameras only" in e for e in info.value.errors)
    need_aravis()
    (tmp_path / "b.toml").write_text(CONFIG.replace("gige://127.0.0.1", "gige://").replace("{extra}", ""))
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path / "b.toml")
    assert any("gige:// needs a device" in e for e in info.value.errors)


@pytest.mark.parametrize(
    ("gi_module", "names"),
    [
        ('raise ImportError("No module named gi")', ["PyGObject", "beltsight[gige]"]),
        (
            "def require_version(namespace, version):\n    raise ValueError(f'Namespace {namespace} not available')\n",
            ["gir1.2-aravis-0.8", "beltsight[gige]"],
        ),
    ],
    ids=["no PyGObject", "no Aravis typelib"],
)
def test_without_aravis_a_gige_camera_fails_check_config_naming_the_package(
    tmp_path: Path, gi_module: str, names: list[str]
) -> None:
    """As on a box without the gige extra: a `gi` that cannot be imported, or has no Aravis typelib,
    shadows the real one (first on PYTHONPATH) in a fresh `beltsight check-config`."""
    shadow = tmp_path / "shadow" / "gi"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(gi_module)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(shadow.parent), str(REPO)]))
    cmd = [sys.executable, "-m", "daemon", "check-config", "-c", str(write(tmp_path))]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=120, check=False)
    assert result.returncode == EX_CONFIG, result.stderr
    assert "cameras.0.url" in result.stderr
    for name in names:
        assert name in result.stderr
    rtsp = write(tmp_path).read_text().replace("gige://127.0.0.1", "rtsp://10.0.0.2/s")
    (tmp_path / "rtsp.toml").write_text(rtsp)
    cmd[-1] = str(tmp_path / "rtsp.toml")
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=120, check=False)
    assert result.returncode == 0, result.stderr  # RTSP cameras need none of it
