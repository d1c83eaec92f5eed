"""A serving engine's sessions and their rebuilds (`SessionBuilds`): every session of one model size is built,
checked for memory growth and closed in ONE builder thread, off the worker thread; the roles those sessions
serve (`Role`: primary or CPU fallback, each with its `RebuildPolicy` and a build in flight).

The worker thread (`daemon.inference.serving.ServingEngine`) asks for rebuilds after each batch (`schedule`)
and swaps finished ones in between batches (`swap_finished`), so a swap never races a running batch.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace

import structlog

from daemon.core.clock import Clock
from daemon.core.memory import release_free_memory
from daemon.core.status import StatusCallback, emit_status
from daemon.inference.engine import InferenceError
from daemon.inference.model_file import ModelInfo
from daemon.inference.policies.rebuild import MEMORY_CHECK, RebuildPolicy
from daemon.inference.protocols import EngineBuilder, InferenceEngine
from daemon.inference.providers import Placement

log = structlog.get_logger("beltsight.serving")


@dataclass(frozen=True, slots=True)
class Built:
    """A finished build: the new session, why it was built, how long it took, the growth that caused it."""

    engine: InferenceEngine
    reason: str
    build_s: float
    growth_mb: float | None = None


@dataclass(slots=True)
class Role:
    """One session role: the session serving it, its rebuild policy, a rebuild in flight."""

    placement: Placement
    engine: InferenceEngine
    policy: RebuildPolicy
    pending: Future[Built | None] | None = None


def close_built(future: Future[Built | None]) -> None:
    """Done-callback after `close()`: a session whose build finishes late is closed, not leaked."""
    if future.cancelled() or future.exception() is not None:
        return
    built = future.result()
    if built is not None:
        built.engine.close()


class SessionBuilds:
    """The one builder thread of one model size's serving engine. Each method queues its work and returns
    at once; a build's future holds `Built` (None: a memory check that found no growth)."""

    def __init__(self, factory: EngineBuilder, info: ModelInfo, *, on_status: StatusCallback, clock: Clock) -> None:
        self.info = info
        self._factory = factory
        self._on_status = on_status
        self._clock = clock
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"beltsight-build-{info.size}")
        self.closed = False  # set by the serving engine's close(): a queued build then fails, builds nothing

    def build(self, placement: Placement, reason: str) -> Future[Built | None]:
        """A new session for ``placement`` (`session_builds{reason}` counts it in the factory)."""
        return self._pool.submit(self._build, placement, reason)

    def rebuild(self, role: Role, reason: str) -> Future[Built | None]:
        """A new session for ``role``, beside the serving one; its policy resampled after the build."""
        return self._pool.submit(self._rebuild, role, reason)

    def check_memory(self, role: Role) -> Future[Built | None]:
        """``role`` rebuilt if its policy finds the process memory grown (`memory_growth`), else None."""
        return self._pool.submit(self._check_memory, role)

    def close(self, engine: InferenceEngine, policy: RebuildPolicy | None = None) -> None:
        """``engine`` closed (a failure logged, never raised), free memory released, ``policy`` resampled."""
        self._pool.submit(self._close_engine, engine, policy)

    def resample(self, policy: RebuildPolicy) -> None:
        """``policy``'s memory baseline taken in this thread (after the builds queued before it)."""
        self._pool.submit(policy.resample)

    def retire(self, role: Role) -> None:
        """A role out of service: its session closed in the builder thread, a rebuild in flight once done."""
        self.close(role.engine)
        if role.pending is not None:
            role.pending.add_done_callback(close_built)

    def schedule(self, role: Role, frames: int) -> None:
        """(Worker thread, after a batch of ``frames``.) The rebuild or memory check ``role``'s policy asks
        for, queued."""
        task = role.policy.after_batch(frames, busy=role.pending is not None)
        if task == MEMORY_CHECK:
            role.pending = self.check_memory(role)
        elif task is not None:
            role.pending = self.rebuild(role, task)

    def swap_finished(self, role: Role) -> None:
        """(Worker thread, between batches.) A finished rebuild of ``role`` swapped in, the old session
        closed here (`session_rebuilt`, a StatusEvent); a failed one logged and retried later by the policy."""
        fut = role.pending
        if fut is None or not fut.done():
            return
        role.pending = None
        try:
            built = fut.result()
        except Exception as exc:  # any build failure: keep serving, try again later
            role.policy.failed()
            retry_s = role.policy.retry_s
            log.error("session_rebuild_failed", model=self.info.name, error=str(exc), retry_in_s=retry_s)
            return
        if built is None:
            return  # a memory check that found no growth
        old, role.engine = role.engine, built.engine
        frames, age_s = role.policy.swapped()
        self.close(old, role.policy)
        log.info(
            "session_rebuilt",
            model=self.info.name,
            reason=built.reason,
            placement=role.placement,
            build_ms=round(built.build_s * 1000, 1),
            frames=frames,
            age_s=round(age_s, 1),
            growth_mb=None if built.growth_mb is None else round(built.growth_mb, 1),
        )
        detail = f"model {self.info.name} ({role.placement}): {built.reason}, built in {built.build_s:.2f} s"
        emit_status(self._on_status, self._clock, "session_rebuilt", detail)

    def shutdown(self) -> None:
        """No new work; what is queued still runs (queued closes do, a queued build sees `closed`)."""
        self._pool.shutdown(wait=False)

    def wait(self, timeout_s: float | None = None) -> None:
        """Block until every build and close queued so far has finished (tests, shutdown)."""
        try:
            self._pool.submit(lambda: None).result(timeout_s)
        except RuntimeError:
            return  # shut down: nothing more will be queued

    # -- in the builder thread ---------------------------------------------------------------------
    def _build(self, placement: Placement, reason: str) -> Built | None:
        if self.closed:
            raise InferenceError(f"model {self.info.name}: engine is closed")
        started = time.perf_counter()
        engine = self._factory.build(self.info, placement, reason)
        return Built(engine, reason, time.perf_counter() - started)

    def _rebuild(self, role: Role, reason: str) -> Built | None:
        built = self._build(role.placement, reason)
        role.policy.resample()
        return built

    def _check_memory(self, role: Role) -> Built | None:
        grown = role.policy.grown()
        if grown is None:
            return None
        growth, sample = grown
        log.warning("memory_growth", model=self.info.name, growth_mb=round(growth, 1), sample=str(sample))
        built = self._rebuild(role, "rebuild_memory")
        return replace(built, growth_mb=growth) if built is not None else None

    def _close_engine(self, engine: InferenceEngine, policy: RebuildPolicy | None) -> None:
        try:
            engine.close()
        except Exception as exc:  # a session that fails to close must not stop later builds
            log.error("session_close_failed", model=self.info.name, error=str(exc))
        release_free_memory()
        if policy is not None:
            policy.resample()
