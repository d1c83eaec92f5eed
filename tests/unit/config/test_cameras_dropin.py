"""The cameras drop-ins (`daemon.config.cameras_dropin`): a drop-in replaces or adds a camera, a removal
mark takes one out, what is written reads back as the same camera, and every problem of every file is
named with its path."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config.cameras import CameraConfig
from daemon.config.cameras_dropin import FILE, CamerasInvalidError, parse, remove, source_of, with_dropins, write
from daemon.config.settings import ConfigError, load_settings
from tools.kit.daemon_config import write_config

LINE = {"id": "count", "start": [0.5, 0.0], "end": [0.5, 1.0], "direction": [1.0, 0.0]}


def cam(camera_id: str, **keys: object) -> CameraConfig:
    return CameraConfig.model_validate({"id": camera_id, "url": f"rtsp://127.0.0.1:1/{camera_id}", **keys})


def test_a_written_camera_reads_back_the_same_with_its_password(tmp_path: Path) -> None:
    camera = cam(
        "belt",
        url="rtsp://op:p%40ss@127.0.0.1:8554/belt",
        stall_s=7.5,
        classes=["part"],
        mm_per_px=0.5,
        lines=[{**LINE, "gates": [{"id": "g", "distance_mm": 100.0}]}],
        enabled=False,
    )
    path = write(tmp_path, camera)
    assert path == tmp_path / "belt.toml" and (path.stat().st_mode & 0o777) == 0o600
    (read,), sources = with_dropins([], tmp_path)
    assert read == camera and read.url.get_secret_value() == "rtsp://op:p%40ss@127.0.0.1:8554/belt"
    assert sources == {"belt": f"drop-in {path}"} and source_of(tmp_path, "belt") == f"drop-in {path}"


def test_a_dropin_replaces_or_adds_and_a_removal_mark_takes_the_camera_out(tmp_path: Path) -> None:
    file_cameras = [cam("a"), cam("b"), cam("c")]
    write(tmp_path, cam("b", stall_s=9.0))
    write(tmp_path, cam("z"))
    write(tmp_path, cam("d"))
    remove(tmp_path, "c")
    remove(tmp_path, "d")
    cameras, sources = with_dropins(file_cameras, tmp_path)
    assert [c.id for c in cameras] == ["a", "b", "z"]  # the file's order, then the added ones by id
    assert cameras[1].stall_s == 9.0
    assert sources["a"] == FILE and sources["b"].startswith("drop-in ")
    assert not (tmp_path / "d.toml").exists()
    write(tmp_path, cam("c", stall_s=3.0))  # a PUT of a removed id brings it back
    cameras, _ = with_dropins(file_cameras, tmp_path)
    assert [c.id for c in cameras] == ["a", "b", "c", "z"] and cameras[2].stall_s == 3.0


def test_every_problem_of_every_file_is_named_with_its_path(tmp_path: Path) -> None:
    (tmp_path / "x.toml").write_text('id = "x"\nurl = "http://nope"\ncolour = 1\n')
    (tmp_path / "y.toml").write_text('id = "other"\nurl = "rtsp://127.0.0.1:1/y"\n')
    (tmp_path / "w.toml").write_text("not toml [")
    with pytest.raises(CamerasInvalidError) as caught:
        with_dropins([cam("a")], tmp_path)
    problems = caught.value.problems
    assert [p.split(": ")[0] for p in problems] == [
        str(tmp_path / "w.toml"),
        str(tmp_path / "x.toml"),
        str(tmp_path / "x.toml"),
        str(tmp_path / "y.toml"),
    ]
    assert [p.split(": ")[1] for p in problems[1:]] == ["url", "colour", "id"]
    with pytest.raises(CamerasInvalidError) as caught:
        parse({"id": "a", "url": "rtsp://127.0.0.1/a", "model": 123, "transport": "carrier pigeon"})
    assert [p.split(":")[0] for p in caught.value.problems] == ["model", "transport"]


def test_load_settings_applies_the_dropins_and_checks_them_against_the_config(tmp_path: Path) -> None:
    cameras_dir = tmp_path / "cameras"
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url="redis://127.0.0.1:1",
        cameras=[{"id": "a", "url": "rtsp://127.0.0.1:1/a"}, {"id": "b", "url": "rtsp://127.0.0.1:1/b"}],
        tracking={"lines_dir": str(tmp_path / "lines")},
        cameras_dir=cameras_dir,
    )
    remove(cameras_dir, "a")
    write(cameras_dir, cam("n", lines=[LINE]))
    settings = load_settings(config)
    assert [c.id for c in settings.cameras] == ["b", "n"]
    assert settings.camera_sources == {"b": FILE, "n": f"drop-in {cameras_dir / 'n.toml'}"}
    write(cameras_dir, cam("n", shard=3))
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert caught.value.errors == ["cameras.n: is pinned to shard 3; [instance] shards is 1"]


def test_check_config_says_where_each_camera_comes_from(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from daemon.__main__ import main  # noqa: PLC0415

    cameras_dir = tmp_path / "cameras"
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url="redis://127.0.0.1:1",
        cameras=[{"id": "a", "url": "rtsp://127.0.0.1:1/a"}, {"id": "b", "url": "rtsp://127.0.0.1:1/b"}],
        tracking={"lines_dir": str(tmp_path / "lines")},
        cameras_dir=cameras_dir,
    )
    write(cameras_dir, cam("b", url="rtsp://op:hunter2@127.0.0.1:1/b", enabled=False))
    assert main(["check-config", "-c", str(config)]) == 0
    captured = capsys.readouterr()
    assert "camera a: from the config file\n" in captured.err
    assert f"camera b: from drop-in {cameras_dir / 'b.toml'} (enabled = false)\n" in captured.err
    assert "hunter2" not in captured.out + captured.err


def test_any_string_a_camera_takes_reads_back_and_one_no_file_can_hold_is_refused(tmp_path: Path) -> None:
    """Found by the cameras API fuzzer: a class label beyond U+FFFF was written as JSON's surrogate pair
    escape, which TOML refuses, so an accepted camera left a drop-in that made the config invalid."""
    odd = ["\U001073a3ôÄ÷", 'q"uo\\te', "tab\there\nnl\x7f\x00", "\U0001d518nicode", ""]
    camera = cam("odd", url="rtsp://u:p\U0001f600ss@127.0.0.1:1/\u00e9", classes=odd)
    write(tmp_path, camera)
    (read,), _sources = with_dropins([], tmp_path)
    assert read == camera and read.url.get_secret_value() == camera.url.get_secret_value()
    with pytest.raises(CamerasInvalidError) as refused:
        parse({"id": "bad", "url": "rtsp://127.0.0.1:1/x", "classes": ["ok", "\ud800"]})
    assert [p.split(":")[0] for p in refused.value.problems] == ["classes.1"]
