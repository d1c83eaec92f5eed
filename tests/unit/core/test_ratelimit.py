"""RateLimited: the first occurrence logs, the rest within the interval are held and counted."""

from __future__ import annotations

from daemon.core.ratelimit import RateLimited
from tests.support.clock import FakeClock


def test_first_logs_then_held_then_reports_how_many_were_held() -> None:
    clock = FakeClock()
    limit = RateLimited(60.0, clock)
    assert limit.allow() == 0
    clock.now += 10
    assert limit.allow() is None
    assert limit.allow() is None
    assert limit.held() == 2
    clock.now += 50
    assert limit.allow() == 2
    assert limit.held() == 0
    clock.now += 59.9
    assert limit.allow() is None


def test_keys_are_limited_independently_and_reset_forgets_one() -> None:
    clock = FakeClock()
    limit = RateLimited(60.0, clock)
    assert limit.allow(("cam-a", "WRONGTYPE")) == 0
    assert limit.allow(("cam-b", "WRONGTYPE")) == 0
    assert limit.allow(("cam-a", "WRONGTYPE")) is None
    assert limit.allow(("cam-a", "NOPERM")) == 0
    limit.reset(("cam-a", "WRONGTYPE"))
    assert limit.held(("cam-a", "WRONGTYPE")) == 0
    assert limit.allow(("cam-a", "WRONGTYPE")) == 0
