"""A lane worker's engine (`ServingEngine`): one model size kept serving through GPU faults and
rebuilt on schedule, with the policies that decide it as parts (`daemon.inference.policies`:
a `RebuildPolicy` per session role, one `BreakerPolicy`). Sessions are built, rebuilt and closed
in ONE builder thread per serving engine (`daemon.inference.session_builds`); the worker thread
picks finished builds up between batches, so a swap never races a running batch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from typing import Any, cast

import structlog

from daemon.config.engine import EngineConfig
from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.core.memory import MemorySample, process_memory
from daemon.core.metrics import Metrics
from daemon.core.status import StatusCallback
from daemon.core.xp import to_host
from daemon.inference.engine import InferenceError
from daemon.inference.model_file import ModelInfo
from daemon.inference.placement import breaker_applies, memory_device
from daemon.inference.policies.breaker import BreakerPolicy, BreakerRejected
from daemon.inference.policies.rebuild import RebuildPolicy
from daemon.inference.protocols import DeviceEngine, EngineBuilder, HostArray, InferenceEngine
from daemon.inference.providers import Placement
from daemon.inference.session_builds import Built, Role, SessionBuilds, close_built

log = structlog.get_logger("beltsight.serving")


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
        self._builds = SessionBuilds(factory, info, on_status=on_status, clock=clock)
        self._primary: Role | None = self._new_role("configured", primary)
        self._fallback: Role | None = None
        self._pending_fallback: Future[Built | None] | None = None
        self._pending_probe: Future[Built | None] | None = None
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
            self._pending_fallback = self._builds.build("cpu", "breaker_fallback")

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
            if self._builds.closed:
                return
            self._builds.closed = True
            roles = [r for r in (self._primary, self._fallback) if r is not None]
            pending = [self._pending_fallback, self._pending_probe, *(r.pending for r in roles)]
            self._primary = self._fallback = self._pending_fallback = self._pending_probe = None
        self._builds.shutdown()  # queued closes still run; a queued build sees closed
        for role in roles:
            role.engine.close()
        for future in pending:
            if future is not None:
                future.add_done_callback(close_built)

    def wait_builds(self, timeout_s: float | None = None) -> None:
        """Block until every build and close queued so far has finished (tests, shutdown)."""
        self._builds.wait(timeout_s)

    # -- serving (worker thread, under the lock) -----------------------------------------------
    def _serve(self, batch: Any, *, device: bool, synchronize: bool = True) -> Any:
        with self._lock:
            if self._builds.closed:
                raise InferenceError(f"model {self.info.name}: engine is closed")
            self._collect()
            out, role = self._through_breaker(batch, device, synchronize)
            self._last_providers = role.engine.providers
            self._after_batch(role, int(batch.shape[0]))
        return out

    def _through_breaker(self, batch: Any, device: bool, synchronize: bool) -> tuple[Any, Role]:
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

    def _run_on(self, role: Role, *, batch: Any, device: bool, synchronize: bool) -> Any:
        engine = role.engine
        if not device:
            return engine.run(batch)
        if not isinstance(engine, DeviceEngine) or not engine.on_cuda:
            raise InferenceError(f"model {self.info.name}: the serving session is not on CUDA")
        return engine.run_device(batch, synchronize=synchronize)

    def _run_fallback(self, batch: HostArray) -> tuple[HostArray, Role]:
        fallback = self._fallback_role()
        try:
            out = fallback.engine.run(batch)
        except InferenceError as exc:
            log.error("fallback_batch_failed", model=self.info.name, error=str(exc))
            self._fallback = None
            self._builds.retire(fallback)
            self._pending_fallback = self._builds.build("cpu", "breaker_fallback")
            raise
        return out, fallback

    def _fallback_role(self) -> Role:
        if self._fallback is not None:
            return self._fallback
        pending = self._pending_fallback or self._builds.build("cpu", "breaker_fallback")
        self._pending_fallback = None
        try:
            built = pending.result()  # waits only while the build is still running
        except Exception as exc:
            raise InferenceError(f"model {self.info.name}: no CPU fallback session: {exc}") from exc
        assert built is not None  # a build, not a memory check
        self._fallback = self._new_role("cpu", built.engine)
        return self._fallback

    def _new_role(self, placement: Placement, engine: InferenceEngine) -> Role:
        role = Role(placement, engine, self._policy())
        self._builds.resample(role.policy)
        return role

    # -- builds: started and picked up by the worker thread, between batches ----------------------
    def _collect(self) -> None:
        for role in (self._primary, self._fallback):
            if role is not None:
                self._builds.swap_finished(role)
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

    def _after_batch(self, role: Role, frames: int) -> None:
        self._builds.schedule(role, frames)
        breaker = self._breaker
        if breaker is None:
            return
        now = self._clock.monotonic()
        if self._fallback is None and self._pending_fallback is None and now >= self._fallback_retry_at:
            self._pending_fallback = self._builds.build("cpu", "breaker_fallback")
        if self._primary is None and self._pending_probe is None and breaker.probe_due():
            self._pending_probe = self._builds.build("configured", "breaker_probe")

    # -- breaker transitions (worker thread, from inside the breaker call) -----------------------
    def _drop_primary(self) -> str:
        """The breaker opened: the failed primary out of service; where it ran."""
        failed, self._primary = self._primary, None
        if failed is None:
            return "the primary"
        self._builds.retire(failed)  # closing a broken GPU session may be slow
        return failed.engine.providers[0]

    def _primary_provider(self) -> str:
        return self._primary.engine.providers[0] if self._primary is not None else "the primary"
