"""Shifts and count buckets: one rule for the review record's counts (`[review] shifts`) and the bridge's
reconciled counts.

A plant names its shifts by their local start times (`["06:00", "14:00", "22:00"]`); a shift runs from
its start to the next one's, the last wrapping past midnight to the first. Times are wall-clock in the
box's local time zone (or the one given), so a shift that spans a daylight-saving change is an hour
shorter or longer, as the plant's own shift is. Fixed buckets (`15m`, `1h`) are aligned to the local
clock too (an hour bucket starts on the hour).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, time, timedelta, tzinfo
from typing import Literal

Bucket = Literal["15m", "1h", "shift"]
BUCKETS: tuple[Bucket, ...] = ("15m", "1h", "shift")
_HHMM = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


def parse_shifts(starts: Sequence[str]) -> tuple[time, ...]:
    """Local start times "HH:MM", sorted; ValueError naming the bad entry or a duplicate."""
    out: list[time] = []
    for raw in starts:
        m = _HHMM.match(raw)
        if m is None:
            raise ValueError(f"shift start {raw!r} is not a 24-hour time HH:MM (e.g. '06:00')")
        out.append(time(int(m.group(1)), int(m.group(2))))
    if len(set(out)) != len(out):
        raise ValueError(f"shift starts {list(starts)} name the same time twice")
    return tuple(sorted(out))


def shift_start(at: datetime, starts: Sequence[time]) -> datetime:
    """The start of the shift `at` falls in, in `at`'s zone (naive: local time)."""
    if not starts:
        raise ValueError("no shifts configured")
    day = at.date()
    for offset in (0, -1):
        d = day + timedelta(days=offset)
        for start in reversed(starts):
            candidate = datetime.combine(d, start, tzinfo=at.tzinfo)
            if candidate <= at:
                return candidate
    raise AssertionError("unreachable: yesterday's last shift starts before today")  # pragma: no cover


def shift_index(at: datetime, starts: Sequence[time]) -> int:
    """Which of `starts` (0-based, in sorted order) the shift at `at` is."""
    begun = shift_start(at, starts).timetz().replace(tzinfo=None)
    return list(starts).index(begun)


def bucket_start(at_ms: int, bucket: Bucket, starts: Sequence[time] = (), tz: tzinfo | None = None) -> int:
    """The start (ms since the epoch) of the bucket holding `at_ms`, aligned to local time (the box's
    zone when `tz` is None: naive local times, whose `timestamp()` follows its daylight-saving rules)."""
    at = datetime.fromtimestamp(at_ms / 1000, tz=tz)
    if bucket == "shift":
        start = shift_start(at, starts)
    else:
        minutes = 15 if bucket == "15m" else 60
        start = at.replace(minute=at.minute - at.minute % minutes, second=0, microsecond=0)
    return int(start.timestamp() * 1000)
