"""Keeping a lane's inference running: a circuit breaker with a CPU fallback, around rebuilt sessions.

`ResilientEngine` is what a lane's inference stage runs: the interface of an engine (`run`,
`max_batch`, `providers`, `close`), with the breaker policy here and the rebuild policy in
`daemon.inference.rebuild` (each session role, primary and fallback, is a `RebuildingEngine`). Sessions
are built and closed in background threads only; the lane's worker thread picks finished
builds up between batches, so a swap never races a running batch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pybreaker
import structlog

from daemon.config.engine import EngineConfig
from daemon.core.memory import MemorySample, process_memory
from daemon.core.metrics import Metrics
from daemon.core.xp import to_host
from daemon.inference.engine import InferenceError
from daemon.inference.model_file import ModelInfo
from daemon.inference.protocols import Clock, DeviceEngine, EngineBuilder, HostArray, InferenceEngine, StatusCallback
from daemon.inference.providers import ORT_PROVIDERS, Placement
from daemon.inference.rebuild import RebuildingEngine, close_built, emit_status

__all__ = ["Clock", "DeviceEngine", "EngineBuilder", "InferenceEngine", "ResilientEngine"]

log = structlog.get_logger("beltsight.resilience")


def _host_batch(model: str, batch: Any) -> HostArray:
    """A device batch copied to the host for the CPU fallback (a GPU that just failed may not
    give it back: that batch is then lost, as InferenceError)."""
    try:
        return to_host(batch)
    except Exception as exc:
        raise InferenceError(f"model {model}: the batch could not be copied from the device: {exc}") from exc


class _ClockStorage(pybreaker.CircuitMemoryStorage):
    """pybreaker's in-memory state, with the open time kept on our monotonic clock.

    pybreaker compares `datetime.now(UTC)` with `opened_at + reset_timeout`; reporting
    `opened_at` as "now minus the elapsed monotonic time" makes that comparison follow the
    injected clock (a fake one in tests) and immune to wall-clock steps (NTP on a plant box).
    """

    def __init__(self, monotonic: Callable[[], float]) -> None:
        super().__init__(pybreaker.STATE_CLOSED)
        self._monotonic = monotonic
        self.opened_mono: float | None = None

    @property
    def opened_at(self) -> datetime | None:
        if self.opened_mono is None:
            return None
        return datetime.now(UTC) - timedelta(seconds=self._monotonic() - self.opened_mono)

    @opened_at.setter
    def opened_at(self, _now: datetime) -> None:
        self.opened_mono = self._monotonic()


class _Transitions(pybreaker.CircuitBreakerListener):
    """Forwards pybreaker's callbacks (worker thread, inside `breaker.call`) to the engine."""

    def __init__(self, owner: ResilientEngine) -> None:
        self._owner = owner

    def failure(self, cb: pybreaker.CircuitBreaker, exc: BaseException) -> None:
        self._owner._last_error = str(exc)

    def state_change(self, cb: pybreaker.CircuitBreaker, old_state: Any, new_state: Any) -> None:
        self._owner._on_transition(cb, old_state.name if old_state is not None else "", new_state.name)


