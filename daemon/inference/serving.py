"""A lane worker's engine (`ServingEngine`): one model size kept serving through GPU faults and
rebuilt on schedule, with the policies that decide it as parts (`daemon.inference.policies`:
a `RebuildPolicy` per session role, one `BreakerPolicy`). Sessions are built and closed in ONE
builder thread per serving engine; the worker thread picks finished builds up between batches,
so a swap never races a running batch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, cast

import structlog

from daemon.config.engine import EngineConfig
from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.core.memory import MemorySample, process_memory, release_free_memory
from daemon.core.metrics import Metrics
from daemon.core.status import StatusCallback, emit_status
from daemon.core.xp import to_host
from daemon.inference.engine import InferenceError
from daemon.inference.model_file import ModelInfo
from daemon.inference.placement import breaker_applies, memory_device
from daemon.inference.policies.breaker import BreakerPolicy, BreakerRejected
from daemon.inference.policies.rebuild import MEMORY_CHECK, RebuildPolicy
from daemon.inference.protocols import DeviceEngine, EngineBuilder, HostArray, InferenceEngine
from daemon.inference.providers import Placement

log = structlog.get_logger("beltsight.serving")


@dataclass(frozen=True, slots=True)
class _Built:
    engine: InferenceEngine
    reason: str
    build_s: float
    growth_mb: float | None = None


@dataclass(slots=True)
class _Role:
    """One session role: the session serving it, its rebuild policy, a rebuild in flight."""

    placement: Placement
    engine: InferenceEngine
    policy: RebuildPolicy
    pending: Future[_Built | None] | None = None


def close_built(future: Future[_Built | None]) -> None:
    """Done-callback after `close()`: a session whose build finishes late is closed, not leaked."""
    if future.cancelled() or future.exception() is not None:
        return
    built = future.result()
    if built is not None:
        built.engine.close()


def _host_batch(model: str, batch: Any) -> HostArray:
    """A device batch copied to the host for the CPU fallback (a GPU that just failed may not
    give it back: that batch is then lost, as InferenceError)."""
    try:
        return to_host(batch)
    except Exception as exc:
        raise InferenceError(f"model {model}: the batch could not be copied from the device: {exc}") from exc


class ServingEngine:
    """The engine of one lane worker: rebuilds (`engine.rebuild`) and a breaker (`engine.breaker`).

    Breaker (when enabled and neither the first configured provider nor the primary session's is
    the CPU, `daemon.inference.placement.breaker_applies`; otherwise a failed batch raises
    `InferenceError` and the stage drops it): host and device batches of the primary go through
    one breaker call. Every failed batch is retried at once on the CPU fallback, so no frame is
    lost. When the breaker opens the failed primary is closed (a GPU session that failed is not
    trusted) and batches go to the fallback; after `reset_timeout_s` a fresh primary is built
    and the first batch once it is ready is the probe. The fallback is built at construction,
    not when the breaker trips: a GPU fault then costs no gap, and a broken CPU path shows at
    startup (the price: idle host memory, ~170 MiB at 640, ~300 MiB at 800, max_batch 8).

    Rebuilds apply to whichever role serves, the fallback included while the breaker is open:
    the new session is built beside the serving one and swapped in before the next batch; the
    old one is closed in the builder thread. A failed rebuild is logged
    (`session_rebuild_failed`) and retried after `rebuild_retry_s`; each swap logs
    `session_rebuilt` and sends a StatusEvent. Builds are counted by the factory in
    `session_builds{model,reason}` (`rebuild_*`, `breaker_fallback`, `breaker_probe`). One
    builder thread serves both roles: a fallback rebuilt after its own failure waits for a
    rebuild of the primary already under way.

    Threads: `run`/`run_device` from one worker thread; `close` from any (waits for a running
    batch); builds and closes in this engine's builder thread.
    """

    def __init__(
        self,
        factory: EngineBuilder,
        info: ModelInfo,
        cfg: EngineConfig,
        primary: InferenceEngine,
        *,
        metrics: Metrics,
        on_status: StatusCallback,
        clock: Clock = SYSTEM_CLOCK,
        memory_probe: Callable[[], MemorySample] | None = None,
        memory_check_s: float = 5.0,
        rebuild_retry_s: float = 30.0,
    ) -> None:
        self.info = info
        self._factory = factory
        self._on_status = on_status
        self._clock = clock
        self._label = str(info.size)
        probe = memory_probe or partial(process_memory, memory_device(cfg, primary.providers))
        self._policy = partial(
            RebuildPolicy, cfg.rebuild, clock, probe, memory_check_s=memory_check_s, retry_s=rebuild_retry_s
        )
        self._retry_s = rebuild_retry_s
        self._max_batch = primary.max_batch
        self._last_providers = primary.providers
        self._lock = threading.Lock()
        self._closed = False
        self._builder = ThreadPoolExecutor(1, thread_name_prefix=f"beltsight-build-{info.size}")
        self._primary: _Role | None = self._new_role("configured", primary)
        self._fallback: _Role | None = None
        self._pending_fallback: Future[_Built | None] | None = None
        self._pending_probe: Future[_Built | None] | None = None
        self._fallback_retry_at = 0.0
        self._breaker: BreakerPolicy | None = None
        if breaker_applies(cfg, primary.providers):
            self._breaker = BreakerPolicy(
                cfg.breaker,
                clock,
                model=info.name,
                label=self._label,
                metrics=metrics,
                on_status=on_status,
                on_open=self._drop_primary,
                primary_provider=self._primary_provider,
            )
            self._pending_fallback = self._builder.submit(self._build, "cpu", "breaker_fallback")

    # -- the engine interface ----------------------------------------------------------------
    @property
    def max_batch(self) -> int:
        return self._max_batch

    @property
    def providers(self) -> tuple[str, ...]:
        """The providers of the session that served last (the fallback's while the breaker is open)."""
        return self._last_providers

    @property
    def breaker_state(self) -> str | None:
        """pybreaker's state name ("closed", "open", "half-open"), or None without a breaker."""
        return self._breaker.state if self._breaker is not None else None

    @property
    def on_cuda(self) -> bool:
        """Whether a batch on the device can go to the primary now: False while the breaker is open
        (the CPU fallback serves; the inference stage then takes its host path) or without a
        primary session on CUDA."""
        primary = self._primary
        if primary is None or (self._breaker is not None and self._breaker.is_open):
            return False
        engine = primary.engine
        return isinstance(engine, DeviceEngine) and engine.on_cuda

    @property
    def cuda_stream(self) -> Any | None:
        """The primary's CUDA stream (device batches are written on it), None without one."""
        engine = self._primary.engine if self._primary is not None else None
        return engine.cuda_stream if isinstance(engine, DeviceEngine) else None

    def run(self, batch: HostArray) -> HostArray:
        """Infer one host batch on the primary, or on the CPU fallback when the primary fails or the
        breaker is open. Raises InferenceError only when no session could serve the batch."""
        return cast(HostArray, self._serve(batch, device=False))

    def run_device(self, batch: Any, *, synchronize: bool = True) -> Any:
        """`run` for a batch already on the device: the primary's `run_device` (output stays on
        the device); a failed batch is retried at once on the CPU fallback (copied to the host;
        the output is then NumPy)."""
        return self._serve(batch, device=True, synchronize=synchronize)

    def close(self) -> None:
        """Close every session, including builds still in flight once they finish."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            roles = [r for r in (self._primary, self._fallback) if r is not None]
            pending = [self._pending_fallback, self._pending_probe, *(r.pending for r in roles)]
            self._primary = self._fallback = self._pending_fallback = self._pending_probe = None
        self._builder.shutdown(wait=False)  # queued closes still run; a queued build sees _closed
        for role in roles:
            role.engine.close()
        for future in pending:
            if future is not None:
                future.add_done_callback(close_built)

    def wait_builds(self, timeout_s: float | None = None) -> None:
        """Block until every build and close queued so far has finished (tests, shutdown)."""
        try:
            self._builder.submit(lambda: None).result(timeout_s)
        except RuntimeError:
            return  # closed: nothing more will be queued

    # -- serving (worker thread, under the lock) -----------------------------------------------
    def _serve(self, batch: Any, *, device: bool, synchronize: bool = True) -> Any:
        with self._lock:
            if self._closed:
                raise InferenceError(f"model {self.info.name}: engine is closed")
            self._collect()
            out, role = self._through_breaker(batch, device, synchronize)
            self._last_providers = role.engine.providers
            self._after_batch(role, int(batch.shape[0]))
        return out

    def _through_breaker(self, batch: Any, device: bool, synchronize: bool) -> tuple[Any, _Role]:
        """The primary through the one breaker call (host and device batches alike); a failed
        batch retried at once on the CPU fallback, on the host."""
        primary = self._primary
        run = partial(self._run_on, batch=batch, device=device, synchronize=synchronize)
        if self._breaker is None:
            if primary is None:
                raise InferenceError(f"model {self.info.name}: no session")
            return run(primary), primary
        if primary is not None:
            try:
                return self._breaker.call(run, primary), primary
            except (InferenceError, BreakerRejected) as exc:
                count, state = self._breaker.failures, self._breaker.state
                log.warning("primary_batch_failed", model=self.info.name, error=str(exc), failures=count, state=state)
        return self._run_fallback(_host_batch(self.info.name, batch) if device else batch)

    def _run_on(self, role: _Role, *, batch: Any, device: bool, synchronize: bool) -> Any:
        engine = role.engine
        if not device:
            return engine.run(batch)
        if not isinstance(engine, DeviceEngine) or not engine.on_cuda:
            raise InferenceError(f"model {self.info.name}: the serving session is not on CUDA")
        return engine.run_device(batch, synchronize=synchronize)

    def _run_fallback(self, batch: HostArray) -> tuple[HostArray, _Role]:
        fallback = self._fallback_role()
        try:
            out = fallback.engine.run(batch)
        except InferenceError as exc:
            log.error("fallback_batch_failed", model=self.info.name, error=str(exc))
            self._fallback = None
            self._retire(fallback)
            self._pending_fallback = self._builder.submit(self._build, "cpu", "breaker_fallback")
            raise
        return out, fallback

    def _fallback_role(self) -> _Role:
        if self._fallback is not None:
            return self._fallback
        pending = self._pending_fallback or self._builder.submit(self._build, "cpu", "breaker_fallback")
        self._pending_fallback = None
        try:
            built = pending.result()  # waits only while the build is still running
        except Exception as exc:
            raise InferenceError(f"model {self.info.name}: no CPU fallback session: {exc}") from exc
        assert built is not None  # a build, not a memory check
        self._fallback = self._new_role("cpu", built.engine)
        return self._fallback

    def _new_role(self, placement: Placement, engine: InferenceEngine) -> _Role:
        role = _Role(placement, engine, self._policy())
        self._builder.submit(role.policy.resample)
        return role

    def _retire(self, role: _Role) -> None:
        """A role out of service: its session closed in the builder thread, a rebuild in flight once done."""
        self._builder.submit(self._close_engine, role.engine, None)
        if role.pending is not None:
            role.pending.add_done_callback(close_built)

    # -- builds: started and picked up by the worker thread, between batches ----------------------
    def _collect(self) -> None:
        for role in (self._primary, self._fallback):
            if role is not None:
                self._collect_rebuild(role)
        fut = self._pending_fallback
        if fut is not None and fut.done():
            self._pending_fallback = None
            try:
                built = fut.result()
            except Exception as exc:  # any build failure: retried in the background later
                self._fallback_retry_at = self._clock.monotonic() + self._retry_s
                log.error("fallback_build_failed", model=self.info.name, error=str(exc))
            else:
                assert built is not None
                self._fallback = self._new_role("cpu", built.engine)
        probe = self._pending_probe
        if probe is not None and probe.done():
            self._pending_probe = None
            try:
                built = probe.result()
            except Exception as exc:
                log.error("breaker_probe_failed", model=self.info.name, stage="build", error=str(exc))
                if self._breaker is not None:
                    self._breaker.rearm()  # wait another reset_timeout_s
            else:
                assert built is not None
                self._primary = self._new_role("configured", built.engine)  # the next breaker call probes

    def _collect_rebuild(self, role: _Role) -> None:
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
        self._builder.submit(self._close_engine, old, role.policy)
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

    def _after_batch(self, role: _Role, frames: int) -> None:
        task = role.policy.after_batch(frames, busy=role.pending is not None)
        if task == MEMORY_CHECK:
            role.pending = self._builder.submit(self._check_memory, role)
        elif task is not None:
            role.pending = self._builder.submit(self._rebuild, role, task)
        breaker = self._breaker
        if breaker is None:
            return
        now = self._clock.monotonic()
        if self._fallback is None and self._pending_fallback is None and now >= self._fallback_retry_at:
            self._pending_fallback = self._builder.submit(self._build, "cpu", "breaker_fallback")
        if self._primary is None and self._pending_probe is None and breaker.probe_due():
            self._pending_probe = self._builder.submit(self._build, "configured", "breaker_probe")

    # -- the builder thread ----------------------------------------------------------------------
    def _build(self, placement: Placement, reason: str) -> _Built | None:
        if self._closed:
            raise InferenceError(f"model {self.info.name}: engine is closed")
        started = time.perf_counter()
        engine = self._factory.build(self.info, placement, reason)
        return _Built(engine, reason, time.perf_counter() - started)

    def _rebuild(self, role: _Role, reason: str) -> _Built | None:
        built = self._build(role.placement, reason)
        role.policy.resample()
        return built

    def _check_memory(self, role: _Role) -> _Built | None:
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

    # -- breaker transitions (worker thread, from inside the breaker call) -----------------------
    def _drop_primary(self) -> str:
        """The breaker opened: the failed primary out of service; where it ran."""
        failed, self._primary = self._primary, None
        if failed is None:
            return "the primary"
        self._retire(failed)  # closing a broken GPU session may be slow
        return failed.engine.providers[0]

    def _primary_provider(self) -> str:
        return self._primary.engine.providers[0] if self._primary is not None else "the primary"
