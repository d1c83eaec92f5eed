"""Lines drop-ins (`[tracking] lines_dir`): validated by the config's models with every problem by key path,
written atomically, and overriding the config file's lines at load."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from daemon.config.lines_dropin import CameraLines, LinesInvalidError, parse, read, source_of, to_toml, write
from daemon.config.settings import ConfigError, load_settings
from tools.kit.daemon_config import write_config

LINE = {"id": "count", "start": [0.5, 0.0], "end": [0.5, 1.0], "direction": [1.0, 0.0]}


def test_every_problem_is_reported_by_key_path() -> None:
    body = {
        "mm_per_px": -1,
        "lines": [
            {**LINE, "start": [1.5, 0.0]},
            {"id": "9bad", "start": [0.1, 0.1], "end": [0.2, 0.2], "gates": [{"id": "g", "distance_mm": 0}]},
        ],
        "colour": "red",
    }
    with pytest.raises(LinesInvalidError) as err:
        parse(body)
    keys = sorted(p.split(":")[0] for p in err.value.problems)
    assert keys == ["colour", "lines.0.start", "lines.1.gates.0.distance_mm", "lines.1.id", "mm_per_px"]
    assert any("outside the frame" in p for p in err.value.problems)


def test_the_rules_across_lines_are_the_cameras() -> None:
    gated = {**LINE, "gates": [{"id": "reject1", "distance_mm": 400}]}
    with pytest.raises(LinesInvalidError, match="need the camera's mm_per_px"):
        parse({"lines": [gated]})
    with pytest.raises(LinesInvalidError, match="used twice"):
        parse({"mm_per_px": 0.5, "lines": [LINE, LINE]})
    with pytest.raises(LinesInvalidError, match="runs along the line"):
        parse({"lines": [{**LINE, "direction": [0.0, 1.0]}]})


def test_a_written_file_reads_back_the_same_and_leaves_no_temporary(tmp_path: Path) -> None:
    lines = parse({"mm_per_px": 0.75, "lines": [{**LINE, "gates": [{"id": "reject1", "distance_mm": 400}]}]})
    path = write(tmp_path / "lines", "belt-1", lines)
    assert path == tmp_path / "lines" / "belt-1.toml"
    assert os.listdir(tmp_path / "lines") == ["belt-1.toml"]
    assert read(tmp_path / "lines", "belt-1") == lines
    doc = tomllib.loads(path.read_text())
    assert doc["mm_per_px"] == 0.75 and doc["lines"][0]["gates"] == [{"id": "reject1", "distance_mm": 400.0}]
    assert read(tmp_path / "lines", "other") is None
    assert "mm_per_px =" not in to_toml(CameraLines())


def config(tmp_path: Path, lines_dir: Path) -> Path:
    cameras = [
        {"id": "a", "url": "rtsp://127.0.0.1:1/a", "lines": [LINE]},
        {"id": "b", "url": "rtsp://127.0.0.1:1/b", "lines": [LINE]},
    ]
    return write_config(
        tmp_path / "beltsight.toml",
        redis_url="redis://127.0.0.1:1",
        cameras=cameras,
        tracking={"lines_dir": str(lines_dir)},
    )


def test_a_dropin_overrides_its_cameras_lines_and_leaves_the_config_file_alone(tmp_path: Path) -> None:
    lines_dir = tmp_path / "lines"
    path = config(tmp_path, lines_dir)
    text = path.read_text()
    moved = parse({"mm_per_px": 0.5, "lines": [{**LINE, "id": "moved", "start": [0.3, 0.0], "end": [0.3, 1.0]}]})
    write(lines_dir, "a", moved)
    settings = load_settings(path)
    a, b = settings.cameras
    assert CameraLines.of(a) == moved and a.mm_per_px == 0.5
    assert [line.id for line in b.lines] == ["count"] and b.mm_per_px is None
    assert source_of(lines_dir, "a") == f"drop-in {lines_dir / 'a.toml'}"
    assert source_of(lines_dir, "b") == "the config file"
    assert path.read_text() == text


def test_an_invalid_dropin_makes_the_config_invalid_naming_the_file(tmp_path: Path) -> None:
    lines_dir = tmp_path / "lines"
    path = config(tmp_path, lines_dir)
    lines_dir.mkdir()
    (lines_dir / "b.toml").write_text('[[lines]]\nid = "x"\nstart = [0.5, 2.0]\nend = [0.5, 1.0]\n')
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert err.value.errors == [f"{lines_dir / 'b.toml'}: lines.0.start: " + err.value.errors[0].split(": ", 2)[2]]
    assert "outside the frame" in err.value.errors[0]
