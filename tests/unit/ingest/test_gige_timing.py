"""A GigE frame's seq (block ids, with gaps and the 16-bit wrap) and captured_ms (camera clock on the host's)."""

from __future__ import annotations

from daemon.ingest.gige.timing import WINDOW, CameraClock, FrameIds


def steps(ids: list[int]) -> list[int]:
    frame_ids = FrameIds()
    return [frame_ids.step(i) for i in ids]


def test_consecutive_ids_step_by_one_and_a_gap_by_its_size() -> None:
    assert steps([7, 8, 9, 12, 13]) == [0, 1, 1, 3, 1]


def test_16_bit_ids_wrap_past_65535_to_1() -> None:
    assert steps([65534, 65535, 1, 2]) == [0, 1, 1, 1]
    assert steps([65534, 2]) == [0, 3]  # 65535 and 1 lost


def test_64_bit_ids_do_not_wrap_and_a_restarted_count_is_the_next_frame() -> None:
    assert steps([70000, 70001, 70003]) == [0, 1, 2]
    assert steps([500, 501, 3, 4]) == [0, 1, 1, 1]


MS = 1_000_000


def test_camera_time_is_moved_onto_the_host_clock_by_the_least_delayed_frame() -> None:
    clock = CameraClock()
    boot = 1_700_000_000_000 * MS  # the host's wall clock when the camera's counter was 0
    delays_ms = [9, 4, 12, 4, 30]  # transfer delays: the smallest is the floor
    out = [clock.captured_ms(k * 40 * MS, boot + k * 40 * MS + d * MS) for k, d in enumerate(delays_ms)]
    assert out[1:] == [1_700_000_000_000 + k * 40 + 4 for k in range(1, 5)]  # spacing is the camera's
    assert out[0] == 1_700_000_000_000 + 9  # before a better frame came


def test_captured_ms_never_goes_back() -> None:
    clock = CameraClock()
    first = clock.captured_ms(0, 5_000 * MS)  # no camera timestamp: the arrival time
    assert first == 5_000
    assert clock.captured_ms(0, 4_000 * MS) == 5_001


def test_the_offset_follows_a_host_clock_step_within_the_window() -> None:
    clock = CameraClock()
    for k in range(10):
        clock.captured_ms(k * MS * 10, 1_000_000 * MS + k * MS * 10)
    jump = 3_000 * MS  # the host clock stepped forward 3 s
    out = [clock.captured_ms(k * MS * 10, 1_000_000 * MS + jump + k * MS * 10) for k in range(10, 10 + WINDOW + 1)]
    assert out[-1] == 1_000_000 + 3_000 + (10 + WINDOW) * 10
