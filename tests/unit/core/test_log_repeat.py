"""A failure that repeats is logged per reason and backoff step, then once per interval at the cap."""

from __future__ import annotations

from daemon.core.backoff import Backoff
from daemon.core.log_repeat import RepeatSummary
from tests.support.clock import FakeClock


def test_each_backoff_step_is_logged_then_one_line_per_interval_at_the_cap() -> None:
    clock = FakeClock()
    summary = RepeatSummary(every_s=60.0, clock=clock)
    backoff = Backoff(base_s=0.5, cap_s=8.0, rand=lambda: 1.0, clock=clock)
    logged: list[tuple[int, int]] = []  # (attempt, suppressed)
    for attempt in range(1, 101):
        step = backoff.ceiling_s()
        clock.now += backoff.failed()
        suppressed = summary.failed("connection refused", step)
        if suppressed is not None:
            logged.append((attempt, suppressed))
    # steps 0.5, 1, 2, 4, 8: five lines; then at the 8 s cap one line per 60 s (every 8th attempt)
    assert [a for a, _ in logged[:5]] == [1, 2, 3, 4, 5]
    assert all(s == 0 for _, s in logged[:5])
    later = logged[5:]
    assert later and all(s == 7 for _, s in later)  # 8 attempts x 8 s = 64 s >= 60 s
    assert len(logged) == 5 + (100 - 5) // 8
    assert summary.quiet  # the last attempt was not logged


def test_a_new_reason_or_a_success_logs_at_once() -> None:
    summary = RepeatSummary(every_s=1e9, clock=FakeClock())
    assert summary.failed("refused", 30.0) == 0
    assert summary.failed("refused", 30.0) is None
    assert summary.failed("refused", 30.0) is None
    assert summary.failed("401 unauthorized", 30.0) == 2
    summary.succeeded()
    assert not summary.quiet
    assert summary.failed("401 unauthorized", 30.0) == 0
