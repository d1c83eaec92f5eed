"""Summarising a run of repeated failures in the log (a camera that stays down for hours).

A reconnect loop logs the first failure, each change of reason, each new backoff step (the delay's
ceiling doubles until the cap), and then one line every `every_s` while it stays at the cap; the line
carries how many attempts were not logged since the previous one. A success ends the run.
"""

from __future__ import annotations

from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.core.ratelimit import RateLimited

SUMMARY_INTERVAL_S = 300.0
"""At the backoff cap a still-failing connection logs at most once per this many seconds."""


class RepeatSummary:
    """Not thread-safe: one per reconnect loop (a camera thread, the Redis sink).

    `RateLimited` with one rule added: a failure unlike the previous one (another reason, another
    backoff step) is logged at once, carrying the count held back under the previous one."""

    def __init__(self, every_s: float = SUMMARY_INTERVAL_S, clock: Clock = SYSTEM_CLOCK) -> None:
        self.every_s = every_s
        self._limit = RateLimited(every_s, clock)
        self._failure: tuple[str, float] | None = None

    @property
    def quiet(self) -> bool:
        """True when the last failure was not logged (so the next attempt need not announce itself)."""
        return self._limit.held() > 0

    def failed(self, reason: str, step_s: float) -> int | None:
        """Record one failure with its backoff ceiling; the count of attempts left out since the last
        logged one when this one should be logged, None when it should not."""
        carried = 0
        if (reason, step_s) != self._failure:
            carried = self._limit.held()
            self._limit.reset()
            self._failure = (reason, step_s)
        held = self._limit.allow()
        return None if held is None else carried + held

    def succeeded(self) -> None:
        self._failure = None
        self._limit.reset()
