"""Capped exponential backoff with full jitter, for anything that reconnects (cameras, Redis).

Policy: after the n-th consecutive failure (n = 0, 1, ...) wait a uniform random time in
[0, min(cap_s, base_s * 2**n)) ("full jitter": many clients that failed together spread out
instead of retrying in lockstep). The failure count goes back to zero once a connection has
stayed healthy for `healthy_reset_s`, so one blip after a week of uptime retries quickly while
a flapping camera keeps backing off.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from daemon.core.clock import SYSTEM_CLOCK, Clock


class Backoff:
    """Delays between reconnect attempts; not thread-safe (one per connection owner)."""

    def __init__(
        self,
        base_s: float = 0.5,
        cap_s: float = 30.0,
        healthy_reset_s: float = 30.0,
        *,
        rand: Callable[[], float] = random.random,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if base_s <= 0 or cap_s < base_s or healthy_reset_s < 0:
            raise ValueError("need 0 < base_s <= cap_s and healthy_reset_s >= 0")
        self.base_s = base_s
        self.cap_s = cap_s
        self.healthy_reset_s = healthy_reset_s
        self._rand = rand
        self._clock = clock
        self._failures = 0
        self._healthy_since: float | None = None

    @property
    def failures(self) -> int:
        """Consecutive failures counted so far (what the next delay's ceiling depends on)."""
        return self._failures

    def ceiling_s(self) -> float:
        """The upper bound of the next delay."""
        # min() before the power would overflow after ~1000 failures; 2**64 is plenty of headroom.
        return min(self.cap_s, self.base_s * 2.0 ** min(self._failures, 64))

    def succeeded(self) -> None:
        """The connection is healthy from now on (call when it starts delivering)."""
        if self._healthy_since is None:
            self._healthy_since = self._clock.monotonic()

    def failed(self) -> float:
        """Record a failure; return how long to wait (seconds) before the next attempt."""
        if self._healthy_since is not None:
            if self._clock.monotonic() - self._healthy_since >= self.healthy_reset_s:
                self._failures = 0
            self._healthy_since = None
        delay = self._rand() * self.ceiling_s()
        self._failures += 1
        return delay

    def reset(self) -> None:
        self._failures = 0
        self._healthy_since = None
