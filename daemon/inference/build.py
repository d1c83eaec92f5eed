"""Proving the models and building lane workers: the inference room's part of the daemon's build.

`prove_models` runs once, before READY (blocking: call it in a thread): every configured model
file is read and checked, the sessions that camera overrides ask for are built (and warmed up),
and the configured provider is proved on a real session: with no override, the smallest model's
session is built once for that and closed again, so sizes no camera uses stay unloaded. Where
pre- and post-processing run (`placement.choose`) follows from that first session's providers.
It raises what stops startup: `ModelError`, `ProviderError`, `ConfigError` (a class filter
naming an unknown label), `GpuUnavailableError` (`[engine] device = "cuda"` cannot be served).

`LaneWorkers` is what `lanes.Lanes` calls to build one worker's engine and stage, in the worker's
own thread: worker 0 of a size proved at startup takes that session, every other worker (and
every size chosen by resolution) builds a new one on first use. A model swap
(`daemon.inference.swap`) builds its workers through `LaneWorkers.worker`.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from daemon.config.settings import Settings
from daemon.core.frames import StatusEvent
from daemon.core.metrics import Metrics
from daemon.core.xp import DeviceChoice
from daemon.inference.model_check import camera_rules, validate_models
from daemon.inference.model_file import ModelInfo
from daemon.inference.placement import choose, device_path
from daemon.inference.protocols import EngineBuilder, InferenceEngine
from daemon.inference.serving import ServingEngine
from daemon.inference.stage import InferenceStage, PostprocessConfig


@dataclass(frozen=True, slots=True)
class ProvedModels:
    """The checked model files by size, the sessions built at startup, and where the arrays live."""

    infos: dict[int, ModelInfo]
    prebuilt: dict[int, InferenceEngine]
    device: DeviceChoice


def prove_models(settings: Settings, factory: EngineBuilder, device: DeviceChoice | None = None) -> ProvedModels:
    """Check every model file and prove the configured provider (see the module docstring);
    `device` replaces `placement.choose`'s pick (the tests' device-path seam). Blocking."""
    infos = validate_models(settings)
    overrides = sorted({c.model for c in settings.instance_cameras() if c.model is not None})
    prebuilt: dict[int, InferenceEngine] = {}
    try:
        for size in overrides:
            prebuilt[size] = factory.build(infos[size], reason="startup")
        if prebuilt:
            providers = next(iter(prebuilt.values())).providers
        else:
            probe = factory.build(infos[min(infos)], reason="provider_check")
            providers = probe.providers
            probe.close()
        return ProvedModels(infos, prebuilt, device or choose(settings.engine, providers))
    except BaseException:
        for engine in prebuilt.values():
            engine.close()
        raise


@dataclass
class LaneWorkers:
    """Builds lane workers (`lanes.WorkerBuilder`): a `ServingEngine` and its `InferenceStage`."""

    settings: Settings
    factory: EngineBuilder
    models: ProvedModels
    metrics: Metrics
    on_status: Callable[[StatusEvent], None]
    _unused: dict[int, InferenceEngine] = field(init=False)
    _stages: weakref.WeakSet[InferenceStage] = field(init=False)
    _rules_from: Settings = field(init=False)

    def __post_init__(self) -> None:
        self._unused = dict(self.models.prebuilt)
        self._stages = weakref.WeakSet()
        self._rules_from = self.settings

    def set_rules(self, settings: Settings) -> None:
        """Each camera's confidence threshold, classes and tracking floor from `settings` (a reload),
        for every stage built and every one built later."""
        self._rules_from = settings
        for stage in list(self._stages):
            stage.set_rules(camera_rules(settings, stage.info))

    @property
    def prebuilt_sizes(self) -> list[int]:
        """The sizes whose sessions were built at startup: their lanes start with the daemon."""
        return sorted(self.models.prebuilt)

    def __call__(self, size: int, index: int) -> tuple[ServingEngine, InferenceStage]:
        """One worker's engine and stage (in the worker's thread): the session prebuilt at startup
        for worker 0 where there is one, else a new one."""
        info = self.models.infos[size]
        primary = self._unused.pop(size, None) if index == 0 else None
        if primary is None:
            primary = self.factory.build(info, reason="first_use")
        return self.worker(info, primary)

    def worker(self, info: ModelInfo, primary: InferenceEngine) -> tuple[ServingEngine, InferenceStage]:
        """A worker's engine and stage serving `info` on the session `primary` (a swap's, or `__call__`'s)."""
        ecfg = self.settings.engine
        engine = ServingEngine(self.factory, info, ecfg, primary, metrics=self.metrics, on_status=self.on_status)
        stage = InferenceStage(
            info,
            engine,
            max_batch=engine.max_batch,
            post=PostprocessConfig(ecfg.conf_threshold, ecfg.iou_threshold, ecfg.max_det),
            rules=camera_rules(self._rules_from, info),
            metrics=self.metrics,
            device=device_path(self.models.device, info, engine.max_batch),  # None on the CPU path
            pixels=ecfg.pixels_in_graph,
        )
        self._stages.add(stage)
        return engine, stage

    def serve(self, info: ModelInfo, primary: InferenceEngine) -> None:
        """A swapped model for a size whose lane has not started: worker 0 takes `primary` when it
        does (a startup session of the old model no lane took is closed)."""
        old = self._unused.pop(info.size, None)
        self._unused[info.size] = primary
        self.models.infos[info.size] = info
        if old is not None:
            old.close()

    def close(self) -> None:
        """Close the startup sessions no lane took."""
        while self._unused:
            self._unused.popitem()[1].close()
