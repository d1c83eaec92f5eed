"""The builder: every stage of the daemon built from settings and wired, returned as one value.

`build(settings)` proves the models (`daemon.inference.build.prove_models`, in a thread: model
files checked, the configured provider proved on a real session) and wires the rest: camera
sources -> `FrameHub` -> each lane's `Batcher` -> lane workers (`daemon.inference.lanes`,
built by `daemon.inference.build.LaneWorkers`) -> `_publish`, the one seam where results leave
the lanes -> the `TrackingStage` (track ids, object events) -> the sink (and the live view, the snapshot
writer and the frame capture); `LinesControl` and its API (`daemon.ops.http.api_lines`) change a camera's
lines between frames; `ModelSwapper` and its API (`daemon.ops.http.api_models`) swap a model between batches.
Nothing is started here: no thread, task or socket; `daemon.app.Daemon` starts, drains and
stops what this returns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from daemon.batching.batcher import Batcher, BatchPolicy, InOrder
from daemon.batching.hub import FrameHub
from daemon.config.settings import Settings
from daemon.core.frames import Frame, FrameResult, StatusEvent
from daemon.core.metrics import Metrics
from daemon.core.netaddr import parse_host_port
from daemon.core.xp import DeviceChoice
from daemon.inference.build import LaneWorkers, ProvedModels, prove_models
from daemon.inference.engine import EngineFactory
from daemon.inference.lanes import Batching, Lanes, Observe, Publish
from daemon.inference.protocols import EngineBuilder
from daemon.inference.providers import lane_workers, worker_batch
from daemon.inference.swap import ModelSwapper
from daemon.ingest.decoders import DecoderPool
from daemon.ingest.sources import CameraSource
from daemon.ops.camera_wiring import Readers, camera_sources, decoders, wire_cameras
from daemon.ops.cameras import CameraParts, CamerasControl
from daemon.ops.http import HealthServer, HttpLimits, health_report
from daemon.ops.http import clips as clip_route
from daemon.ops.http import snapshots as snapshot_route
from daemon.ops.http.api_lines import LinesApi
from daemon.ops.http.api_models import ModelsApi
from daemon.ops.lines import LinesControl
from daemon.ops.liveview import LiveView
from daemon.ops.models import ModelsControl
from daemon.ops.reload import Reloader
from daemon.ops.review import wiring as review_wiring
from daemon.ops.review.consumer import Recorder
from daemon.ops.systemd import SystemdNotifier
from daemon.publish.capture import FrameCapture
from daemon.publish.clips import ClipRecorder
from daemon.publish.evidence import Evidence, evidence_writers
from daemon.publish.sink import RedisSink
from daemon.publish.snapshots import SnapshotWriter
from daemon.thermal.monitor import ThermalMonitor
from daemon.tracking.stage import TrackingStage

log = structlog.get_logger("beltsight.pipeline")


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
    thermal: ThermalMonitor
    sources: list[CameraSource]
    """The running readers (changed in place as cameras are added and removed: `cameras`)."""
    decoders: DecoderPool | None
    """The decoder processes (`[engine] processes` above 1); None: every camera in a thread."""
    cameras: CamerasControl
    """The camera set, changed live (the cameras API's and a reload's)."""
    health: HealthServer | None
    snapshots: SnapshotWriter | None
    """The crossing snapshots' writer (`[snapshots] enabled`); None when off."""
    capture: FrameCapture | None
    """The frame capture (`[[capture.strategies]]` listed); None when off."""
    clips: ClipRecorder | None
    """The crossing clips (`[clips] enabled`): the recorder and its writer; None when off."""
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
    liveview = _liveview(settings, metrics, tracking)
    evidence = evidence_writers(settings, metrics, [info.names for info in models.infos.values()])
    on_status = _status_to(sink, loop)
    workers = LaneWorkers(settings, factory, models, metrics, on_status)
    lanes = _lanes(settings, metrics, hub, workers, tracking=tracking, liveview=liveview, sink=sink, evidence=evidence)
    thermal = _thermal(settings, metrics, lanes, sink, notifier)
    _lanes_on_demand(hub, lanes, loop)
    readers = Readers(decoders(settings, models, metrics), evidence.clips)
    router, make_source, sources = camera_sources(
        settings, models, hub=hub, metrics=metrics, on_status=on_status, readers=readers
    )
    report = _report(phase := Phase(), sources, sink, lanes, thermal)
    health = _health(settings, metrics, report, liveview, evidence.snapshots, clips=evidence.clips)
    lines = _lines(settings, tracking, liveview, sink, health)
    parts = CameraParts(
        sources, make_source, hub, router, tracking, lines, liveview, lanes, workers.set_rules,
        models=models.infos,
        metrics=metrics, on_event=sink.accept_event, resume=sink.resume_points,
        capture_threshold=None if evidence.capture is None else evidence.capture.sampler.set_threshold,
        forget=readers.forgetters(),
    )  # fmt: skip
    cameras = wire_cameras(settings, parts, health)
    reloader = _reloader(settings, workers, lanes, sink, health=health, tracking=tracking, lines=lines, cameras=cameras)
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
        health=health,
        snapshots=evidence.snapshots,
        capture=evidence.capture,
        clips=evidence.clips,
        review=review_wiring.recorder(settings, lines, health),
        report=report,
        reloader=reloader,
    )


