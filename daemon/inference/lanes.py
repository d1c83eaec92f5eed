"""Lanes: everything serving one model size, started on first use and drained on stop.

A `Lane` is `engine.workers` workers fed by one batch source; each `Worker` is one
`ServingEngine` and its `InferenceStage`, run in the worker's own thread. Results leave a lane
in the order its batches were taken, through ONE seam: the `publish(results)` callable the
builder wires (`daemon.pipeline`: tracking, the live view, the sink). `observe(frames, results)`
sees each batch as it finishes (the live view). `Lanes` holds every lane: `ensure(size)` starts one (from
the loop), `set_share` passes the thermal share to every batch source, `replace` puts a swapped model's
engines and stages in between two batches (`daemon.inference.swap`), `stop` drains, `close`
releases the sessions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import structlog

from daemon.config.engine import EngineConfig
from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.core.frames import Frame, FrameResult
from daemon.core.metrics import Metrics
from daemon.core.tasks import Spawn, stop_task
from daemon.inference.engine import InferenceError
from daemon.inference.protocols import BatchSource, ResultOrder
from daemon.inference.providers import lane_workers, worker_batch
from daemon.inference.serving import ServingEngine
from daemon.inference.stage import InferenceStage

log = structlog.get_logger("beltsight.inference")

WorkerBuilder = Callable[[int, int], tuple[ServingEngine, InferenceStage]]
"""(size, worker index) -> the worker's engine and stage; called in the worker's thread
(`daemon.inference.build.LaneWorkers`)."""
Batching = Callable[[int, int], tuple[BatchSource, ResultOrder]]
"""(size, max_batch) -> the lane's batch source (already subscribed) and its result order."""
Publish = Callable[[list[FrameResult]], None]
Observe = Callable[[list[Frame], list[FrameResult]], None]


@dataclass
class Worker:
    """One session of a lane and the thread that runs its batches; `busy_since` is set while a
    batch is in the engine."""

    index: int
    executor: ThreadPoolExecutor
    engine: ServingEngine | None = None
    stage: InferenceStage | None = None
    busy_since: float | None = None
    batches: int = 0


@dataclass
class Lane:
    """Everything serving one model size: its workers, fed by one batch source."""

    size: int
    clock: Clock = SYSTEM_CLOCK
    setup: asyncio.Task[None] | None = None
    workers: list[Worker] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    batches_from: BatchSource | None = None
    order: ResultOrder | None = None

    @property
    def batches(self) -> int:
        return sum(w.batches for w in self.workers)

    def busy_s(self) -> float:
        """How long the longest-running batch of this lane has been in its engine (0: idle)."""
        now = self.clock.monotonic()
        return round(max((now - w.busy_since for w in self.workers if w.busy_since is not None), default=0.0), 3)

    def health(self) -> dict[str, Any]:
        """This lane's part of /healthz: batches, busy time, workers, breaker state and providers."""
        report: dict[str, Any] = {"batches": self.batches, "busy_s": self.busy_s(), "workers": len(self.workers)}
        engines = [w.engine for w in self.workers if w.engine is not None]
        if engines:
            states = [e.breaker_state for e in engines]
            # the worst worker's state: one open breaker means that lane is (partly) on the CPU
            report["breaker"] = next((st for st in ("open", "half-open") if st in states), states[0])
            report["providers"] = list(engines[0].providers)
        return report


