"""The composition root: builds every stage from settings, supervises them, drains on stop.

Lifecycle: `run()` = startup (validate models, prove the provider, start sink, sources,
health; READY) -> main loop (one TaskGroup owns every long-lived task) -> shutdown (stop
intake, finish in-flight batches, flush the sink within `shutdown_grace_s`).
An unexpected exception in any task ends `run()` with it (systemd restarts the process);
expected faults (camera gone, Redis down) are retried inside the stages.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import structlog

from daemon.batching.batcher import Batcher, BatchPolicy, InOrder
from daemon.batching.hub import FrameHub
from daemon.batching.router import ModelRouter
from daemon.config.settings import ConfigError, Settings
from daemon.core.frames import FrameResult, StatusEvent
from daemon.core.metrics import Metrics
from daemon.core.xp import DeviceChoice, choose_device
from daemon.inference.device_stage import for_lane
from daemon.inference.engine import EngineFactory, InferenceError
from daemon.inference.model_file import ModelInfo, load_model_info, log_model
from daemon.inference.protocols import EngineBuilder, InferenceEngine
from daemon.inference.providers import lane_workers, worker_batch
from daemon.inference.resilience import ResilientEngine
from daemon.inference.stage import CameraRules, InferenceStage, PostprocessConfig
from daemon.ingest.hwdecode import source_decode
from daemon.ingest.sources import CameraSource
from daemon.ops.health import HealthServer, HttpLimits, SystemdNotifier
from daemon.ops.liveview import LiveView
from daemon.publish.sink import RedisSink
from daemon.thermal.monitor import ThermalMonitor

log = structlog.get_logger("beltsight.app")


@dataclass
class Worker:
    """One session of a lane and the thread that runs its batches; `busy_since` is set while a
    batch is in the engine."""

    index: int
    executor: ThreadPoolExecutor
    stage: InferenceStage | None = None
    busy_since: float | None = None
    batches: int = 0


@dataclass
class Lane:
    """Everything serving one model size: `engine.workers` sessions fed by one batcher, their
    results published in the order their batches were taken."""

    size: int
    setup: asyncio.Task[None] | None = None
    workers: list[Worker] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    batcher: Batcher | None = None
    order: InOrder[FrameResult] = field(default_factory=InOrder)

    @property
    def batches(self) -> int:
        return sum(w.batches for w in self.workers)

    def busy_s(self) -> float:
        """How long the longest-running batch of this lane has been in its engine (0: idle)."""
        now = time.monotonic()
        return round(max((now - w.busy_since for w in self.workers if w.busy_since is not None), default=0.0), 3)


def validate_models(settings: Settings) -> dict[int, ModelInfo]:
    """Read and check every configured model file (raises ModelError naming file and problem),
    and that every camera's class filter names labels the models know (else ConfigError)."""
    infos = {
        size: load_model_info(model.path, expected_size=size, overrides=model.overrides())
        for size, model in sorted(settings.models.items())
    }
    for info in infos.values():
        log_model(info)
    errors = []
    for i, cam in enumerate(settings.cameras):
        for size, info in infos.items():
            unknown = sorted(set(cam.classes or ()) - set(info.names))
            if unknown:
                errors.append(f"cameras.{i}.classes: {unknown} not in model {size}'s labels {list(info.names)}")
    if errors:
        raise ConfigError("model labels", errors)
    return infos


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
        `device` replaces `choose_device`'s pick (tests run the device path with NumPy as `xp`)."""
        self._device = device
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.notifier = notifier or SystemdNotifier()
        self.hub = FrameHub(self.metrics)
        self.sink = RedisSink(settings.redis, self.metrics)
        self.lanes: dict[int, Lane] = {}
        self.sources: list[CameraSource] = []
        self.health: HealthServer | None = None
        self.liveview = LiveView(self.metrics, settings.health.snapshot_min_interval_s)
        self.thermal = ThermalMonitor(
            settings.thermal,
            settings.engine,
            self.metrics,
            apply=self._apply_share,
            on_event=self.sink.accept_event,
            on_status=self.notifier.status,
        )
        self.state = "starting"
        self._stop = asyncio.Event()
        self._infos: dict[int, ModelInfo] = {}
        self._prebuilt: dict[int, InferenceEngine] = {}
        self._factory: EngineBuilder = engine_factory or EngineFactory(settings.engine, self.metrics)
        self._tg: asyncio.TaskGroup | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- public ----------------------------------------------------------------------------
    def request_stop(self) -> None:
        """Begin a graceful shutdown (safe to call from a signal handler on the loop)."""
        self._stop.set()

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self._prepare_models()
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                tg.create_task(self.sink.run(), name="sink")
                await self._start_sources()
                await self._start_health()
                tg.create_task(self.thermal.run(), name="thermal")
                for size in list(self._prebuilt):
                    self._ensure_lane(size)
                self.state = "running"
                self.notifier.ready(f"{len(self.sources)} cameras, models {sorted(self._infos)}")
                log.info("daemon_ready", cameras=len(self.sources), models=sorted(self._infos))
                if self.notifier.watchdog_interval_s:
                    tg.create_task(self._watchdog(self.notifier.watchdog_interval_s), name="watchdog")
                await self._stop.wait()
                await self._shutdown()
        finally:
            await self._close()

    def health_report(self) -> dict[str, Any]:
        cameras = {
            s.camera_id: {"state": s.state, "frames": s.frames, "fps": round(s.fps, 1), "size": s.size_text}
            for s in self.sources
        }
        degraded = not self.sink.connected or any(c["state"] != "up" for c in cameras.values())
        degraded = degraded or self.thermal.throttle.level == "paused"
        status = self.state if self.state != "running" else ("degraded" if degraded else "ok")
        return {
            "ok": self.state == "running",
            "status": status,
            "cameras": cameras,
            "redis": {"connected": self.sink.connected, "buffered": self.sink.buffered},
            "models": {str(size): self._lane_health(lane) for size, lane in sorted(self.lanes.items())},
            "thermal": self.thermal.health(),
        }

    def _lane_health(self, lane: Lane) -> dict[str, Any]:
        report: dict[str, Any] = {"batches": lane.batches, "busy_s": lane.busy_s(), "workers": len(lane.workers)}
        engines = [w.stage.engine for w in lane.workers if w.stage is not None]
        resilient = [e for e in engines if isinstance(e, ResilientEngine)]
        if resilient:
            states = [e.breaker_state for e in resilient]
            # the worst worker's state: one open breaker means that lane is (partly) on the CPU
            report["breaker"] = next((st for st in ("open", "half-open") if st in states), states[0])
            report["providers"] = list(resilient[0].providers)
        return report

    # -- startup ---------------------------------------------------------------------------
    async def _prepare_models(self) -> None:
        """Validate every model file, and prove the configured provider before READY.

        Sessions that camera overrides ask for are built (and warmed up) now; sizes chosen by
        resolution are built on first use. With no override, the smallest model's session is
        built once to prove the provider and closed again: sizes no camera uses stay unloaded.
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
        ecfg = self.settings.engine  # where pre- and post-processing run, from the session's providers
        self._device = self._device or choose_device(ecfg.device, built[0].providers, ecfg.cuda.device_id)

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
            loop.call_soon_threadsafe(self._ensure_lane, size)

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
        host, _, port = listen.rpartition(":")
        cfg = self.settings.health
        limits = HttpLimits(cfg.max_connections, cfg.request_timeout_s)
        self.health = HealthServer(
            host, int(port), self.metrics.registry, self.health_report, limits=limits, metrics=self.metrics
        )
        self.liveview.register(self.health, self.health_report)
        await self.health.start()

    def _on_status(self, event: StatusEvent) -> None:
        """Called from camera threads: hand the event to the loop (sink + log)."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.sink.accept_event, event)

    # -- lanes -----------------------------------------------------------------------------
    def _ensure_lane(self, size: int) -> None:
        if size in self.lanes or self._tg is None or self._stop.is_set():
            return
        lane = Lane(size)
        self.lanes[size] = lane
        lane.setup = self._tg.create_task(self._start_lane(lane), name=f"lane-{size}")

    def _resilient(self, size: int, primary: InferenceEngine) -> ResilientEngine:
        """Breaker with a CPU fallback and periodic rebuilds around the lane's primary engine."""
        info, cfg = self._infos[size], self.settings.engine
        return ResilientEngine(self._factory, info, cfg, primary, metrics=self.metrics, on_status=self._on_status)

    def _make_stage(self, size: int, engine: InferenceEngine) -> InferenceStage:
        info = self._infos[size]
        ecfg = self.settings.engine
        label_ids = {label: i for i, label in enumerate(info.names)}
        rules: dict[str, CameraRules] = {}
        for cam in self.settings.instance_cameras():
            classes = None
            if cam.classes is not None:
                classes = frozenset(label_ids[c] for c in cam.classes)
            rules[cam.id] = CameraRules(cam.conf_threshold or ecfg.conf_threshold, classes)
        post = PostprocessConfig(ecfg.conf_threshold, ecfg.iou_threshold, ecfg.max_det)
        device = for_lane(self._device, engine, info, engine.max_batch)  # None on the CPU path
        return InferenceStage(
            info, engine, max_batch=engine.max_batch, post=post, rules=rules, metrics=self.metrics, device=device
        )

    async def _start_lane(self, lane: Lane) -> None:
        """Build the lane's sessions (side by side), then start one worker task per session."""
        count = lane_workers(self.settings.engine)
        lane.workers = [Worker(i, ThreadPoolExecutor(1, f"beltsight-infer-{lane.size}-{i}")) for i in range(count)]
        prebuilt = self._prebuilt.pop(lane.size, None)
        engines = await asyncio.gather(
            *(self._worker_engine(lane.size, w, prebuilt if w.index == 0 else None) for w in lane.workers)
        )
        for worker, engine in zip(lane.workers, engines, strict=True):
            worker.stage = self._make_stage(lane.size, engine)
        ecfg = self.settings.engine
        max_batch = engines[0].max_batch
        policy = BatchPolicy(
            max_batch, ecfg.max_wait_ms / 1000, ecfg.max_age_ms / 1000, workers=count, per_worker=worker_batch(ecfg)
        )
        loop = asyncio.get_running_loop()
        lane.batcher = Batcher(lane.size, self.hub, policy, loop, time.monotonic, metrics=self.metrics)
        lane.batcher.set_share(self.thermal.share)
        assert self._tg is not None
        lane.tasks = [
            self._tg.create_task(self._run_worker(lane, w), name=f"lane-{lane.size}-{w.index}") for w in lane.workers
        ]
        lane.batcher.notify()
        log.info(
            "lane_started",
            model=lane.size,
            providers=engines[0].providers,
            workers=count,
            max_batch=max_batch,
            worker_batch=policy.per_worker or "share",
        )

    async def _worker_engine(self, size: int, worker: Worker, primary: InferenceEngine | None) -> ResilientEngine:
        if primary is None:
            loop = asyncio.get_running_loop()
            primary = await loop.run_in_executor(worker.executor, self._build_engine, size, "first_use")
        return self._resilient(size, primary)

    async def _run_worker(self, lane: Lane, worker: Worker) -> None:
        """Take batches from the lane's batcher and run them on this worker's session until the
        batcher stops; results go to the sink in the order the batches were taken."""
        loop = asyncio.get_running_loop()
        assert lane.batcher is not None and worker.stage is not None
        stage = worker.stage
        busy_s = 0.0  # the last batch's time in the engine: the thermal duty cycle rests in proportion
        while frames := await lane.batcher.next_batch(busy_s):
            ticket = lane.order.ticket()
            started = worker.busy_since = time.monotonic()
            results: list[FrameResult] = []
            try:
                results = await loop.run_in_executor(worker.executor, stage.infer, frames)
                worker.batches += 1
                self.liveview.offer(frames, results)  # keeps references only; draws on request
            except InferenceError as exc:
                log.error("inference_failed", model=lane.size, frames=len(frames), error=str(exc))
                for frame in frames:
                    self.metrics.dropped(frame.camera_id, "engine_error")
            finally:
                busy_s = time.monotonic() - started
                worker.busy_since = None
                self._publish(lane.order.complete(ticket, results))

    def _apply_share(self, share: float) -> None:
        """The thermal governor's share, to every lane's batcher (a new lane starts with it)."""
        for lane in self.lanes.values():
            if lane.batcher is not None:
                lane.batcher.set_share(share)

    def _publish(self, results: list[FrameResult]) -> None:
        for result in results:
            self.sink.accept(result)

    async def _watchdog(self, interval_s: float) -> None:
        """Ping systemd while the loop runs and no engine has been stuck on one batch for long."""
        stuck_after_s = max(30.0, 4 * interval_s)
        while True:
            if all(lane.busy_s() < stuck_after_s for lane in self.lanes.values()):
                self.notifier.watchdog()
            else:
                log.error("engine_stuck", lanes={s: la.busy_s() for s, la in self.lanes.items()})
            await asyncio.sleep(interval_s)

    # -- shutdown --------------------------------------------------------------------------
    async def _shutdown(self) -> None:
        """Stop intake, run the frames already accepted, flush the sink; bounded by the grace period."""
        self.state = "stopping"
        self.notifier.stopping()
        grace = self.settings.shutdown_grace_s
        deadline = time.monotonic() + grace
        log.info("shutdown_started", grace_s=grace)
        loop = asyncio.get_running_loop()
        for source in self.sources:
            source.stop()
        await loop.run_in_executor(None, self._join_sources, grace / 2)
        await self._stop_lanes(deadline)
        for camera_id, reason in self.hub.drain():
            self.metrics.dropped(camera_id, reason)
        unflushed = await self.sink.drain(max(0.1, deadline - time.monotonic()))
        log.info("shutdown_complete", unflushed=unflushed)
        if self._tg is not None:
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task() and task.get_name() in {"sink", "watchdog", "thermal"}:
                    task.cancel()

    def _join_sources(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for source in self.sources:
            source.join(max(0.0, deadline - time.monotonic()))

    async def _stop_lanes(self, deadline: float) -> None:
        """Run what the lanes accepted (intake has stopped), then end their tasks; a batch still
        in an engine at the deadline is abandoned (its worker task is cancelled)."""
        for lane in self.lanes.values():
            if lane.setup is not None and not lane.setup.done():
                lane.setup.cancel()  # still building sessions: nothing was taken yet
            if lane.batcher is not None:
                lane.batcher.stop()
        for lane in self.lanes.values():
            for task in lane.tasks:
                with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                    await asyncio.wait_for(asyncio.shield(task), max(0.0, deadline - time.monotonic()))
                task.cancel()

    async def _close(self) -> None:
        if self.health is not None:
            await self.health.close()
        self.liveview.close()
        for source in self.sources:
            source.stop()
        await self.sink.close()
        for lane in self.lanes.values():
            for worker in lane.workers:
                if worker.stage is not None:
                    worker.stage.engine.close()
                worker.executor.shutdown(wait=False, cancel_futures=True)
        for engine in self._prebuilt.values():
            engine.close()
