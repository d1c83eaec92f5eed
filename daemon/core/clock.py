"""The one clock interface: what every component that reads time takes, so tests can fake it.

`Clock` has the two readings the daemon uses: `monotonic()` for ages, deadlines and latency,
`time()` (Unix seconds) for wall-clock stamps. The `time` module satisfies it; `SYSTEM_CLOCK`
is the real clock as an object, the default everywhere one is injected.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Monotonic and wall-clock seconds (the `time` module satisfies it)."""

    def monotonic(self) -> float: ...

    def time(self) -> float: ...


class SystemClock:
    """The real clocks: `time.monotonic` and `time.time`."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()


SYSTEM_CLOCK: Clock = SystemClock()


def time_ms(clock: Clock) -> int:
    """The clock's wall-clock reading in whole Unix milliseconds."""
    return int(clock.time() * 1000)


__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock", "time_ms"]
