"""The daemon's lifecycle: build the pipeline, start it, report ready, drain and stop it.

`Daemon.run()` = build (`daemon.pipeline.build`: models proved, every stage wired, nothing
started, no file touched) -> startup (the sink opened: its spools recovered and their writer
threads started; the models drop-in's stale entries removed; the lanes and the sink's task; the
tracking resume, `daemon.tracking.persist.resume_stage`; sources, health endpoint, thermal
monitor, the lanes of the sizes proved at startup; READY) -> main loop (wait for `request_stop`,
which a signal handler may call: it only sets a flag; `request_reload`, SIGHUP's, runs
`daemon.ops.reload`) -> shutdown (stop intake, finish in-flight batches, flush the sink within
`shutdown_grace_s`, then stop its own tasks) -> close (sockets, threads, sessions, processes: named
steps, each run whatever an earlier one did; a failed one is logged as `close_step_failed` and the
first failure raised once all ran).
One TaskGroup owns every long-lived task; the daemon keeps the handles of those it starts, the
lanes theirs. An unexpected exception in any task ends `run()` with it (systemd restarts the
process); expected faults (camera gone, Redis down) are retried inside the stages. Close runs
whatever startup reached: a startup step that fails ends `run()` with every stage it started
stopped again, the sink's spool-writer threads included.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import structlog

from daemon.config.settings import Settings
from daemon.core.clock import SYSTEM_CLOCK
from daemon.core.metrics import Metrics
from daemon.core.tasks import CloseStep, Spawn, run_close_steps, spawner, stop_task
from daemon.core.xp import DeviceChoice
from daemon.inference.lanes import Lane
from daemon.inference.protocols import EngineBuilder
from daemon.ingest.sources import CameraSource
from daemon.ops.http import HealthServer
from daemon.ops.reload import serve_reloads
from daemon.ops.systemd import SystemdNotifier, watchdog
from daemon.pipeline import Pipeline, build
from daemon.tracking import persist

log = structlog.get_logger("beltsight.app")


class Daemon:
    """Runs one pipeline from build to close (uvicorn's `Server`); the stages are `pipeline`'s."""

    def __init__(
        self,
        settings: Settings,
        *,
        metrics: Metrics | None = None,
        notifier: SystemdNotifier | None = None,
        engine_factory: EngineBuilder | None = None,
        device: DeviceChoice | None = None,
        config_path: Path | None = None,
    ) -> None:
        """`engine_factory` and `device`: the seams of `daemon.pipeline.build`; `config_path`: re-read on reload."""
        self.settings = settings
        self.config_path = config_path
        self._reload = asyncio.Event()
        self.metrics = metrics or Metrics()
        self.notifier = notifier or SystemdNotifier()
        self._engine_factory = engine_factory
        self._device = device
        self.pipeline: Pipeline | None = None  # built by run()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []  # the long-lived tasks started here (the lanes keep theirs)

    # -- public ----------------------------------------------------------------------------
    @property
    def state(self) -> str:
        return "starting" if self.pipeline is None else self.pipeline.phase.name

    @property
    def sources(self) -> tuple[CameraSource, ...]:
        return () if self.pipeline is None else tuple(self.pipeline.sources)

    @property
    def health(self) -> HealthServer | None:
        return None if self.pipeline is None else self.pipeline.health

    @property
    def lanes(self) -> dict[int, Lane]:
        """The running lanes by model size."""
        return {} if self.pipeline is None else self.pipeline.lanes.by_size

    def request_stop(self) -> None:
        """Begin a graceful shutdown (safe to call from a signal handler on the loop)."""
        self._stop.set()

    def request_reload(self) -> None:
        """Re-read the config and apply what can change live (safe from a signal handler on the loop)."""
        self._reload.set()

    def health_report(self) -> dict[str, Any]:
        """The /healthz JSON (before the pipeline is built: starting, nothing else known)."""
        return {"ok": False, "status": "starting"} if self.pipeline is None else self.pipeline.report()

    async def run(self) -> None:
        pipeline = self.pipeline = await build(
            self.settings,
            metrics=self.metrics,
            notifier=self.notifier,
            engine_factory=self._engine_factory,
            device=self._device,
        )
        try:
            async with asyncio.TaskGroup() as tg:
                await self._startup(pipeline, spawner(tg))
                await self._stop.wait()
                await self._shutdown(pipeline)
        finally:
            await self._close(pipeline)

    # -- startup ---------------------------------------------------------------------------
    async def _startup(self, p: Pipeline, spawn: Spawn) -> None:
        await p.sink.open()  # the spools recovered, their writer threads started (closed by `_close`)
        await asyncio.get_running_loop().run_in_executor(None, p.serving.prune)
        p.lanes.start(spawn)
        self._tasks.append(spawn(p.sink.run(), "sink"))
        state_dir = await persist.resume_stage(p.tracking, p.sink.resume_points, self.settings.redis.spool_dir)
        if state_dir is not None:  # the state file next to the spool, kept current
            self._tasks.append(spawn(persist.keep(p.tracking, state_dir), "tracking-state"))
        for source in p.sources:
            source.start()
        if p.health is not None:
            await p.health.start()
        if p.evidence.snapshots is not None:
            p.evidence.snapshots.start()
        if p.evidence.capture is not None:
            p.evidence.capture.start()
        if p.evidence.clips is not None:
            p.evidence.clips.start()
        if p.review is not None:
            self._tasks.append(spawn(p.review.run(), "review"))
        self._tasks.append(spawn(p.thermal.run(), "thermal"))
        for size in p.workers.prebuilt_sizes:
            p.lanes.ensure(size)
        p.phase.name = "running"
        models = sorted(p.models.infos)
        self.notifier.ready(f"{len(p.sources)} cameras, models {models}")
        log.info("daemon_ready", cameras=len(p.sources), models=models)
        self._tasks.append(spawn(serve_reloads(p.reloader, self._reload, self.config_path), "reload"))
        if interval_s := self.notifier.watchdog_interval_s:
            self._tasks.append(spawn(watchdog(self.notifier, p.lanes.busy_s, interval_s), "watchdog"))

    # -- shutdown --------------------------------------------------------------------------
    async def _shutdown(self, p: Pipeline) -> None:
        """Stop intake, run the frames already accepted, flush the sink; bounded by the grace period."""
        p.phase.name = "stopping"
        self.notifier.stopping()
        grace = self.settings.shutdown_grace_s
        deadline = SYSTEM_CLOCK.monotonic() + grace
        log.info("shutdown_started", grace_s=grace)
        await p.cameras.close()  # a camera change still being applied ends here
        for source in p.sources:
            source.stop()
        await asyncio.get_running_loop().run_in_executor(None, _join_sources, list(p.sources), grace / 2)
        await p.lanes.stop(deadline)
        for camera_id, reason in p.hub.drain():
            self.metrics.dropped(camera_id, reason)
        unflushed = await p.sink.drain(max(0.1, deadline - SYSTEM_CLOCK.monotonic()))
        log.info("shutdown_complete", unflushed=unflushed)
        for task in self._tasks:
            await stop_task(task)

    async def _close(self, p: Pipeline) -> None:
        """Run every close step (`_close_steps`) whatever an earlier one did (`run_close_steps`: a
        failed one logged as `close_step_failed`, the first failure raised once all ran)."""
        await run_close_steps(_close_steps(p))


def _close_steps(p: Pipeline) -> list[CloseStep]:
    """What `Daemon._close` runs, in order, by name: the camera changes still applied, the health
    endpoint and the live view, the evidence writers and the review record (their threads), each
    source, the sink (its spools' writer threads), the lanes, the workers, the decoder processes.
    Each is safe to run whether start-up reached it or not."""

    def off_loop(call: Callable[[], object]) -> Callable[[], Awaitable[object]]:
        return lambda: asyncio.get_running_loop().run_in_executor(None, call)

    def now(call: Callable[[], object]) -> Callable[[], Awaitable[object]]:
        async def step() -> object:
            return call()

        return step

    steps: list[CloseStep] = [("cameras", p.cameras.close)]
    if p.health is not None:
        steps.append(("health", p.health.close))
    steps.append(("liveview", p.liveview.close))
    evidence = {"snapshots": p.evidence.snapshots, "capture": p.evidence.capture, "clips": p.evidence.clips}
    steps += [(name, off_loop(writer.stop)) for name, writer in evidence.items() if writer is not None]
    if p.review is not None:
        steps.append(("review", off_loop(p.review.close)))
    sources = list(p.sources)
    steps += [(f"source {source.camera_id}", now(source.stop)) for source in sources]
    # a start-up that failed never ran `_shutdown`'s join: the readers end here, bounded, before
    # the sink and the lanes they hand frames to are closed
    steps.append(("sources joined", off_loop(lambda: _join_sources(sources, SOURCES_CLOSE_JOIN_S))))
    steps += [("sink", p.sink.close), ("lanes", now(p.lanes.close)), ("workers", now(p.workers.close))]
    if p.decoders is not None:
        steps.append(("decoders", off_loop(p.decoders.close)))
    return steps


SOURCES_CLOSE_JOIN_S = 5.0
"""How long close waits for the camera readers together (a reader notices its stop at the next
packet, or at its read timeout on a frozen server)."""


def _join_sources(sources: list[CameraSource], timeout_s: float) -> None:
    deadline = SYSTEM_CLOCK.monotonic() + timeout_s
    for source in sources:
        source.join(max(0.0, deadline - SYSTEM_CLOCK.monotonic()))
