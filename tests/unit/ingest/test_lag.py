"""daemon.ingest.lag: a reader that keeps up, or catches up by itself, is never made to skip; one that
falls behind skips to a keyframe near the live edge, and its lag stays bounded; a camera clock's drift
or jump is not taken for a backlog for long."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from daemon.ingest.lag import BOUND_S, StreamLag

FPS = 15.0
GOP = 15  # a keyframe a second


def packets(seconds: float, *, start: int = 0) -> Iterator[tuple[int, float, bool]]:
    """(index, pts seconds, keyframe) of a camera's stream."""
    for i in range(start, start + round(seconds * FPS)):
        yield i, i / FPS, i % GOP == 0


def run(lag: StreamLag, arrivals: Iterator[tuple[float, float, bool]]) -> tuple[list[float], int, int]:
    """Feed (now, pts, keyframe); the lags seen while decoding, packets skipped and skips started."""
    lags, skipped, starts = [], 0, 0
    for now, pts, key in arrivals:
        verdict = lag.packet(pts, key, now)
        starts += verdict.started
        if verdict.decode:
            lags.append(lag.lag_s)
        else:
            skipped += 1
    return lags, skipped, starts


def test_a_reader_that_keeps_up_never_skips_through_jitter_and_clock_drift() -> None:
    """Ten hours at 15 fps with 80 ms of network jitter and a camera clock 100 ppm slow."""
    lag = StreamLag()
    jitter = [0.0, 0.08, 0.01, 0.05, 0.02, 0.07]
    arrivals = ((pts * (1 + 1e-4) + jitter[i % len(jitter)], pts, key) for i, pts, key in packets(36000))
    lags, skipped, starts = run(lag, arrivals)
    assert (skipped, starts) == (0, 0)
    assert max(lags) < 0.15


def test_a_reader_falling_behind_skips_to_the_live_edge_and_stays_bounded() -> None:
    """Decoding at 70 % of the stream's pace: without the skip the lag would grow to 18 s in a minute."""
    lag = StreamLag()
    now, behind = 0.0, []
    for _, pts, key in packets(60):
        # the next packet arrives when the stream sends it, or when the reader is back for it
        now = max(now, pts)
        verdict = lag.packet(pts, key, now)
        if verdict.decode:
            now += 1 / (0.7 * FPS)  # decoding this frame took longer than a frame interval
            behind.append(now - pts)
        else:
            now += 0.0005  # demuxing only: a skip reads the backlog at once
    assert lag.skipped > 0
    assert max(behind) < BOUND_S + 1.5 + 2 / FPS  # the bound, the second it must last, a frame or two
    assert behind[-1] < BOUND_S + 1.5


def test_a_reader_catching_up_by_itself_is_not_made_to_skip() -> None:
    """A reader held back for 2.5 s (a network stall, a busy core) that then decodes at 3 x the pace."""
    lag = StreamLag()
    now, skipped = 0.0, 0
    for _, pts, key in packets(30):
        now = max(now, pts, 10.0 if pts >= 7.5 else 0.0)  # nothing read from 7.5 s to 10 s
        verdict = lag.packet(pts, key, now)
        skipped += not verdict.decode
        now += 1 / (3 * FPS)
    assert skipped == 0
    assert lag.lag_s < 0.1


@pytest.mark.parametrize("jump_s", [-30.0, 5.0])
def test_a_camera_clock_that_jumps_costs_a_skip_of_at_most_two_keyframes(jump_s: float) -> None:
    """The stream's timestamps jump (a camera restarted its clock) while packets keep coming in time:
    not a backlog. A jump back reads as a lag; the second keyframe at the stream's pace ends the skip."""
    lag = StreamLag()
    arrivals = [(pts, pts, key) for _, pts, key in packets(10)]
    arrivals += [(10 + pts, 10 + pts + jump_s, key) for _, pts, key in packets(20)]
    _, skipped, starts = run(lag, iter(arrivals))
    assert starts <= 1
    assert skipped <= round((1 + 2) * FPS)  # the second it must last and two keyframe intervals at most
    assert not lag.skipping
    assert lag.lag_s < 0.1


def test_packets_without_a_time_are_decoded_unless_a_skip_runs() -> None:
    lag = StreamLag()
    assert lag.packet(None, False, 0.0).decode
    for i in range(int(4 * FPS)):  # decoding at half the pace
        if lag.packet(i / FPS, i % GOP == 0, 2 * i / FPS).started:
            break
    assert lag.skipping
    assert not lag.packet(None, False, 10.0).decode
    assert lag.packet(None, True, 10.0).decode
