"""When the primary provider is no longer trusted: pybreaker counting consecutive failed batches.

After `fail_max` failures the breaker opens (the serving engine then serves on its CPU fallback);
after `reset_timeout_s` a probe is due (`probe_due`), and the first batch through `call` once a
fresh primary is ready is the probe: success closes the breaker, failure opens it again.
`BreakerPolicy` decides, and reports each transition: logged (`breaker_open`, `breaker_half_open`,
`breaker_closed`), the `breaker_open{model}` gauge, a StatusEvent. It builds nothing: on opening
it asks the serving engine to drop the failed primary (`on_open`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pybreaker
import structlog

from daemon.config.engine import BreakerConfig
from daemon.core.clock import Clock
from daemon.core.metrics import Metrics
from daemon.core.status import StatusCallback, emit_status

log = structlog.get_logger("beltsight.resilience")

T = TypeVar("T")

OPEN, HALF_OPEN, CLOSED = pybreaker.STATE_OPEN, pybreaker.STATE_HALF_OPEN, pybreaker.STATE_CLOSED

BreakerRejected = pybreaker.CircuitBreakerError
"""What `call` raises without calling while the breaker is open."""


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
    """pybreaker's callbacks (worker thread, inside `call`) to the policy."""

    def __init__(self, owner: BreakerPolicy) -> None:
        self._owner = owner

    def failure(self, cb: pybreaker.CircuitBreaker, exc: BaseException) -> None:
        self._owner.last_error = str(exc)

    def state_change(self, cb: pybreaker.CircuitBreaker, old_state: Any, new_state: Any) -> None:
        self._owner.transition(old_state.name if old_state is not None else "", new_state.name)


class BreakerPolicy:
    """pybreaker around the primary session of one serving engine, on an injected clock.

    `on_open()` runs when the breaker opens: the serving engine drops its failed primary and
    says where it ran; `primary_provider()` names the primary that serves when it closes again.
    Both in the worker thread, inside `call`.
    """

    def __init__(
        self,
        cfg: BreakerConfig,
        clock: Clock,
        *,
        model: str,
        label: str,
        metrics: Metrics,
        on_status: StatusCallback,
        on_open: Callable[[], str],
        primary_provider: Callable[[], str],
    ) -> None:
        self._clock = clock
        self._on_open = on_open
        self._primary_provider = primary_provider
        self._metrics = metrics
        self._on_status = on_status
        self._model = model
        self._label = label
        self.last_error = ""
        self._storage = _ClockStorage(clock.monotonic)
        self._breaker = pybreaker.CircuitBreaker(
            fail_max=cfg.fail_max,
            reset_timeout=cfg.reset_timeout_s,
            listeners=[_Transitions(self)],
            state_storage=self._storage,
            name=f"model-{label}",
            throw_new_error_on_trip=False,
        )
        metrics.breaker_open.labels(model=label).set(0)

    @property
    def state(self) -> str:
        """pybreaker's state name: "closed", "open" or "half-open"."""
        return str(self._breaker.current_state)

    @property
    def is_open(self) -> bool:
        return self._breaker.current_state == OPEN

    @property
    def fail_max(self) -> int:
        return int(self._breaker.fail_max)

    @property
    def failures(self) -> int:
        return int(self._breaker.fail_counter)

    @property
    def reset_timeout_s(self) -> float:
        return float(self._breaker.reset_timeout)

    def call(self, run: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`run(*args)` counted by the breaker: its exception (or `BreakerRejected` while open) is raised."""
        result: T = self._breaker.call(run, *args, **kwargs)
        return result

    def probe_due(self) -> bool:
        """Open for `reset_timeout_s` already: time to build a fresh primary for the probe."""
        opened = self._storage.opened_mono
        return self.is_open and opened is not None and self._clock.monotonic() - opened >= self.reset_timeout_s

    def open_s(self) -> float:
        """Seconds since the breaker last opened (0 if it never did)."""
        opened = self._storage.opened_mono
        return self._clock.monotonic() - opened if opened is not None else 0.0

    def rearm(self) -> None:
        """Open for another `reset_timeout_s` (a probe build failed: nothing to probe with)."""
        self._breaker.open()

    def transition(self, old: str, new: str) -> None:
        if old == new:
            return  # a re-arm after a failed probe build
        if new == OPEN:
            self._opened(probe=old == HALF_OPEN)
        elif new == HALF_OPEN:
            log.info("breaker_half_open", model=self._model)
        else:
            self._closed()

    def _opened(self, *, probe: bool) -> None:
        self._metrics.breaker_open.labels(model=self._label).set(1)
        where = self._on_open()
        why = "the probe batch failed" if probe else f"{self.fail_max} consecutive batches failed"
        reset_s, error = self.reset_timeout_s, self.last_error
        log.error("breaker_open", model=self._model, reason=why, error=error, reset_timeout_s=reset_s)
        detail = f"{why} on {where} ({error}); serving on the CPU, next probe in {reset_s:g} s"
        emit_status(self._on_status, self._clock, "breaker_open", f"model {self._model}: {detail}")

    def _closed(self) -> None:
        self._metrics.breaker_open.labels(model=self._label).set(0)
        open_s = self.open_s()
        provider = self._primary_provider()
        log.info("breaker_closed", model=self._model, provider=provider, open_s=round(open_s, 1))
        detail = f"model {self._model}: back on {provider} after {open_s:.0f} s on the CPU"
        emit_status(self._on_status, self._clock, "breaker_closed", detail)
