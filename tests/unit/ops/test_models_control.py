"""`ModelsControl` over a swapper that implements `ModelSwap` and records what it was asked (the real swap
needs lanes and sessions; tests/integration/ops/test_model_dropin.py runs it whole): a swap persists the
drop-in, one that cannot be written is undone and refused, a precondition is checked under the lock, a
reload compares against what serves (an API swap included), a deleted drop-in brings the file's model
back, and stale entries are removed at start."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from daemon.config.models import ModelConfig
from daemon.config.models_dropin import SwapEntry, read, write
from daemon.config.settings import Settings, load_settings
from daemon.inference.swap import SwapError
from daemon.ops.models import ModelsControl, StaleError
from tests.support.daemon_harness import MODELS, write_config
from tests.support.model_swap import RecordingSwap

FP16 = MODELS[640].parent / "conveyor-640-fp16.onnx"


def settings(tmp_path: Path, dropin: Path | None = None) -> Settings:
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url="redis://127.0.0.1:1",
        cameras=[],
        models_dropin=str(dropin or tmp_path / "models.toml"),
    )
    return load_settings(config)


def test_a_swap_is_persisted_and_one_that_cannot_be_written_is_undone(tmp_path: Path) -> None:
    swapper = RecordingSwap()
    control = ModelsControl(settings(tmp_path), swapper, serving=lambda size: None)

    async def scenario() -> None:
        done, state = await control.swap(640, FP16)
        assert (done.path, state["path"], state["source"], state["sha256"]) == (
            str(FP16),
            str(FP16),
            "drop-in",
            "ab" * 32,
        )
        assert read(tmp_path / "models.toml") == {
            640: SwapEntry(model=ModelConfig(path=FP16), replaces=ModelConfig(path=MODELS[640]))
        }
        assert (await control.state(640))["source"] == "drop-in"
        await control.swap(640, MODELS[640])  # back to the file's model: the entry goes
        assert read(tmp_path / "models.toml") == {} and (await control.state(640))["source"] == "config"

        # a precondition that does not hold: nothing asked of the swapper
        asked = len(swapper.calls)
        with pytest.raises(StaleError) as stale:
            await control.swap(640, FP16, precondition=lambda state: False)
        assert stale.value.current["path"] == str(MODELS[640]) and len(swapper.calls) == asked

    asyncio.run(scenario())

    (tmp_path / ".models.toml.tmp").mkdir()  # a folder where the temporary file goes: the write fails
    swapper = RecordingSwap()
    control = ModelsControl(settings(tmp_path), swapper, serving=lambda size: None)

    async def cannot_write() -> None:
        with pytest.raises(SwapError) as refused:
            await control.swap(640, FP16)
        assert refused.value.status == 500 and "the swap was undone" in refused.value.reason
        assert [(p, by.split(" ")[0]) for _s, p, _allow, by in swapper.calls] == [(FP16, "api"), (MODELS[640], "api")]
        assert control.running()[640] == ModelConfig(path=MODELS[640])

    asyncio.run(cannot_write())


def test_a_reload_compares_against_what_serves(tmp_path: Path) -> None:
    swapper = RecordingSwap()
    started = settings(tmp_path)
    control = ModelsControl(started, swapper, serving=lambda size: None)

    async def scenario() -> None:
        await control.swap(640, FP16)
        assert await control.reload(load_settings(tmp_path / "beltsight.toml")) == []  # the drop-in holds
        (tmp_path / "models.toml").unlink()  # the operator deletes the drop-in and reloads: the file's model
        assert await control.reload(load_settings(tmp_path / "beltsight.toml")) == ["models.640"]
        assert control.running()[640] == ModelConfig(path=MODELS[640])
        assert [p for _s, p, _allow, _by in swapper.calls] == [FP16, MODELS[640]]

    asyncio.run(scenario())


def test_stale_entries_are_removed_at_start(tmp_path: Path) -> None:
    dropin = tmp_path / "models.toml"
    held = SwapEntry(model=ModelConfig(path=FP16), replaces=ModelConfig(path=MODELS[640]))
    stale = SwapEntry(model=ModelConfig(path=MODELS[416]), replaces=ModelConfig(path=tmp_path / "old-416.onnx"))
    write(dropin, {640: held, 416: stale})
    control = ModelsControl(settings(tmp_path), RecordingSwap(), serving=lambda size: None)
    assert control.running()[640].path == FP16
    control.prune()
    assert read(dropin) == {640: held}
