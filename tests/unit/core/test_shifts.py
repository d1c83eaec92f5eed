"""Shifts and count buckets (daemon/core/shifts.py)."""

from __future__ import annotations

from datetime import datetime, time
from zoneinfo import ZoneInfo

import pytest

from daemon.core.shifts import bucket_start, parse_shifts, shift_index, shift_start

BERLIN = ZoneInfo("Europe/Berlin")


def ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def test_parse_sorts_and_refuses_bad_or_repeated_times() -> None:
    assert parse_shifts(["22:00", "06:00", "14:00"]) == (time(6), time(14), time(22))
    with pytest.raises(ValueError, match="'6:00'"):
        parse_shifts(["6:00"])
    with pytest.raises(ValueError, match="24:00"):
        parse_shifts(["24:00"])
    with pytest.raises(ValueError, match="twice"):
        parse_shifts(["06:00", "06:00"])


def test_the_night_shift_wraps_past_midnight() -> None:
    starts = parse_shifts(["06:00", "14:00", "22:00"])
    at = datetime(2026, 3, 10, 3, 30, tzinfo=BERLIN)
    assert shift_start(at, starts) == datetime(2026, 3, 9, 22, 0, tzinfo=BERLIN)
    assert shift_index(at, starts) == 2
    assert shift_index(datetime(2026, 3, 10, 6, 0, tzinfo=BERLIN), starts) == 0
    assert shift_index(datetime(2026, 3, 10, 13, 59, tzinfo=BERLIN), starts) == 0


def test_buckets_are_aligned_to_local_time_across_a_daylight_saving_change() -> None:
    starts = parse_shifts(["06:00", "18:00"])
    # 29 March 2026: Berlin skips 02:00 -> 03:00; the night shift is 11 hours long
    night = datetime(2026, 3, 28, 18, 0, tzinfo=BERLIN)
    inside = datetime(2026, 3, 29, 5, 59, tzinfo=BERLIN)
    assert bucket_start(ms(inside), "shift", starts, BERLIN) == ms(night)
    morning = datetime(2026, 3, 29, 6, 0, tzinfo=BERLIN)
    assert (ms(morning) - ms(night)) / 3_600_000 == 11
    assert bucket_start(ms(morning), "shift", starts, BERLIN) == ms(morning)
    t = datetime(2026, 3, 29, 3, 44, 59, 999000, tzinfo=BERLIN)
    assert bucket_start(ms(t), "15m", tz=BERLIN) == ms(datetime(2026, 3, 29, 3, 30, tzinfo=BERLIN))
    assert bucket_start(ms(t), "1h", tz=BERLIN) == ms(datetime(2026, 3, 29, 3, 0, tzinfo=BERLIN))


def test_local_zone_when_none_is_given() -> None:
    t = datetime(2026, 7, 1, 10, 17).astimezone()
    assert bucket_start(ms(t), "1h") == ms(datetime(2026, 7, 1, 10, 0).astimezone())
