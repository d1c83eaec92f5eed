"""Tracking config: `[tracking]` defaults, a camera's lines and gates, and every bad line a config error
(exit 78) naming its key path."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.__main__ import main
from daemon.config.settings import EX_CONFIG, ConfigError, load_settings

REPO = Path(__file__).resolve().parents[3]

BASE = f"""
[models]
640 = "{REPO / "models" / "conveyor-640.onnx"}"

[[cameras]]
id = "cam1"
url = "rtsp://127.0.0.1:8554/a"
"""

LINE = """
[[cameras.lines]]
id = "{id}"
start = {start}
end = {end}
direction = {direction}
"""

GATE = """
[[cameras.lines.gates]]
id = "{id}"
distance_mm = {distance}
"""


def config(tmp_path: Path, *parts: str, head: str = "") -> Path:
    path = tmp_path / "beltsight.toml"
    path.write_text(head + BASE + "".join(parts))
    return path


def line(id: str = "gate", start: str = "[0.5, 0.0]", end: str = "[0.5, 1.0]", direction: str = "[1.0, 0.0]") -> str:
    return LINE.format(id=id, start=start, end=end, direction=direction)


def gate(id: str = "reject1", distance: float = 1200) -> str:
    return GATE.format(id=id, distance=distance)


def test_a_line_with_a_gate_on_a_calibrated_camera_loads(tmp_path: Path) -> None:
    path = config(tmp_path, "mm_per_px = 0.5\n", line(), gate(), head="[tracking]\nlost_s = 2.5\n")
    settings = load_settings(path)
    cam = settings.cameras[0]
    assert settings.tracking.enabled and settings.tracking.lost_s == 2.5
    assert cam.mm_per_px == 0.5 and cam.lines[0].id == "gate"
    assert cam.lines[0].gates[0].distance_mm == 1200 and cam.lines[0].direction == (1.0, 0.0)


@pytest.mark.parametrize(
    ("parts", "key", "why"),
    [
        ((line(start="[0.5, 1.2]"),), "cameras.0.lines.0.start", "outside the frame"),
        ((line(end="[-0.1, 1.0]"),), "cameras.0.lines.0.end", "outside the frame"),
        ((line(end="[0.5, 0.0]"),), "cameras.0.lines.0", "needs a length"),
        ((line(direction="[0.0, 0.0]"),), "cameras.0.lines.0.direction", "no direction"),
        ((line(direction="[0.0, 1.0]"),), "cameras.0.lines.0", "runs along the line"),
        ((line(), line()), "cameras.0", "used twice"),
        (("mm_per_px = 0.5\n", line(), gate(), gate()), "cameras.0.lines.0", "used twice"),
        ((line(), gate()), "cameras.0", "mm_per_px"),
        ((line(id="9bad"),), "cameras.0.lines.0.id", ""),
        (("mm_per_px = 0.5\n", line(), gate(distance=0)), "cameras.0.lines.0.gates.0.distance_mm", ""),
    ],
)
def test_bad_lines_and_gates_are_config_errors_naming_the_key(
    tmp_path: Path, parts: tuple[str, ...], key: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config(tmp_path, *parts)
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    text = str(info.value)
    assert f"{key}:" in text and why in text, text
    assert main(["check-config", "-c", str(path)]) == EX_CONFIG
    assert f"{key}:" in capsys.readouterr().err


def test_check_config_shows_the_lines_and_gates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = config(tmp_path, "mm_per_px = 0.5\n", line(), gate())
    assert main(["check-config", "-c", str(path)]) == 0
    err = capsys.readouterr().err
    assert "camera cam1: tracked, 0.5 mm/px, 1 line(s)" in err
    assert "line gate: (0.5, 0) -> (0.5, 1), in = along (1, 0); reject1 at 1200 mm" in err


def test_scores_out_of_order_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tracking"):
        load_settings(config(tmp_path, head="[tracking]\nlow_score = 0.7\nhigh_score = 0.5\n"))


def test_the_tracker_parameters_take_the_sections_defaults_and_values() -> None:
    """One source: every `[tracking]` knob is a `TrackerParams` field with the section's default,
    and the section's values reach the tracker unchanged."""
    from daemon.config.tracking import TrackingConfig  # noqa: PLC0415
    from daemon.tracking.specs import CONFIG_KEYS, TrackerParams  # noqa: PLC0415

    defaults, params = TrackingConfig(), TrackerParams()
    assert set(CONFIG_KEYS) == set(TrackingConfig.model_fields) - {"enabled", "lines_dir"}
    assert {k: getattr(params, k) for k in CONFIG_KEYS} == {k: getattr(defaults, k) for k in CONFIG_KEYS}
    cfg = TrackingConfig(
        high_score=0.6, low_score=0.2, new_track_score=0.7, lost_s=2.5, min_hits=5, anchor="bottom_center"
    )
    derived = TrackerParams.from_config(cfg)
    assert {k: getattr(derived, k) for k in CONFIG_KEYS} == {k: getattr(cfg, k) for k in CONFIG_KEYS}


@pytest.mark.parametrize(
    ("knob", "value"),
    [("high_score", 0.0), ("low_score", 0.7), ("new_track_score", 0.4), ("match_iou", 1.0), ("lost_s", 0.0),
     ("min_hits", 0), ("confirm_s", 11.0), ("anchor", "top")],
)  # fmt: skip
def test_the_tracker_parameters_refuse_what_the_section_refuses(knob: str, value: object) -> None:
    from pydantic import ValidationError  # noqa: PLC0415

    from daemon.config.tracking import TrackingConfig  # noqa: PLC0415
    from daemon.tracking.specs import TrackerParams  # noqa: PLC0415

    with pytest.raises(ValidationError) as from_config:
        TrackingConfig.model_validate({knob: value})
    with pytest.raises(ValidationError, match=knob) as from_params:
        TrackerParams(**{knob: value})  # type: ignore[arg-type]
    assert [e["msg"] for e in from_params.value.errors()] == [e["msg"] for e in from_config.value.errors()]


def test_new_track_score_under_high_score_is_a_config_error_naming_both(tmp_path: Path) -> None:
    """Once refused only when the tracker was built (the daemon stopped with a traceback)."""
    path = config(tmp_path, head="[tracking]\nhigh_score = 0.7\nnew_track_score = 0.6\n")
    with pytest.raises(ConfigError, match=r"new_track_score \(0.6\) must not be under high_score \(0.7\)"):
        load_settings(path)
