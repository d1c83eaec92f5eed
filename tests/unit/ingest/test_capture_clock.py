"""A frame's capture instant from its source's clock (RTSP presentation time, GigE Vision ticks) on the host's."""

from __future__ import annotations

import itertools
import random

import structlog.testing

from daemon.ingest.capture_clock import MAX_BEHIND_NS, MIN_STEP_NS, UNTRUSTED_AFTER, WINDOW, CaptureClock

MS = 1_000_000


def test_source_time_is_moved_onto_the_host_clock_by_the_least_delayed_frame() -> None:
    clock = CaptureClock("cam")
    boot = 1_700_000_000_000 * MS  # the host's clock when the source's was 0
    delays_ms = [9, 4, 12, 4, 30]  # transfer delays: the smallest is the floor
    out = [clock.capture_ns(k * 40 * MS, boot + k * 40 * MS + d * MS) // MS for k, d in enumerate(delays_ms)]
    assert out[1:] == [1_700_000_000_000 + k * 40 + 4 for k in range(1, 5)]  # spacing is the source's
    assert out[0] == 1_700_000_000_000 + 9  # before a better frame came


def test_a_host_held_back_keeps_the_sources_spacing() -> None:
    """A decoder starved by a busy host: arrivals late by up to 150 ms, each stamp late only by the floor so far."""
    rng = random.Random(7)
    clock = CaptureClock("cam")
    host = 50_000 * MS
    delays = [rng.randrange(150 * MS) for _ in range(100)]
    stamps = [clock.capture_ns(k * 200 * MS, host + k * 200 * MS + d) for k, d in enumerate(delays)]
    assert [s - (host + k * 200 * MS) for k, s in enumerate(stamps)] == [min(delays[: k + 1]) for k in range(100)]
    spacing = [b - a for a, b in itertools.pairwise(stamps[20:])]
    assert max(abs(step - 200 * MS) for step in spacing) < 10 * MS  # the arrivals' own: up to 150 ms off


def test_no_timestamp_is_the_arrival_and_the_result_never_goes_back() -> None:
    clock = CaptureClock("cam")
    assert clock.capture_ns(None, 5_000 * MS) == 5_000 * MS
    assert clock.capture_ns(None, 4_000 * MS) == 5_000 * MS + MIN_STEP_NS
    assert clock.capture_ns(0, 5_000 * MS) == 5_000 * MS + 2 * MIN_STEP_NS  # 0 is a time (a stream's first)


def test_the_offset_follows_a_host_clock_step_within_the_window() -> None:
    clock = CaptureClock("cam")
    for k in range(10):
        clock.capture_ns(k * MS * 10, 1_000_000 * MS + k * MS * 10)
    jump = 3_000 * MS  # the host clock stepped forward 3 s
    out = [clock.capture_ns(k * MS * 10, 1_000_000 * MS + jump + k * MS * 10) for k in range(10, 10 + WINDOW + 1)]
    assert out[-1] // MS == 1_000_000 + 3_000 + (10 + WINDOW) * 10


def test_a_source_clock_that_goes_back_starts_the_window_again() -> None:
    """A camera that restarted its clock: the old offset would put its frames hours in the past."""
    clock = CaptureClock("cam")
    host = 7_200_000 * MS
    for k in range(20):
        clock.capture_ns(3_600_000 * MS + k * 40 * MS, host + k * 40 * MS + 5 * MS)
    arrival = host + 20 * 40 * MS + 5 * MS
    assert clock.capture_ns(0, arrival) == arrival  # measured again: its own arrival is the floor so far
    assert clock.capture_ns(40 * MS, arrival + 43 * MS) == arrival + 40 * MS


def test_a_source_clock_that_jumps_forward_takes_the_new_offset_at_once() -> None:
    clock = CaptureClock("cam")
    for k in range(20):
        clock.capture_ns(k * 40 * MS, 1_000 * MS + k * 40 * MS)
    arrival = 1_000 * MS + 20 * 40 * MS
    assert clock.capture_ns(3_600_000 * MS, arrival) == arrival  # never later than its arrival


def test_a_drifting_source_clock_is_followed_within_the_window() -> None:
    """A source clock 0.1 % slow: its offset grows, and the window's minimum rises with it."""
    clock = CaptureClock("cam")
    out = [clock.capture_ns(k * 40 * MS, k * 40_040_000) for k in range(3 * WINDOW)]
    lag = [k * 40_040_000 - s for k, s in enumerate(out)]
    assert max(lag[2 * WINDOW :]) <= WINDOW * 40_000 + MS


def test_a_network_stall_restarts_the_window_once_and_the_clock_stays_trusted() -> None:
    """A 3 s stall, then the held frames in a burst: they are that late; the live ones after it are not."""
    clock = CaptureClock("cam")
    for k in range(50):
        clock.capture_ns(k * 40 * MS, 1_000 * MS + k * 40 * MS + 2 * MS)
    burst_at = 1_000 * MS + 50 * 40 * MS + 3_000 * MS
    held = [clock.capture_ns(k * 40 * MS, burst_at + (k - 50) * MS) for k in range(50, 125)]
    assert held[0] == burst_at  # a second behind the floor: measured again from here
    with structlog.testing.capture_logs() as logs:
        live = [clock.capture_ns(k * 40 * MS, 1_000 * MS + k * 40 * MS + 3 * MS) for k in range(125, 200)]
    assert clock.trusted
    assert not logs
    assert live[-1] == 1_000 * MS + 199 * 40 * MS + 3 * MS  # the live edge's floor again


def test_a_source_clock_that_runs_slow_is_not_trusted_after_repeated_restarts() -> None:
    """A camera that stamps 40 ms a frame while it sends one every 80 ms: its times fall behind without end."""
    clock = CaptureClock("cam")
    arrivals = [5_000 * MS + k * 80 * MS for k in range(200)]
    with structlog.testing.capture_logs() as logs:
        stamps = [clock.capture_ns(k * 40 * MS, arrival) for k, arrival in enumerate(arrivals)]
    assert not clock.trusted
    assert [(e["event"], e["camera"]) for e in logs] == [("camera_clock_untrusted", "cam")]  # once
    untrusted_from = next(k for k in range(200) if stamps[k:] == arrivals[k:])
    assert untrusted_from <= UNTRUSTED_AFTER * (MAX_BEHIND_NS // (40 * MS) + 2)
    assert all(arrival - stamp <= MAX_BEHIND_NS for stamp, arrival in zip(stamps, arrivals, strict=True))
