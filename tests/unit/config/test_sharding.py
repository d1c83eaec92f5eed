"""Cameras shared out between instances: rendezvous hashing, pins, and the config around it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from daemon.config.settings import ConfigError, load_settings
from daemon.config.sharding import InstanceConfig, assignment, describe, owner, runs

CAMERAS = [f"line{n // 8}-cam{n % 8}" for n in range(600)]


def test_every_camera_runs_on_exactly_one_shard() -> None:
    for shards in (1, 2, 3, 5, 8):
        per_shard = assignment(CAMERAS, shards)
        assert sorted(c for members in per_shard for c in members) == sorted(CAMERAS)
        for camera in CAMERAS[:50]:
            running = [s for s in range(shards) if runs(camera, InstanceConfig(shard=s, shards=shards))]
            assert running == [owner(camera, shards)]


def test_the_rule_spreads_cameras_evenly() -> None:
    for shards in (2, 3, 4):
        sizes = [len(m) for m in assignment(CAMERAS, shards)]
        expected = len(CAMERAS) / shards
        assert all(abs(n - expected) < 0.25 * expected for n in sizes), sizes


def test_adding_an_instance_moves_only_the_cameras_the_new_one_wins() -> None:
    for shards in (1, 2, 3, 6):
        before = {c: owner(c, shards) for c in CAMERAS}
        after = {c: owner(c, shards + 1) for c in CAMERAS}
        moved = [c for c in CAMERAS if before[c] != after[c]]
        assert all(after[c] == shards for c in moved)  # nothing moves between the old shards
        assert abs(len(moved) - len(CAMERAS) / (shards + 1)) < 0.3 * len(CAMERAS) / (shards + 1)


def test_the_owner_is_the_same_in_every_process() -> None:
    """No per-process hash seed: another interpreter (another instance) computes the same owners."""
    code = "from daemon.config.sharding import owner; print([owner(f'cam{i}', 5) for i in range(40)])"
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
        cwd=Path(__file__).resolve().parents[3],
    )
    assert other.stdout.strip() == str([owner(f"cam{i}", 5) for i in range(40)])


def test_a_pinned_camera_runs_where_it_is_pinned() -> None:
    camera = next(c for c in CAMERAS if owner(c, 3) == 0)
    assert owner(camera, 3, pinned=2) == 2
    per_shard = assignment([camera, "other"], 3, {camera: 2})
    assert camera in per_shard[2] and camera not in per_shard[0]
    with pytest.raises(ValueError, match="pinned to shard 3"):
        owner(camera, 3, pinned=3)


def test_instance_numbers_must_be_below_shards() -> None:
    InstanceConfig(shard=2, shards=3)
    with pytest.raises(ValidationError, match="not below shards"):
        InstanceConfig(shard=3, shards=3)
    with pytest.raises(ValidationError):
        InstanceConfig(shards=0)


def _config(tmp_path: Path, instance: str, pin: int | None = None) -> Path:
    models = Path(__file__).resolve().parents[3] / "models" / "conveyor-416.onnx"
    text = f'[redis]\nurl = "redis://127.0.0.1:6379/0"\n\n[models]\n416 = "{models}"\n\n{instance}\n'
    for i, camera in enumerate(CAMERAS[:12]):
        text += f'[[cameras]]\nid = "{camera}"\nurl = "rtsp://10.0.0.{i + 1}/s"\n'
        if i == 0 and pin is not None:
            text += f"shard = {pin}\n"
        if i == 11:
            text += "enabled = false\n"
    path = tmp_path / "beltsight.toml"
    path.write_text(text)
    return path


def test_settings_give_each_instance_its_share_of_the_enabled_cameras(tmp_path: Path) -> None:
    shares = []
    for shard in range(3):
        settings = load_settings(_config(tmp_path, f"[instance]\nshard = {shard}\nshards = 3", pin=1))
        shares.append([c.id for c in settings.instance_cameras()])
    assert sorted(c for share in shares for c in share) == sorted(CAMERAS[:11])  # the disabled one runs nowhere
    assert CAMERAS[0] in shares[1]
    settings = load_settings(_config(tmp_path, ""))
    assert [c.id for c in settings.instance_cameras()] == CAMERAS[:11]  # no [instance]: every camera


def test_a_pin_beyond_shards_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(_config(tmp_path, "[instance]\nshards = 2", pin=2))
    assert any("pinned to shard 2" in e for e in err.value.errors)


def test_describe_marks_this_instance() -> None:
    inst = InstanceConfig(shard=1, shards=2)
    lines = describe(CAMERAS[:6], inst, {})
    mine = assignment(CAMERAS[:6], 2)[1]
    assert lines[0].endswith(", ".join(mine))
    assert lines[2].startswith("  shard 1:") and lines[2].endswith("<- this instance")


def test_check_config_prints_the_cameras_this_instance_would_run(tmp_path: Path) -> None:
    path = _config(tmp_path, "[instance]\nshards = 3")
    for shard in range(3):
        proc = subprocess.run(
            [sys.executable, "-m", "daemon", "check-config", "-c", str(path)],
            capture_output=True,
            text=True,
            check=False,
            env={"BELTSIGHT_INSTANCE__SHARD": str(shard), "PATH": ""},
            cwd=Path(__file__).resolve().parents[3],
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        line = next(x for x in proc.stderr.splitlines() if x.startswith("instance:"))
        expected = assignment(CAMERAS[:11], 3)[shard]
        assert line.endswith(": " + ", ".join(expected)), line
        assert f"runs {len(expected)} of 11 cameras" in line