class Lanes:
    """Every model size's lane; `start(spawn)` before `ensure` (spawn: app's task group)."""

    def __init__(
        self,
        cfg: EngineConfig,
        metrics: Metrics,
        *,
        build: WorkerBuilder,
        batching: Batching,
        publish: Publish,
        observe: Observe,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.by_size: dict[int, Lane] = {}
        self._cfg = cfg
        self._metrics = metrics
        self._build = build
        self._batching = batching
        self._publish = publish
        self._observe = observe
        self._clock = clock
        self._share = 1.0
        self._spawn: Spawn | None = None
        self._stopping = False

    def start(self, spawn: Spawn) -> None:
        self._spawn = spawn

    def ensure(self, size: int) -> None:
        """Start the lane of `size` unless it runs (call on the loop)."""
        if size in self.by_size or self._spawn is None or self._stopping:
            return
        lane = Lane(size, self._clock)
        self.by_size[size] = lane
        lane.setup = self._spawn(self._start_lane(lane), f"lane-{size}")

    def set_share(self, share: float) -> None:
        """The thermal governor's share, to every lane's batch source (a new lane starts with it)."""
        self._share = share
        for lane in self.by_size.values():
            if lane.batches_from is not None:
                lane.batches_from.set_share(share)

    def busy_s(self) -> dict[int, float]:
        return {size: lane.busy_s() for size, lane in self.by_size.items()}

    def health(self) -> dict[str, dict[str, Any]]:
        return {str(size): lane.health() for size, lane in sorted(self.by_size.items())}

    async def _start_lane(self, lane: Lane) -> None:
        """Build the lane's sessions (side by side), then start one worker task per session."""
        count = lane_workers(self._cfg)
        lane.workers = [Worker(i, ThreadPoolExecutor(1, f"beltsight-infer-{lane.size}-{i}")) for i in range(count)]
        loop = asyncio.get_running_loop()
        built = await asyncio.gather(
            *(loop.run_in_executor(w.executor, self._build, lane.size, w.index) for w in lane.workers)
        )
        for worker, (engine, stage) in zip(lane.workers, built, strict=True):
            worker.engine, worker.stage = engine, stage
        first = built[0][0]
        lane.batches_from, lane.order = self._batching(lane.size, first.max_batch)
        lane.batches_from.set_share(self._share)
        assert self._spawn is not None
        lane.tasks = [self._spawn(self._run_worker(lane, w), f"lane-{lane.size}-{w.index}") for w in lane.workers]
        lane.batches_from.notify()
        log.info(
            "lane_started",
            model=lane.size,
            providers=first.providers,
            workers=count,
            max_batch=first.max_batch,
            worker_batch=worker_batch(self._cfg) or "share",
        )

    async def _run_worker(self, lane: Lane, worker: Worker) -> None:
        """Take batches from the lane's source and run them on this worker's session until the
        source stops; results are published in the order the batches were taken."""
        loop = asyncio.get_running_loop()
        assert lane.batches_from is not None and lane.order is not None
        order = lane.order
        busy_s = 0.0  # the last batch's time in the engine: the thermal duty cycle rests in proportion
        while frames := await lane.batches_from.next_batch(busy_s):
            stage = worker.stage  # read per batch: a model swap (`replace`) takes effect between two
            assert stage is not None
            ticket = order.ticket()
            started = worker.busy_since = self._clock.monotonic()
            results: list[FrameResult] = []
            try:
                results = await loop.run_in_executor(worker.executor, stage.infer, frames)
                worker.batches += 1
                self._observe(frames, results)
            except InferenceError as exc:
                log.error("inference_failed", model=lane.size, frames=len(frames), error=str(exc))
                for frame in frames:
                    self._metrics.dropped(frame.camera_id, "engine_error")
            finally:
                busy_s = self._clock.monotonic() - started
                worker.busy_since = None
                self._publish(order.complete(ticket, results))

    async def running(self, size: int) -> int | None:
        """The number of workers of the lane of `size` once its sessions are built (waits for a lane
        being set up), None when it does not run."""
        lane = self.by_size.get(size)
        if lane is not None and lane.setup is not None and not lane.setup.done():
            await asyncio.wait([lane.setup])
        return len(lane.workers) if lane is not None and lane.batches_from is not None else None

    async def settled(self, timeout_s: float, poll_s: float = 0.01) -> bool:
        """Wait until every batch taken so far has been published (a camera removed live: its frames
        taken before this call are then through tracking and in the sink); False at the timeout."""
        targets = [(lane.order, lane.order.issued) for lane in self.by_size.values() if lane.order is not None]
        deadline = self._clock.monotonic() + timeout_s
        while any(order.published < issued for order, issued in targets):
            if self._clock.monotonic() >= deadline:
                return False
            await asyncio.sleep(poll_s)
        return True

    def started(self, size: int) -> bool:
        return size in self.by_size

    def replace(self, size: int, built: list[tuple[ServingEngine, InferenceStage]]) -> bool:
        """Each worker of `size` on its new engine and stage from its next batch on (call on the loop;
        a model swap, `daemon.inference.swap`); each old engine is closed in its worker's thread after
        the batch in flight. False when the lane does not run or its workers differ (nothing done)."""
        lane = self.by_size.get(size)
        if lane is None or lane.batches_from is None or self._stopping or len(built) != len(lane.workers):
            return False
        for worker, (engine, stage) in zip(lane.workers, built, strict=True):
            old, worker.engine, worker.stage = worker.engine, engine, stage
            if old is not None:
                worker.executor.submit(old.close)
        return True

    async def stop(self, deadline: float) -> None:
        """Run what the lanes accepted (intake has stopped), then end their tasks; a batch still
        in an engine at the deadline (`clock.monotonic()`) is abandoned (its task is cancelled)."""
        self._stopping = True
        for lane in self.by_size.values():
            if lane.setup is not None and not lane.setup.done():
                lane.setup.cancel()  # still building sessions: nothing was taken yet
            if lane.batches_from is not None:
                lane.batches_from.stop()
        for lane in self.by_size.values():
            for task in lane.tasks:
                await asyncio.wait([task], timeout=max(0.0, deadline - self._clock.monotonic()))
                await stop_task(task)

    def close(self) -> None:
        """Close every session and let the worker threads go."""
        self._stopping = True
        for lane in self.by_size.values():
            for worker in lane.workers:
                if worker.engine is not None:
                    worker.engine.close()
                worker.executor.shutdown(wait=False, cancel_futures=True)
