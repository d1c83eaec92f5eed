"""Summarising a run of repeated failures in the log (a camera that stays down for hours).

A reconnect loop logs the first failure, each change of reason, each new backoff step (the delay's
ceiling doubles until the cap), and then one line every `every_s` while it stays at the cap; the line
carries how many attempts were not logged since the previous one. A success ends the run.
"""

from __future__ import annotations

from daemon.core.clock import SYSTEM_CLOCK, Clock

SUMMARY_INTERVAL_S = 300.0
"""At the backoff cap a still-failing connection logs at most once per this many seconds."""


class RepeatSummary:
    """Not thread-safe: one per reconnect loop (a camera thread, the Redis sink)."""

    def __init__(self, every_s: float = SUMMARY_INTERVAL_S, clock: Clock = SYSTEM_CLOCK) -> None:
        self.every_s = every_s
        self._clock = clock
        self._reason: str | None = None
        self._step: float | None = None
        self._logged_at = 0.0
        self._suppressed = 0

    @property
    def quiet(self) -> bool:
        """True when the last failure was not logged (so the next attempt need not announce itself)."""
        return self._suppressed > 0

    def failed(self, reason: str, step_s: float) -> int | None:
        """Record one failure with its backoff ceiling; the count of attempts left out since the last
        logged one when this one should be logged, None when it should not."""
        now = self._clock.monotonic()
        if reason == self._reason and step_s == self._step and now - self._logged_at < self.every_s:
            self._suppressed += 1
            return None
        suppressed, self._suppressed = self._suppressed, 0
        self._reason, self._step, self._logged_at = reason, step_s, now
        return suppressed

    def succeeded(self) -> None:
        self._reason = self._step = None
        self._suppressed = 0
