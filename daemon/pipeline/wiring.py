"""Every stage built and wired into one `Pipeline`: `build(settings)`, none of it started.

`build` proves the models (in a thread), then `_wire` builds the stages in the order they depend
on each other: the hub, the sink, the tracking stage, the live view and the evidence writers, the
lane workers and the lanes (`daemon.pipeline.results`), the thermal monitor, the camera readers,
the health endpoint and the live controls (`daemon.pipeline.endpoint`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from daemon.batching.hub import FrameHub
from daemon.config.settings import Settings
from daemon.core.frames import StatusEvent
from daemon.core.metrics import Metrics
from daemon.core.xp import DeviceChoice
from daemon.inference.build import LaneWorkers, ProvedModels, prove_models
from daemon.inference.engine import EngineFactory
from daemon.inference.lanes import Lanes
from daemon.inference.protocols import EngineBuilder
from daemon.ingest.decoders import DecoderPool
from daemon.ingest.sources import CameraSource
from daemon.ops.camera_wiring import Readers, camera_sources, decoders, wire_cameras
from daemon.ops.cameras import CameraParts, CamerasControl
from daemon.ops.http import HealthServer, health_report
from daemon.ops.lines import LinesControl
from daemon.ops.liveview import LiveView
from daemon.ops.models import ModelsControl
from daemon.ops.reload import Reloader
from daemon.ops.review import wiring as review_wiring
from daemon.ops.review.consumer import Recorder
from daemon.ops.systemd import SystemdNotifier
from daemon.pipeline import endpoint, results
from daemon.publish.evidence import Evidence, evidence_writers
from daemon.publish.sink import RedisSink
from daemon.thermal.monitor import ThermalMonitor
from daemon.tracking.stage import TrackingStage


@dataclass(slots=True)
class Phase:
    """Where the daemon's lifecycle stands (`starting`, `running`, `stopping`): set by the daemon,
    reported by /healthz."""

    name: str = "starting"


@dataclass(frozen=True, slots=True)
class Pipeline:
    """The wired stages of one daemon, none of them started."""

    settings: Settings
    metrics: Metrics
    notifier: SystemdNotifier
    phase: Phase
    models: ProvedModels
    workers: LaneWorkers
    hub: FrameHub
    lanes: Lanes
    tracking: TrackingStage
    lines: LinesControl
    """The lines that run per camera (the lines API's and a reload's)."""
    liveview: LiveView
    sink: RedisSink
    """The sink, not open: `open()` recovers its spools at start-up."""
    thermal: ThermalMonitor
    sources: list[CameraSource]
    """The running readers (changed in place as cameras are added and removed: `cameras`)."""
    decoders: DecoderPool | None
    """The decoder processes (`[engine] processes` above 1); None: every camera in a thread."""
    cameras: CamerasControl
    """The camera set, changed live (the cameras API's and a reload's)."""
    serving: ModelsControl
    """The model each size serves (the models API's and a reload's); `prune` at start-up removes
    the models drop-in's stale entries."""
    health: HealthServer | None
    evidence: Evidence
    """The crossing snapshots' writer (`[snapshots] enabled`), the frame capture (`[[capture.strategies]]`
    listed) and the crossing clips (`[clips] enabled`: the recorder and its writer); each None when off."""
    review: Recorder | None
    """The per-part record (`[review] enabled`); None when off."""
    report: Callable[[], dict[str, Any]]
    """The /healthz JSON."""
    reloader: Reloader
    """Applies a re-read config (SIGHUP) to the stages above."""


async def build(
    settings: Settings,
    *,
    metrics: Metrics | None = None,
    notifier: SystemdNotifier | None = None,
    engine_factory: EngineBuilder | None = None,
    device: DeviceChoice | None = None,
) -> Pipeline:
    """Prove the models, then build and wire every stage (call on the loop that will run them).

    `engine_factory` replaces the ONNX Runtime factory (fault-injection tests and tools); `device`
    replaces `placement.choose`'s pick (tests run the device path with NumPy as `xp`)."""
    loop = asyncio.get_running_loop()
    metrics = metrics or Metrics()
    factory = engine_factory or EngineFactory(settings.engine, metrics)
    models = await loop.run_in_executor(None, prove_models, settings, factory, device)
    try:
        return _wire(
            settings, loop, metrics=metrics, notifier=notifier or SystemdNotifier(), factory=factory, models=models
        )
    except BaseException:
        for engine in models.prebuilt.values():
            engine.close()
        raise


