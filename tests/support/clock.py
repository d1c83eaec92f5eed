"""A clock the test moves by hand, for anything that takes a `daemon.core.clock.Clock`."""

from __future__ import annotations


class FakeClock:
    """`monotonic()` and `time()` both read `now`, which the test sets or advances."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now
