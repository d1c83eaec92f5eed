"""Session rebuilds: a new session is built beside the serving one and swapped in between batches.

The engine Protocols live in `daemon.inference.protocols`; they are re-exported here for older imports.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import structlog

from daemon.config.engine import RebuildConfig
from daemon.core.frames import StatusEvent
from daemon.core.memory import MemorySample, process_memory, release_free_memory
from daemon.inference.engine import InferenceError
from daemon.inference.model_file import ModelInfo
from daemon.inference.protocols import Clock, DeviceEngine, EngineBuilder, HostArray, InferenceEngine, StatusCallback
from daemon.inference.providers import Placement

__all__ = [
    "Clock",
    "EngineBuilder",
    "HostArray",
    "InferenceEngine",
    "RebuildingEngine",
    "StatusCallback",
    "close_built",
    "emit_status",
]

log = structlog.get_logger("beltsight.rebuild")


def emit_status(on_status: StatusCallback, clock: Clock, kind: str, detail: str) -> None:
    """Send a StatusEvent; a failing listener is logged, never raised into the lane."""
    try:
        on_status(StatusEvent(kind=kind, detail=detail, at_ms=int(clock.time() * 1000)))
    except Exception as exc:
        log.error("status_listener_failed", kind=kind, error=type(exc).__name__)


def close_built(future: Future[Any]) -> None:
    """Done-callback after `close()`: an engine whose build finishes late is closed, not leaked."""
    if future.cancelled() or future.exception() is not None:
        return
    built = future.result()
    engine = built.engine if isinstance(built, _Built) else built
    if engine is not None:
        engine.close()


@dataclass(frozen=True, slots=True)
class _Built:
    engine: InferenceEngine
    reason: str
    build_s: float
    growth_mb: float | None = None


class RebuildingEngine:
    """One session role (primary or CPU fallback), rebuilt beside itself as `rebuild` asks.

    After `every_frames` frames, `every_s` seconds, or when RSS or device memory grew by more
    than `max_growth_mb` since the last build (sampled every `memory_check_s`), a new session is
    built and warmed up in this engine's builder thread while batches keep running on the
    serving one; the next `run()` swaps it in and the old one is closed in the builder thread,
    so no batch ever waits for a build. A failed rebuild is logged (`session_rebuild_failed`)
    and retried after `retry_s`; the serving session continues. Each swap logs
    `session_rebuilt` and sends a StatusEvent. Triggers are only checked while batches run: an
    idle role (the fallback while the primary serves) is rebuilt, if due, once it serves again.

    Threads: `run` from one worker thread; `close` from any (waits for a running batch).
    """

    def __init__(
        self,
        factory: EngineBuilder,
        info: ModelInfo,
        rebuild: RebuildConfig,
        engine: InferenceEngine,
        *,
        placement: Placement,
        on_status: StatusCallback,
        clock: Clock = time,
        memory_probe: Callable[[], MemorySample] | None = None,
        memory_check_s: float = 5.0,
        retry_s: float = 30.0,
    ) -> None:
        self.info = info
        self._factory = factory
        self._rebuild = rebuild
        self._engine: InferenceEngine | None = engine
        self._placement: Placement = placement
        self._on_status = on_status
        self._clock = clock
        self._memory_probe = memory_probe or (lambda: process_memory(None))
        self._memory_check_s = memory_check_s
        self._retry_s = retry_s
        self._max_batch = engine.max_batch
        self._providers = engine.providers
        self._pending: Future[_Built | None] | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._builder = ThreadPoolExecutor(1, thread_name_prefix=f"beltsight-rebuild-{info.size}")
        now = clock.monotonic()
        self._built_at = now
        self._frames = 0
        self._retry_at = 0.0
        self._next_memory_check = now + memory_check_s
        self._baseline: MemorySample | None = None  # read and written in the builder thread only
        if rebuild.max_growth_mb > 0:
            self._builder.submit(self._resample_baseline)

    @property
    def max_batch(self) -> int:
        return self._max_batch

    @property
    def providers(self) -> tuple[str, ...]:
        return self._providers

    def run(self, batch: HostArray) -> HostArray:
        """Swap in a finished rebuild, infer on the serving session, maybe start a rebuild."""
        with self._lock:
            self._collect()
            if self._engine is None:
                raise InferenceError(f"model {self.info.name}: engine is closed")
            out = self._engine.run(batch)
            self._schedule(int(batch.shape[0]))
        return out

    @property
    def on_cuda(self) -> bool:
        """Whether the serving session can take a device batch (`run_device`)."""
        engine: object = self._engine  # any engine; a DeviceEngine can say
        return isinstance(engine, DeviceEngine) and engine.on_cuda

    @property
    def cuda_stream(self) -> Any | None:
        engine: object = self._engine
        return engine.cuda_stream if isinstance(engine, DeviceEngine) else None

    def run_device(self, batch: Any, *, synchronize: bool = True) -> Any:
        """`run` for a batch on the device (the serving session's `run_device`), same swaps and triggers."""
        with self._lock:
            self._collect()
            engine: object = self._engine
            if engine is None:
                raise InferenceError(f"model {self.info.name}: engine is closed")
            if not isinstance(engine, DeviceEngine) or not engine.on_cuda:
                raise InferenceError(f"model {self.info.name}: the serving session is not on CUDA")
            out = engine.run_device(batch, synchronize=synchronize)
            self._schedule(int(batch.shape[0]))
        return out

    def close(self) -> None:
        """Close the serving session, and a rebuild still in flight once it finishes."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            engine, pending = self._engine, self._pending
            self._engine = self._pending = None
        self._builder.shutdown(wait=False)  # queued closes still run; a queued build sees _closed
        if engine is not None:
            engine.close()
        if pending is not None:
            pending.add_done_callback(close_built)

    def wait_builds(self, timeout_s: float | None = None) -> None:
        """Block until every build or close queued so far has finished (tests, shutdown)."""
        try:
            self._builder.submit(lambda: None).result(timeout_s)
        except RuntimeError:
            return  # closed: nothing more will be queued

    # -- worker thread, under the lock ------------------------------------------------------------
    def _collect(self) -> None:
        fut = self._pending
        if fut is None or not fut.done() or self._engine is None:
            return
        self._pending = None
        now = self._clock.monotonic()
        try:
            built = fut.result()
        except Exception as exc:  # any build failure: keep serving, try again later
            self._retry_at = now + self._retry_s
            log.error("session_rebuild_failed", model=self.info.name, error=str(exc), retry_in_s=self._retry_s)
            return
        if built is None:
            return  # a memory check that found no growth
        old, self._engine = self._engine, built.engine
        frames, age_s = self._frames, now - self._built_at
        self._frames, self._built_at, self._providers = 0, now, built.engine.providers
        self._builder.submit(self._close_engine, old)
        log.info(
            "session_rebuilt",
            model=self.info.name,
            reason=built.reason,
            placement=self._placement,
            build_ms=round(built.build_s * 1000, 1),
            frames=frames,
            age_s=round(age_s, 1),
            growth_mb=None if built.growth_mb is None else round(built.growth_mb, 1),
        )
        detail = f"model {self.info.name} ({self._placement}): {built.reason}, built in {built.build_s:.2f} s"
        emit_status(self._on_status, self._clock, "session_rebuilt", detail)

    def _schedule(self, frames: int) -> None:
        self._frames += frames
        now = self._clock.monotonic()
        if self._pending is not None or now < self._retry_at:
            return
        reason = self._due(now)
        if reason is not None:
            self._pending = self._builder.submit(self._build, f"rebuild_{reason}")
        elif self._rebuild.max_growth_mb > 0 and now >= self._next_memory_check:
            self._next_memory_check = now + self._memory_check_s
            self._pending = self._builder.submit(self._check_memory)

    def _due(self, now: float) -> str | None:
        if self._rebuild.every_frames and self._frames >= self._rebuild.every_frames:
            return "frames"
        if self._rebuild.every_s and now - self._built_at >= self._rebuild.every_s:
            return "interval"
        return None

    # -- builder thread ------------------------------------------------------------------------------
    def _build(self, reason: str) -> _Built:
        if self._closed:
            raise InferenceError(f"model {self.info.name}: engine is closed")
        started = time.perf_counter()
        engine = self._factory.build(self.info, self._placement, reason)
        built = _Built(engine, reason, time.perf_counter() - started)
        self._resample_baseline()
        return built

    def _check_memory(self) -> _Built | None:
        sample = self._memory_probe()
        if self._baseline is None:
            self._baseline = sample
            return None
        growth = sample.growth_mb(self._baseline)
        if growth is None or growth <= self._rebuild.max_growth_mb:
            return None
        log.warning("memory_growth", model=self.info.name, growth_mb=round(growth, 1), sample=str(sample))
        return replace(self._build("rebuild_memory"), growth_mb=growth)

    def _resample_baseline(self) -> None:
        if self._rebuild.max_growth_mb > 0:
            self._baseline = self._memory_probe()

    def _close_engine(self, engine: InferenceEngine) -> None:
        try:
            engine.close()
        except Exception as exc:  # a session that fails to close must not stop later builds
            log.error("session_close_failed", model=self.info.name, error=str(exc))
        release_free_memory()
        self._resample_baseline()