class ResilientEngine:
    """The engine of one model size, kept serving through GPU faults (and rebuilt on schedule).

    Breaker (when `engine.breaker.enabled` and neither the first configured provider nor the
    primary session's is the CPU; otherwise a failed batch raises `InferenceError` and the stage
    drops it): pybreaker counts consecutive failed batches of the primary. Every failed batch
    is retried at once on a CPU fallback session, so no frame is lost. After `fail_max`
    failures the breaker opens, the failed primary is closed (a GPU session that failed is not
    trusted) and batches go to the fallback. After `reset_timeout_s` a fresh primary is built
    in the background; the first batch after it is ready is the probe: success closes the
    breaker, a failed probe or build opens it for another `reset_timeout_s`. Transitions are
    logged (`breaker_open`, `breaker_half_open`, `breaker_closed`), set `breaker_open{model}`
    and send a StatusEvent.

    The fallback is built in the background at construction, not when the breaker trips: a GPU
    fault then costs no gap (a CPU build and warm-up takes 0.3-2 s, that many seconds of every
    camera's frames), and a broken CPU path shows at startup, not at the first GPU fault. The
    price is idle host memory (measured ~170 MiB at 640, ~300 MiB at 800, max_batch 8).

    Rebuilds (`engine.rebuild`) apply to whichever session serves, the fallback included
    while the breaker is open: see `RebuildingEngine`. Builds are counted by the factory in
    `session_builds{model,reason}` (`rebuild_*`, `breaker_fallback`, `breaker_probe`).

    Threads: `run` from one worker thread; `close` from any (waits for a running batch). One
    builder thread here builds the fallback and the probes; each role rebuilds in its own.
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
        clock: Clock = time,
        memory_probe: Callable[[], MemorySample] | None = None,
        memory_check_s: float = 5.0,
        rebuild_retry_s: float = 30.0,
    ) -> None:
        self.info = info
        self._factory = factory
        self._metrics = metrics
        self._on_status = on_status
        self._clock = clock
        self._label = str(info.size)
        on_cuda = ORT_PROVIDERS["cuda"] in primary.providers
        self._role = partial(
            RebuildingEngine,
            factory,
            info,
            cfg.rebuild,
            on_status=on_status,
            clock=clock,
            memory_probe=memory_probe or partial(process_memory, cfg.cuda.device_id if on_cuda else None),
            memory_check_s=memory_check_s,
            retry_s=rebuild_retry_s,
        )
        self._max_batch = primary.max_batch
        self._last_providers = primary.providers
        self._primary: RebuildingEngine | None = self._role(primary, placement="configured")
        self._fallback: RebuildingEngine | None = None
        self._pending_fallback: Future[RebuildingEngine] | None = None
        self._pending_probe: Future[RebuildingEngine] | None = None
        self._fallback_retry_at = 0.0
        self._retry_s = rebuild_retry_s
        self._lock = threading.Lock()
        self._closed = False
        self._builder = ThreadPoolExecutor(1, thread_name_prefix=f"beltsight-breaker-{info.size}")
        self._last_error = ""
        self._storage = _ClockStorage(clock.monotonic)
        self._breaker: pybreaker.CircuitBreaker | None = None
        # No breaker around a CPU primary: configured so, or ORT gave the session the CPU anyway.
        if cfg.breaker.enabled and cfg.providers[0] != "cpu" and primary.providers[:1] != (ORT_PROVIDERS["cpu"],):
            self._breaker = pybreaker.CircuitBreaker(
                fail_max=cfg.breaker.fail_max,
                reset_timeout=cfg.breaker.reset_timeout_s,
                listeners=[_Transitions(self)],
                state_storage=self._storage,
                name=f"model-{info.size}",
                throw_new_error_on_trip=False,
            )
            metrics.breaker_open.labels(model=self._label).set(0)
            self._pending_fallback = self._submit_build("cpu", "breaker_fallback")

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
        return self._breaker.current_state if self._breaker is not None else None

    def run(self, batch: HostArray) -> HostArray:
        """Infer one batch on the primary, or on the CPU fallback when the primary fails or the
        breaker is open. Raises InferenceError only when no session could serve the batch."""
        with self._lock:
            if self._closed:
                raise InferenceError(f"model {self.info.name}: engine is closed")
            self._collect_builds()
            out = self._serve(batch)
            self._schedule()
        return out

    @property
    def on_cuda(self) -> bool:
        """Whether a batch on the device can go to the primary now: False while the breaker is open
        (the CPU fallback serves; the inference stage then takes its host path) or without a
        primary session on CUDA."""
        primary = self._primary
        if primary is None or (self._breaker is not None and self._breaker.current_state == pybreaker.STATE_OPEN):
            return False
        return primary.on_cuda

    @property
    def cuda_stream(self) -> Any | None:
        """The primary's CUDA stream (device batches are written on it), None without one."""
        primary = self._primary
        return primary.cuda_stream if primary is not None else None

    def run_device(self, batch: Any, *, synchronize: bool = True) -> Any:
        """`run` for a batch already on the device: the primary's `run_device` (output stays on
        the device), failures counted by the breaker as `run` counts them; a failed batch is
        retried at once on the CPU fallback (copied to the host; the output is then NumPy)."""
        with self._lock:
            if self._closed:
                raise InferenceError(f"model {self.info.name}: engine is closed")
            self._collect_builds()
            out = self._serve_device(batch, synchronize)
            self._schedule()
        return out

    def close(self) -> None:
        """Close every session, including builds still in flight once they finish."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            engines = [e for e in (self._primary, self._fallback) if e is not None]
            pending = [f for f in (self._pending_fallback, self._pending_probe) if f is not None]
            self._primary = self._fallback = self._pending_fallback = self._pending_probe = None
        self._builder.shutdown(wait=False)  # queued closes still run; a queued build sees _closed
        for engine in engines:
            engine.close()
        for future in pending:
            future.add_done_callback(close_built)

    def wait_builds(self, timeout_s: float | None = None) -> None:
        """Block until the builds and closes queued so far, here and in each role, have finished."""
        try:
            self._builder.submit(lambda: None).result(timeout_s)
        except RuntimeError:
            return  # closed
        for role in (self._primary, self._fallback):
            if role is not None:
                role.wait_builds(timeout_s)

    # -- serving (worker thread, under the lock) -----------------------------------------------
    def _serve(self, batch: HostArray) -> HostArray:
        primary = self._primary
        if self._breaker is None:
            if primary is None:
                raise InferenceError(f"model {self.info.name}: no session")
            out = primary.run(batch)
            self._last_providers = primary.providers
            return out
        if primary is not None:
            try:
                out = self._breaker.call(primary.run, batch)
                self._last_providers = primary.providers
                return out
            except (InferenceError, pybreaker.CircuitBreakerError) as exc:
                count, state = self._breaker.fail_counter, self._breaker.current_state
                log.warning("primary_batch_failed", model=self.info.name, error=str(exc), failures=count, state=state)
        return self._run_fallback(batch)

    def _serve_device(self, batch: Any, synchronize: bool) -> Any:
        primary = self._primary
        if primary is None:
            if self._breaker is None:
                raise InferenceError(f"model {self.info.name}: no session")
            return self._run_fallback(_host_batch(self.info.name, batch))
        run = partial(primary.run_device, synchronize=synchronize)
        if self._breaker is None:
            out = run(batch)
            self._last_providers = primary.providers
            return out
        try:
            out = self._breaker.call(run, batch)
            self._last_providers = primary.providers
            return out
        except (InferenceError, pybreaker.CircuitBreakerError) as exc:
            count, state = self._breaker.fail_counter, self._breaker.current_state
            log.warning("primary_batch_failed", model=self.info.name, error=str(exc), failures=count, state=state)
        return self._run_fallback(_host_batch(self.info.name, batch))

    def _run_fallback(self, batch: HostArray) -> HostArray:
        fallback = self._fallback_engine()
        try:
            out = fallback.run(batch)
        except InferenceError as exc:
            log.error("fallback_batch_failed", model=self.info.name, error=str(exc))
            self._fallback = None
            self._builder.submit(fallback.close)
            self._pending_fallback = self._submit_build("cpu", "breaker_fallback")
            raise
        self._last_providers = fallback.providers
        return out

    def _fallback_engine(self) -> RebuildingEngine:
        if self._fallback is not None:
            return self._fallback
        pending = self._pending_fallback or self._submit_build("cpu", "breaker_fallback")
        self._pending_fallback = None
        try:
            self._fallback = pending.result()  # waits only while the build is still running
        except Exception as exc:
            raise InferenceError(f"model {self.info.name}: no CPU fallback session: {exc}") from exc
        return self._fallback

    # -- builds (started and collected by the worker thread, run in the builder thread) ---------
    def _submit_build(self, placement: Placement, reason: str) -> Future[RebuildingEngine]:
        return self._builder.submit(self._build, placement, reason)

    def _build(self, placement: Placement, reason: str) -> RebuildingEngine:
        if self._closed:
            raise InferenceError(f"model {self.info.name}: engine is closed")
        return self._role(self._factory.build(self.info, placement, reason), placement=placement)

    def _collect_builds(self) -> None:
        fut = self._pending_fallback
        if fut is not None and fut.done():
            self._pending_fallback = None
            try:
                self._fallback = fut.result()
            except Exception as exc:  # any build failure: retried in the background later
                self._fallback_retry_at = self._clock.monotonic() + self._retry_s
                log.error("fallback_build_failed", model=self.info.name, error=str(exc))
        probe = self._pending_probe
        if probe is not None and probe.done():
            self._pending_probe = None
            try:
                self._primary = probe.result()  # the next breaker call is the probe
            except Exception as exc:
                log.error("breaker_probe_failed", model=self.info.name, stage="build", error=str(exc))
                if self._breaker is not None:
                    self._breaker.open()  # wait another reset_timeout_s

    def _schedule(self) -> None:
        breaker = self._breaker
        if breaker is None:
            return
        now = self._clock.monotonic()
        if self._fallback is None and self._pending_fallback is None and now >= self._fallback_retry_at:
            self._pending_fallback = self._submit_build("cpu", "breaker_fallback")
        opened = self._storage.opened_mono
        if (
            breaker.current_state == pybreaker.STATE_OPEN
            and self._primary is None
            and self._pending_probe is None
            and opened is not None
            and now - opened >= breaker.reset_timeout
        ):
            self._pending_probe = self._submit_build("configured", "breaker_probe")

    # -- breaker transitions (worker thread, from inside pybreaker) ------------------------------
    def _on_transition(self, breaker: pybreaker.CircuitBreaker, old: str, new: str) -> None:
        if old == new:
            return  # a re-arm after a failed probe build
        if new == pybreaker.STATE_OPEN:
            self._breaker_opened(breaker, probe=old == pybreaker.STATE_HALF_OPEN)
        elif new == pybreaker.STATE_HALF_OPEN:
            log.info("breaker_half_open", model=self.info.name)
        else:
            self._breaker_reclosed()

    def _breaker_opened(self, breaker: pybreaker.CircuitBreaker, *, probe: bool) -> None:
        self._metrics.breaker_open.labels(model=self._label).set(1)
        failed, self._primary = self._primary, None
        if failed is not None:
            self._builder.submit(failed.close)  # closing a broken GPU session may be slow
        why = "the probe batch failed" if probe else f"{breaker.fail_max} consecutive batches failed"
        reset_s = breaker.reset_timeout
        log.error("breaker_open", model=self.info.name, reason=why, error=self._last_error, reset_timeout_s=reset_s)
        where = failed.providers[0] if failed is not None else "the primary"
        detail = f"{why} on {where} ({self._last_error}); serving on the CPU, next probe in {reset_s:g} s"
        emit_status(self._on_status, self._clock, "breaker_open", f"model {self.info.name}: {detail}")

    def _breaker_reclosed(self) -> None:
        self._metrics.breaker_open.labels(model=self._label).set(0)
        opened = self._storage.opened_mono
        open_s = self._clock.monotonic() - opened if opened is not None else 0.0
        provider = self._primary.providers[0] if self._primary is not None else "the primary"
        log.info("breaker_closed", model=self.info.name, provider=provider, open_s=round(open_s, 1))
        detail = f"model {self.info.name}: back on {provider} after {open_s:.0f} s on the CPU"
        emit_status(self._on_status, self._clock, "breaker_closed", detail)