def _lanes(
    settings: Settings,
    metrics: Metrics,
    hub: FrameHub,
    workers: LaneWorkers,
    *,
    tracking: TrackingStage,
    liveview: LiveView,
    sink: RedisSink,
    evidence: Evidence,
) -> Lanes:
    """Every model size's lane: batches from the hub, results tracked, with their evidence, to the sink."""
    return Lanes(
        settings.engine,
        metrics,
        build=workers,
        batching=_batching(settings, hub, metrics),
        publish=_publish(tracking, liveview, sink, evidence),
        observe=_observe(liveview, evidence.snapshots, evidence.capture),
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


def _lines(
    settings: Settings, tracking: TrackingStage, liveview: LiveView, sink: RedisSink, health: HealthServer | None
) -> LinesControl:
    """The running lines of each camera and, on the endpoint, the lines API (`daemon.ops.http.api_lines`)."""
    lines = LinesControl(
        settings.instance_cameras(), settings.tracking.lines_dir, tracking, liveview, on_event=sink.accept_event
    )
    if health is not None:
        LinesApi(health, lines).register()
    return lines


def _reloader(
    settings: Settings,
    workers: LaneWorkers,
    lanes: Lanes,
    sink: RedisSink,
    *,
    health: HealthServer | None,
    tracking: TrackingStage,
    lines: LinesControl,
    cameras: CamerasControl,
) -> Reloader:
    """The reloader, with model swaps (`daemon.inference.swap`, kept in the models drop-in by
    `daemon.ops.models`) and, on the endpoint, their API (`daemon.ops.http.api_models`)."""
    swapper = ModelSwapper(workers, lanes, on_event=sink.accept_event)
    models = ModelsControl(settings, swapper, serving=workers.models.infos.get)
    models.prune()
    if health is not None:
        ModelsApi(health, models).register()
    return Reloader(
        settings,
        tracking=tracking,
        lines=lines,
        health=health,
        set_rules=workers.set_rules,
        models=models,
        cameras=cameras,
    )


def _liveview(settings: Settings, metrics: Metrics, tracking: TrackingStage) -> LiveView:
    """The live view, drawing each camera's lines with the tracker's running counts."""
    liveview = LiveView(metrics, settings.health.snapshot_min_interval_s)
    for camera in settings.instance_cameras():
        liveview.set_lines(camera.id, camera.lines)
    liveview.count_from(tracking.counts)
    return liveview


def _lanes_on_demand(hub: FrameHub, lanes: Lanes, loop: asyncio.AbstractEventLoop) -> None:
    """A lane starts when the first frame of its size arrives (from a camera's thread)."""

    def lane_needed(size: int) -> None:
        loop.call_soon_threadsafe(lanes.ensure, size)

    hub.on_new_size(lane_needed)


def _observe(liveview: LiveView, *writers: SnapshotWriter | FrameCapture | None) -> Observe:
    """Each finished batch: the live view, the snapshot writer and the capture keep references only."""
    active = [w for w in writers if w is not None]
    if not active:
        return liveview.offer

    def observe(frames: list[Frame], results: list[FrameResult]) -> None:
        liveview.offer(frames, results)
        for writer in active:
            writer.observe(frames, results)

    return observe


def _publish(tracking: TrackingStage, liveview: LiveView, sink: RedisSink, evidence: Evidence) -> Publish:
    snapshots, capture, clips = evidence.snapshots, evidence.capture, evidence.clips

    def publish(results: list[FrameResult]) -> None:
        """Where results leave the lanes, in order: tracked, captured, snapshots and clips named, shown, published."""
        for result in results:
            tracked = tracking.process(result)
            if capture is not None:
                capture.offer(result, tracked)  # before tracking (its weak detections) and after
            if snapshots is not None:
                tracked = snapshots.attach(tracked)
            if clips is not None:
                tracked = clips.attach(tracked)
            liveview.tracked(tracked)
            sink.accept(tracked)

    return publish


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


def _batching(settings: Settings, hub: FrameHub, metrics: Metrics) -> Batching:
    def batching(size: int, max_batch: int) -> tuple[Batcher, InOrder[FrameResult]]:
        """A lane's batcher, fed by the hub, and the order its results are published in (on the loop)."""
        ecfg = settings.engine
        policy = BatchPolicy(
            max_batch,
            ecfg.max_wait_ms / 1000,
            ecfg.max_age_ms / 1000,
            workers=lane_workers(ecfg),
            per_worker=worker_batch(ecfg),
        )
        return Batcher(size, hub, policy, asyncio.get_running_loop(), metrics=metrics), InOrder()

    return batching


def _health(
    settings: Settings,
    metrics: Metrics,
    report: Callable[[], dict[str, Any]],
    liveview: LiveView,
    snapshots: SnapshotWriter | None,
    *,
    clips: ClipRecorder | None,
) -> HealthServer | None:
    """The health endpoint (/healthz, /metrics, the live view, snapshots, clips), when `[health] listen` is set."""
    cfg = settings.health
    if not cfg.listen:
        return None
    host, port = parse_host_port(cfg.listen)
    server = HealthServer(
        host,
        port,
        metrics.registry,
        report,
        limits=HttpLimits(cfg.max_connections, cfg.request_timeout_s),
        metrics=metrics,
        tls=cfg.tls_context(),
        users=cfg.basic_auth_users,
        healthz_open=cfg.healthz_open,
        allowed_hosts=cfg.allowed_hosts,
        allowed_origins=cfg.allowed_origins,
    )
    liveview.register(server, report)
    if snapshots is not None:
        snapshot_route.register(server, snapshots.root)
    if clips is not None:
        clip_route.register(server, clips.root)
    return server
