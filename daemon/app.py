"""The composition root: builds every stage from settings, owns their lifecycle, drains on stop.

Lifecycle: `run()` = startup (validate models, prove the provider, start sink, sources,
health; READY) -> main loop (one TaskGroup owns every long-lived task; the daemon keeps the
handles of those it starts, the lanes theirs) -> shutdown (stop intake, finish in-flight
batches, flush the sink within `shutdown_grace_s`, then cancel its own tasks).
An unexpected exception in any task ends `run()` with it (systemd restarts the process);
expected faults (camera gone, Redis down) are retried inside the stages.

Wiring: camera sources -> `FrameHub` -> each lane's `Batcher` -> lane workers
(`daemon.inference.lanes`: a `ServingEngine` and an `InferenceStage` each) -> `_publish`, the
one seam where results leave the lanes -> the `TrackingStage` (track ids, object events) ->
the sink (and the live view).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

from daemon.batching.batcher import Batcher, BatchPolicy, InOrder
from daemon.batching.hub import FrameHub
from daemon.batching.router import ModelRouter
from daemon.config.settings import Settings
from daemon.core.clock import SYSTEM_CLOCK
from daemon.core.frames import FrameResult, StatusEvent
from daemon.core.metrics import Metrics
from daemon.core.netaddr import parse_host_port
from daemon.core.xp import DeviceChoice
from daemon.inference.engine import EngineFactory
from daemon.inference.lanes import Lane, Lanes
from daemon.inference.model_check import camera_rules, validate_models
from daemon.inference.model_file import ModelInfo
from daemon.inference.placement import choose, device_path
from daemon.inference.protocols import EngineBuilder, InferenceEngine
from daemon.inference.providers import lane_workers, worker_batch
from daemon.inference.serving import ServingEngine
from daemon.inference.stage import InferenceStage, PostprocessConfig
from daemon.ingest.hwdecode import source_decode
from daemon.ingest.sources import CameraSource
from daemon.ops.http import HealthServer, HttpLimits, health_report
from daemon.ops.liveview import LiveView
from daemon.ops.systemd import SystemdNotifier, watchdog
from daemon.publish.sink import RedisSink
from daemon.thermal.monitor import ThermalMonitor
from daemon.tracking import persist
from daemon.tracking.stage import TrackingStage

log = structlog.get_logger("beltsight.app")

TRACKING_RESUME_TIMEOUT_S = 10.0
Spawn = Callable[[Coroutine[Any, Any, None], str], "asyncio.Task[None]"]


class Daemon:
    def __init__(
        self,
        settings: Settings,
        *,
        metrics: Metrics | None = None,
        notifier: SystemdNotifier | None = None,
        engine_factory: EngineBuilder | None = None,
        device: DeviceChoice | None = None,
    ) -> None:
        """`engine_factory` replaces the ONNX Runtime factory (fault-injection tests and tools);
        `device` replaces `placement.choose`'s pick (tests run the device path with NumPy as `xp`)."""
        self._device = device
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.notifier = notifier or SystemdNotifier()
        self.hub = FrameHub(self.metrics)
        self.sink = RedisSink(settings.redis, self.metrics)
        self.sources: list[CameraSource] = []
        self.health: HealthServer | None = None
        self.liveview = LiveView(self.metrics, settings.health.snapshot_min_interval_s)
        self.tracking = TrackingStage(settings.instance_cameras(), settings.tracking, self.metrics)
        for camera in settings.instance_cameras():
            self.liveview.set_lines(camera.id, camera.lines)
        self.liveview.count_from(self.tracking.counts)
        self._lanes = Lanes(
            settings.engine,
            self.metrics,
            build=self._build_worker,
            batching=self._batching,
            publish=self._publish,
            observe=self.liveview.offer,  # keeps references only; draws on request
        )
        self.thermal = ThermalMonitor(
            settings.thermal,
            settings.engine,
            self.metrics,
            apply=self._lanes.set_share,
            on_event=self.sink.accept_event,
            on_status=self.notifier.status,
        )
        self.state = "starting"
        self._stop = asyncio.Event()
        self._infos: dict[int, ModelInfo] = {}
        self._prebuilt: dict[int, InferenceEngine] = {}
        self._factory: EngineBuilder = engine_factory or EngineFactory(settings.engine, self.metrics)
        self._tasks: list[asyncio.Task[None]] = []  # the long-lived tasks started here (the lanes keep theirs)
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- public ----------------------------------------------------------------------------
    @property
    def lanes(self) -> dict[int, Lane]:
        """The running lanes by model size."""
        return self._lanes.by_size

    def request_stop(self) -> None:
        """Begin a graceful shutdown (safe to call from a signal handler on the loop)."""
        self._stop.set()

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self._prepare_models()
        try:
            async with asyncio.TaskGroup() as tg:

                def spawn(coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
                    return tg.create_task(coro, name=name)

                self._lanes.start(spawn)
                self._tasks.append(spawn(self.sink.run(), "sink"))
                await self._resume_tracking(spawn)
                await self._start_sources()
                await self._start_health()
                self._tasks.append(spawn(self.thermal.run(), "thermal"))
                for size in list(self._prebuilt):
                    self._lanes.ensure(size)
                self.state = "running"
                self.notifier.ready(f"{len(self.sources)} cameras, models {sorted(self._infos)}")
                log.info("daemon_ready", cameras=len(self.sources), models=sorted(self._infos))
                if self.notifier.watchdog_interval_s:
                    interval_s = self.notifier.watchdog_interval_s
                    self._tasks.append(spawn(watchdog(self.notifier, self._lanes.busy_s, interval_s), "watchdog"))
                await self._stop.wait()
                await self._shutdown()
        finally:
            await self._close()

    def health_report(self) -> dict[str, Any]:
        return health_report(
            self.state,
            sources=self.sources,
            sink=self.sink,
            models=self._lanes.health(),
            thermal=self.thermal.health(),
            paused=self.thermal.throttle.level == "paused",
        )

    # -- startup ---------------------------------------------------------------------------
    async def _prepare_models(self) -> None:
        """Validate every model file, and prove the configured provider before READY.

        Sessions that camera overrides ask for are built (and warmed up) now; sizes chosen by
        resolution are built on first use. With no override, the smallest model's session is
        built once to prove the provider and closed again: sizes no camera uses stay unloaded.
        Where pre- and post-processing run follows from that first session's providers.
        """
        loop = asyncio.get_running_loop()
        self._infos = await loop.run_in_executor(None, validate_models, self.settings)
        overrides = {c.model for c in self.settings.instance_cameras() if c.model is not None}
        for size in sorted(overrides):
            self._prebuilt[size] = await loop.run_in_executor(None, self._build_engine, size, "startup")
        built = list(self._prebuilt.values())
        if not overrides:
            probe = await loop.run_in_executor(None, self._build_engine, min(self._infos), "provider_check")
            probe.close()
            built = [probe]
        self._device = self._device or choose(self.settings.engine, built[0].providers)

    async def _resume_tracking(self, spawn: Spawn) -> None:
        """Continue each tracked camera's ids and counts (`daemon.tracking.persist`), then keep the
        state file next to the spool current."""
        cameras = {
            cid: {(line.id, d) for line in self.tracking.lines_of(cid) for d in ("in", "out")}
            for cid in self.tracking.camera_ids
        }
        if not cameras:
            return
        from_streams, read = await self.sink.resume_points(cameras, TRACKING_RESUME_TIMEOUT_S)
        directory = self.settings.redis.spool_dir
        persist.resume(self.tracking, from_streams, read, directory)
        if directory is not None:
            self._tasks.append(spawn(persist.keep(self.tracking, directory), "tracking-state"))

    def _build_engine(self, size: int, reason: str) -> InferenceEngine:
        return self._factory.build(self._infos[size], reason=reason)

    async def _start_sources(self) -> None:
        cameras = self.settings.instance_cameras()  # this instance's share ([instance], daemon.config.sharding)
        inst = self.settings.instance
        self.metrics.instance_cameras.labels(shard=str(inst.shard), shards=str(inst.shards)).set(len(cameras))
        if inst.shards > 1:
            log.info(
                "instance_cameras",
                shard=inst.shard,
                shards=inst.shards,
                cameras=[c.id for c in cameras],
                of=len(self.settings.enabled_cameras()),
            )
        router = ModelRouter(self._infos, {c.id: c.model for c in cameras if c.model is not None})
        loop = asyncio.get_running_loop()

        def lane_needed(size: int) -> None:
            loop.call_soon_threadsafe(self._lanes.ensure, size)

        self.hub.on_new_size(lane_needed)
        hw = source_decode(self._device, self.settings.engine.cuda.device_id)  # None: the CPU path
        for camera in cameras:
            source = CameraSource(
                camera, consumer=self.hub, route=router, on_status=self._on_status, metrics=self.metrics, hwdecode=hw
            )
            self.sources.append(source)
            source.start()

    async def _start_health(self) -> None:
        listen = self.settings.health.listen
        if not listen:
            return
        host, port = parse_host_port(listen)
        cfg = self.settings.health
        limits = HttpLimits(cfg.max_connections, cfg.request_timeout_s)
        self.health = HealthServer(
            host,
            port,
            self.metrics.registry,
            self.health_report,
            limits=limits,
            metrics=self.metrics,
            tls=cfg.tls_context(),
            users=cfg.basic_auth_users,
            healthz_open=cfg.healthz_open,
        )
        self.liveview.register(self.health, self.health_report)
        await self.health.start()

    def _on_status(self, event: StatusEvent) -> None:
        """Called from camera and engine threads: hand the event to the loop (sink + log)."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.sink.accept_event, event)

    # -- a lane's parts (built when the lane starts) ------------------------------------------
    def _build_worker(self, size: int, index: int) -> tuple[ServingEngine, InferenceStage]:
        """One lane worker's engine and stage (in the worker's thread): the session prebuilt at
        startup for worker 0 where there is one, else a new one."""
        info, ecfg = self._infos[size], self.settings.engine
        primary = self._prebuilt.pop(size, None) if index == 0 else None
        if primary is None:
            primary = self._build_engine(size, "first_use")
        engine = ServingEngine(self._factory, info, ecfg, primary, metrics=self.metrics, on_status=self._on_status)
        stage = InferenceStage(
            info,
            engine,
            max_batch=engine.max_batch,
            post=PostprocessConfig(ecfg.conf_threshold, ecfg.iou_threshold, ecfg.max_det),
            rules=camera_rules(self.settings, info),
            metrics=self.metrics,
            device=device_path(self._device, info, engine.max_batch),  # None on the CPU path
        )
        return engine, stage

    def _batching(self, size: int, max_batch: int) -> tuple[Batcher, InOrder[FrameResult]]:
        """A lane's batcher, fed by the hub, and the order its results are published in."""
        ecfg = self.settings.engine
        policy = BatchPolicy(
            max_batch,
            ecfg.max_wait_ms / 1000,
            ecfg.max_age_ms / 1000,
            workers=lane_workers(ecfg),
            per_worker=worker_batch(ecfg),
        )
        batcher = Batcher(size, self.hub, policy, asyncio.get_running_loop(), metrics=self.metrics)
        return batcher, InOrder()

    def _publish(self, results: list[FrameResult]) -> None:
        """Where results leave the lanes, in order: tracked, shown, published."""
        for result in results:
            tracked = self.tracking.process(result)
            self.liveview.tracked(tracked)
            self.sink.accept(tracked)

    # -- shutdown --------------------------------------------------------------------------
    async def _shutdown(self) -> None:
        """Stop intake, run the frames already accepted, flush the sink; bounded by the grace period."""
        self.state = "stopping"
        self.notifier.stopping()
        grace = self.settings.shutdown_grace_s
        deadline = SYSTEM_CLOCK.monotonic() + grace
        log.info("shutdown_started", grace_s=grace)
        loop = asyncio.get_running_loop()
        for source in self.sources:
            source.stop()
        await loop.run_in_executor(None, self._join_sources, grace / 2)
        await self._lanes.stop(deadline)
        for camera_id, reason in self.hub.drain():
            self.metrics.dropped(camera_id, reason)
        unflushed = await self.sink.drain(max(0.1, deadline - SYSTEM_CLOCK.monotonic()))
        log.info("shutdown_complete", unflushed=unflushed)
        for task in self._tasks:
            task.cancel()

    def _join_sources(self, timeout_s: float) -> None:
        deadline = SYSTEM_CLOCK.monotonic() + timeout_s
        for source in self.sources:
            source.join(max(0.0, deadline - SYSTEM_CLOCK.monotonic()))

    async def _close(self) -> None:
        if self.health is not None:
            await self.health.close()
        self.liveview.close()
        for source in self.sources:
            source.stop()
        await self.sink.close()
        self._lanes.close()
        for engine in self._prebuilt.values():
            engine.close()