def _wire(
    settings: Settings,
    loop: asyncio.AbstractEventLoop,
    *,
    metrics: Metrics,
    notifier: SystemdNotifier,
    factory: EngineBuilder,
    models: ProvedModels,
) -> Pipeline:
    hub = FrameHub(metrics)
    sink = RedisSink(settings.redis, metrics)
    tracking = TrackingStage(settings.instance_cameras(), settings.tracking, metrics)
    liveview = endpoint.liveview(settings, metrics, tracking)
    evidence = evidence_writers(settings, metrics, [info.names for info in models.infos.values()])
    on_status = _status_to(sink, loop)
    workers = LaneWorkers(settings, factory, models, metrics, on_status)
    lanes = results.lanes(
        settings, metrics, hub, workers, tracking=tracking, liveview=liveview, sink=sink, evidence=evidence
    )
    thermal = _thermal(settings, metrics, lanes, sink, notifier)
    readers = Readers(decoders(settings, models, metrics), evidence.clips)
    router, make_source, sources = camera_sources(
        settings, models, hub=hub, metrics=metrics, on_status=on_status, readers=readers
    )
    report = _report(phase := Phase(), sources, sink, lanes, thermal)
    health = endpoint.health(settings, metrics, report, liveview, evidence.snapshots, clips=evidence.clips)
    lines = endpoint.lines(settings, tracking, liveview, sink, health)
    parts = CameraParts(
        sources, make_source, hub, router, tracking, lines, liveview, lanes, workers.set_rules, models=models.infos,
        metrics=metrics, on_event=sink.accept_event, resume=sink.resume_points, forget=readers.forgetters(),
        capture_threshold=None if evidence.capture is None else evidence.capture.sampler.set_threshold,
    )  # fmt: skip
    cameras = wire_cameras(settings, parts, health)
    serving = endpoint.models(settings, workers, lanes, sink, health)
    return Pipeline(
        settings=settings,
        metrics=metrics,
        notifier=notifier,
        phase=phase,
        models=models,
        workers=workers,
        hub=hub,
        lanes=lanes,
        tracking=tracking,
        lines=lines,
        liveview=liveview,
        sink=sink,
        thermal=thermal,
        sources=sources,
        decoders=readers.decoders,
        cameras=cameras,
        serving=serving,
        health=health,
        evidence=evidence,
        review=review_wiring.recorder(settings, lines, health),
        report=report,
        reloader=endpoint.reloader(
            settings, workers, server=health, tracking=tracking, lines=lines, models=serving, cameras=cameras
        ),
    )


def _thermal(
    settings: Settings, metrics: Metrics, lanes: Lanes, sink: RedisSink, notifier: SystemdNotifier
) -> ThermalMonitor:
    return ThermalMonitor(
        settings.thermal,
        settings.engine,
        metrics,
        apply=lanes.set_share,
        on_event=sink.accept_event,
        on_status=notifier.status,
    )


def _status_to(sink: RedisSink, loop: asyncio.AbstractEventLoop) -> Callable[[StatusEvent], None]:
    """The status callback of camera and engine threads: hand each event to the loop (sink + log)."""

    def on_status(event: StatusEvent) -> None:
        if not loop.is_closed():
            loop.call_soon_threadsafe(sink.accept_event, event)

    return on_status


def _report(
    phase: Phase, sources: list[CameraSource], sink: RedisSink, lanes: Lanes, thermal: ThermalMonitor
) -> Callable[[], dict[str, Any]]:
    def report() -> dict[str, Any]:
        """The /healthz JSON."""
        return health_report(
            phase.name,
            sources=sources,
            sink=sink,
            models=lanes.health(),
            thermal=thermal.health(),
            paused=thermal.throttle.level == "paused",
        )

    return report


__all__ = ["Phase", "Pipeline", "build"]
