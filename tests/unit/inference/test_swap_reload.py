"""A reload with `[models]` changed (`daemon.ops.reload`): a changed model path is swapped through the
model swap (`daemon.inference.swap`); one the swap refuses, and sizes added or removed, are named as
needing a restart. Real sessions on the repo's model files; no lane is started."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from daemon.config.models import ModelConfig
from daemon.config.settings import Settings, load_settings
from daemon.core.frames import StatusEvent
from daemon.core.metrics import Metrics
from daemon.inference.build import LaneWorkers, prove_models
from daemon.inference.engine import EngineFactory
from daemon.inference.lanes import Lanes
from daemon.inference.swap import ModelSwapper
from daemon.ops.lines import LinesControl
from daemon.ops.liveview import LiveView
from daemon.ops.models import ModelsControl
from daemon.ops.reload import Reloader, restart_needed
from daemon.tracking.stage import TrackingStage
from tools.kit.daemon_config import MODELS, write_config


def settings(tmp_path: Path) -> Settings:
    cameras = [{"id": "a", "url": "rtsp://127.0.0.1:1/a"}]
    return load_settings(write_config(tmp_path / "beltsight.toml", redis_url="redis://127.0.0.1:1", cameras=cameras))


def with_models(s: Settings, models: dict[int, Path]) -> Settings:
    return s.model_copy(update={"models": {size: ModelConfig(path=path) for size, path in models.items()}})


def test_a_changed_model_path_is_swapped_and_a_refused_one_named(tmp_path: Path) -> None:
    started = settings(tmp_path)
    fp16 = tmp_path / "conveyor-640-fp16.onnx"
    shutil.copyfile(MODELS[640].parent / fp16.name, fp16)
    wrong = tmp_path / "conveyor-416.onnx"
    shutil.copyfile(MODELS[416], wrong)
    new = with_models(started, {416: MODELS[416], 640: fp16, 800: wrong})
    assert restart_needed(started, new) == ["models.640", "models.800"]
    assert restart_needed(started, with_models(started, {640: MODELS[640]})) == ["models"]

    metrics = Metrics()
    factory = EngineFactory(started.engine, metrics)
    workers = LaneWorkers(started, factory, prove_models(started, factory), metrics, lambda e: None)
    lanes = Lanes(started.engine, metrics, build=workers, batching=None, publish=None, observe=None)  # type: ignore[arg-type]
    events: list[StatusEvent] = []
    tracking = TrackingStage(started.cameras, started.tracking, metrics)

    async def scenario() -> list[str]:
        lines = LinesControl(started.cameras, tmp_path / "lines", tracking, LiveView(metrics, 0.5), events.append)
        swapper = ModelSwapper(workers, lanes, on_event=events.append)
        models = ModelsControl(started, swapper, serving=workers.models.infos.get)
        reloader = Reloader(
            started, tracking=tracking, lines=lines, health=None, set_rules=lambda s: None, models=models
        )
        swapped = await reloader.swap_models(new)
        assert restart_needed(reloader._started, new) == ["models.800"]  # the refused one, still named
        assert await reloader.swap_models(new) == []  # 640 runs what the config says now; 800 refused again
        return swapped

    try:
        assert asyncio.run(scenario()) == ["models.640"]
    finally:
        workers.close()
    assert workers.models.infos[640].path == fp16 and workers.models.infos[800].path == MODELS[800]
    assert [e.kind for e in events] == ["model_swapped", "model_swap_failed", "model_swap_failed"]
    assert "input size 416, not 800" in events[1].detail
