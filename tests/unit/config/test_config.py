"""Settings: TOML + environment, unknown keys rejected, every error listed with its key path."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from daemon.__main__ import main
from daemon.config.settings import EX_CONFIG, ConfigError, load_settings

REPO = Path(__file__).resolve().parents[3]

GOOD = """
[redis]
url = "redis://:hunter2-redis@127.0.0.1:6379/0"

[models]
640 = "m640.onnx"

[engine]
providers = ["cpu"]
max_batch = 4

[[cameras]]
id = "line1-infeed"
url = "rtsp://viewer:cam-secret-77@10.0.0.21:554/stream1"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "beltsight.toml"
    path.write_text(text)
    return path


def test_good_config_loads_and_model_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, GOOD))
    assert settings.models[640].path == tmp_path / "m640.onnx"
    assert settings.engine.max_batch == 4
    assert settings.cameras[0].id == "line1-infeed"
    assert settings.redis.stream_for("line1-infeed") == "beltsight:detections:line1-infeed"


def test_loads_of_different_files_at_once_each_read_their_own(tmp_path: Path) -> None:
    paths = []
    for batch in (2, 3, 5, 7):
        (tmp_path / str(batch)).mkdir()
        paths.append(write(tmp_path / str(batch), GOOD.replace("max_batch = 4", f"max_batch = {batch}")))
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda p: (p, load_settings(p).engine.max_batch), paths * 10))
    assert all(batch == int(p.parent.name) for p, batch in got)


def test_environment_overrides_nested_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BELTSIGHT_ENGINE__MAX_BATCH", "2")
    monkeypatch.setenv("BELTSIGHT_REDIS__URL", "redis://10.9.9.9:6379/1")
    settings = load_settings(write(tmp_path, GOOD))
    assert settings.engine.max_batch == 2
    assert settings.redis.url.get_secret_value() == "redis://10.9.9.9:6379/1"


def test_every_error_is_listed_with_its_key_path(tmp_path: Path) -> None:
    bad = GOOD.replace("max_batch = 4", "max_batch = 0\nmax_bach = 3") + (
        '\n[[cameras]]\nid = "line1-infeed"\nurl = "http://x/y"\nmodel = 500\n'
    )
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, bad))
    errors = "\n".join(info.value.errors)
    assert "engine.max_batch:" in errors
    assert "engine.max_bach: unknown key" in errors
    assert "cameras.1.url:" in errors
    assert "cameras.1.model:" in errors


def test_duplicate_camera_and_missing_model_are_rejected(tmp_path: Path) -> None:
    bad = GOOD + '\n[[cameras]]\nid = "line1-infeed"\nurl = "rtsp://10.0.0.3/s"\nmodel = 800\n'
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, bad))
    assert any("used twice" in e for e in info.value.errors)


def test_toml_syntax_error_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        load_settings(write(tmp_path, "[redis\nurl = 1"))


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "nope.toml")


def test_password_file_is_read_at_use(tmp_path: Path) -> None:
    secret = tmp_path / "redis-password"
    secret.write_text("s3cr3t/with@chars\n")
    text = GOOD.replace('url = "redis://:hunter2-redis@127.0.0.1:6379/0"', 'url = "redis://app@127.0.0.1:6379/0"')
    text = text.replace("[redis]", f'[redis]\npassword_file = "{secret}"')
    settings = load_settings(write(tmp_path, text))
    assert settings.redis.effective_url() == "redis://app:s3cr3t%2Fwith%40chars@127.0.0.1:6379/0"


def test_check_config_redacts_secrets_and_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-config", "-c", str(write(tmp_path, GOOD))]) == 0
    out, err = capsys.readouterr()
    assert "hunter2-redis" not in out + err
    assert "cam-secret-77" not in out + err
    data = json.loads(out)
    assert data["cameras"][0]["url"] == "rtsp://viewer:***@10.0.0.21:554/stream1"


def test_check_config_exits_78_with_key_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, GOOD.replace("max_batch = 4", "max_batch = -1\nbogus = true"))
    assert main(["check-config", "-c", str(path)]) == EX_CONFIG
    _out, err = capsys.readouterr()
    assert "engine.max_batch" in err
    assert "engine.bogus: unknown key" in err
    assert "hunter2-redis" not in err


@pytest.mark.parametrize("name", ["beltsight.toml", "demo.toml"])
def test_shipped_configs_are_valid(name: str) -> None:
    assert main(["check-config", "-c", str(REPO / "configs" / name)]) == 0
