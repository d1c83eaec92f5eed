"""At most one log line per interval: the one helper for every "don't flood the journal" rule.

A disk that stays full, a buffer that keeps overflowing, a flood of refused connections: each
would write a line per occurrence. `RateLimited` lets the first occurrence through, holds the
rest back for `interval_s`, and tells the next line it lets through how many it held back, so
the log stays short and still counts everything. Keys (a camera, a stream key and its cause)
are limited independently; `None` is the single key of a one-kind limiter.
"""

from __future__ import annotations

from collections.abc import Hashable

from daemon.core.clock import SYSTEM_CLOCK, Clock


class RateLimited:
    """Not thread-safe: one per component that logs (each thread or loop owns its own)."""

    def __init__(self, interval_s: float, clock: Clock = SYSTEM_CLOCK) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._logged_at: dict[Hashable, float] = {}
        self._held: dict[Hashable, int] = {}

    def allow(self, key: Hashable = None) -> int | None:
        """Record one occurrence for `key`. When a line may be written now, how many occurrences
        were held back since the previous line for that key (0 for the first); None when this
        one is held back (counted towards the next line)."""
        now = self._clock.monotonic()
        last = self._logged_at.get(key)
        if last is not None and now - last < self.interval_s:
            self._held[key] = self._held.get(key, 0) + 1
            return None
        self._logged_at[key] = now
        return self._held.pop(key, 0)

    def held(self, key: Hashable = None) -> int:
        """Occurrences held back for `key` since its last line."""
        return self._held.get(key, 0)

    def reset(self, key: Hashable = None) -> None:
        """Forget `key` (the condition ended): its next occurrence is logged at once."""
        self._logged_at.pop(key, None)
        self._held.pop(key, None)


__all__ = ["RateLimited"]
