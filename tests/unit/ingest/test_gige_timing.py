"""A GigE frame's seq: block ids, with gaps and the 16-bit wrap."""

from __future__ import annotations

from daemon.ingest.gige.timing import FrameIds


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
