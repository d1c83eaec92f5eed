"""The models drop-in (`[engine] models_dropin`, `daemon.config.models_dropin`): an entry overrides the
file's `[models.<size>]` at load while that is the entry it replaced; once the file changed that size
(to any other entry, an earlier one included) the file wins and the entry is stale; the file round-trips;
a broken drop-in makes the configuration invalid with its path; check-config says where each model
comes from."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config.models import ModelConfig
from daemon.config.models_dropin import SwapEntry, read, resolve, write
from daemon.config.settings import ConfigError, load_settings
from tests.support.daemon_harness import MODELS, run_cli, write_config


def entry(model: Path, replaces: Path) -> SwapEntry:
    return SwapEntry(model=ModelConfig(path=model), replaces=ModelConfig(path=replaces))


def test_an_entry_holds_while_the_file_is_what_it_replaced() -> None:
    a, b, c = Path("/m/a.onnx"), Path("/m/b.onnx"), Path("/m/c.onnx")
    file = {640: ModelConfig(path=a), 416: ModelConfig(path=c)}
    held = resolve(file, {640: entry(b, a)})
    assert held.models == {640: ModelConfig(path=b), 416: ModelConfig(path=c)}
    assert (held.source(640), held.source(416), held.stale) == ("drop-in", "config", {})

    # the file changed 640 since the swap (to c, or to the swapped model itself): the file wins
    for now in (c, b):
        changed = resolve({640: ModelConfig(path=now)}, {640: entry(b, a)})
        assert changed.models == {640: ModelConfig(path=now)} and changed.source(640) == "config"
        assert list(changed.stale) == [640] and changed.entries == {}
    # the same path with another layout is another entry: the file changed
    relabelled = resolve({640: ModelConfig(path=a, labels=["x", "y", "z", "w"])}, {640: entry(b, a)})
    assert list(relabelled.stale) == [640]
    # a size the file no longer has
    assert list(resolve({416: ModelConfig(path=c)}, {640: entry(b, a)}).stale) == [640]


def test_the_file_round_trips_and_a_broken_one_invalidates_the_config(tmp_path: Path) -> None:
    path = tmp_path / "state" / "models.toml"
    entries = {
        640: SwapEntry(
            model=ModelConfig(path=Path("/m/b.onnx"), layout="yolov8", labels=["bolt", "nut"], scale=1 / 255),
            replaces=ModelConfig(path=Path("/m/a.onnx")),
        ),
        416: entry(Path("/m/d.onnx"), Path("/m/c.onnx")),
    }
    write(path, entries)
    assert read(path) == entries
    assert sorted(p.name for p in path.parent.iterdir()) == ["models.toml"]  # no temporary file left
    assert read(tmp_path / "missing.toml") == {}

    config = write_config(
        tmp_path / "beltsight.toml", redis_url="redis://127.0.0.1:1", cameras=[], models_dropin=str(path)
    )
    for text, where in [
        ("[640.model]\npath = 3\n", "640.model.path"),
        ("[640.model]\npath = '/m/b.onnx'\n", "640.replaces"),
        ("[big]\n", "big: not a model size"),
        ("[640\n", "cannot parse"),
    ]:
        path.write_text(text)
        with pytest.raises(ConfigError) as err:
            load_settings(config)
        assert any(p.startswith(f"{path}: ") and where in p for p in err.value.errors), err.value.errors


def test_load_settings_and_check_config_show_where_each_model_comes_from(tmp_path: Path) -> None:
    dropin = tmp_path / "models.toml"
    config = write_config(tmp_path / "beltsight.toml", redis_url="redis://127.0.0.1:1", cameras=[])
    fp16 = MODELS[640].parent / "conveyor-640-fp16.onnx"
    write(dropin, {640: entry(fp16, MODELS[640]), 416: entry(MODELS[416], Path("/elsewhere/old-416.onnx"))})
    settings = load_settings(config)
    assert settings.engine.models_dropin == dropin
    assert settings.models[640].path == fp16 and settings.models[416].path == MODELS[416]
    resolved = settings.models_resolved
    assert (resolved.source(640), resolved.source(416), list(resolved.stale)) == ("drop-in", "config", [416])

    done = run_cli("check-config", "-c", str(config))
    assert done.returncode == 0, done.stderr
    assert f"model 640: from drop-in {dropin}" in done.stderr and f"replaces {MODELS[640]}" in done.stderr
    assert "model 416: from the config file" in done.stderr
    assert f"drop-in {dropin} swapped it to {MODELS[416]}, but the config file's [models.416] changed" in done.stderr
    assert f'"models_dropin": "{dropin}"' in done.stdout
