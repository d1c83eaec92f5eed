"""Minutes into count buckets, with `daemon.core.shifts.bucket_start` (the one rule for local-time buckets and
shifts) called a few times per bucket instead of once per minute.

A week of one line is 10,080 minutes; `bucket_start` (a local-time conversion) per minute took about 200 ms
on a shared 2-core box, over the record's 100 ms goal. Minutes come in order, and a bucket's start never
decreases with time, so once a bucket's end is known every minute before it is in that bucket. The end is
guessed from the bucket's nominal length (15 min, 1 h, or each configured shift's length) and proved with
`bucket_start` itself: `bucket_start(end) == end` and `bucket_start(end - 1 min) == start`. Where no guess
holds (a daylight-saving change, a shift cut short), each minute of that bucket is bucketed on its own, so
the answer is always the one `bucket_start` gives per minute.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import time

from daemon.core.shifts import Bucket, bucket_start

MINUTE_MS = 60_000
_FIXED_MS = {"15m": 15 * MINUTE_MS, "1h": 60 * MINUTE_MS}


def nominal_lengths_ms(bucket: Bucket, shifts: Sequence[time]) -> tuple[int, ...]:
    """The lengths a bucket has away from a daylight-saving change."""
    if bucket != "shift":
        return (_FIXED_MS[bucket],)
    minutes = [s.hour * 60 + s.minute for s in shifts]
    gaps = {(b - a) % 1440 or 1440 for a, b in zip(minutes, minutes[1:] + minutes[:1], strict=True)}
    return tuple(sorted(g * MINUTE_MS for g in gaps))


def bucket_counts(
    minutes: Iterable[tuple[int, str, int]], bucket: Bucket, shifts: Sequence[time] = ()
) -> list[tuple[int, dict[str, int]]]:
    """(bucket start, {"in": N, "out": M}) from (minute ms, direction, crossings), oldest bucket first."""
    lengths = nominal_lengths_ms(bucket, shifts)
    out: dict[int, dict[str, int]] = {}
    start = end = 0
    for minute_ms, direction, n in sorted(minutes):
        if not start <= minute_ms < end:
            start = bucket_start(minute_ms, bucket, shifts)
            end = _proved_end(start, bucket, shifts, lengths)
        per = out.setdefault(start, {"in": 0, "out": 0})
        per[direction] = per.get(direction, 0) + n
    return sorted(out.items())


def _proved_end(start: int, bucket: Bucket, shifts: Sequence[time], lengths: Sequence[int]) -> int:
    """The bucket's end where a nominal length is proved; else `start` (each minute bucketed on its own)."""
    for length in lengths:
        end = start + length
        if bucket_start(end, bucket, shifts) == end and bucket_start(end - MINUTE_MS, bucket, shifts) == start:
            return end
    return start


__all__ = ["bucket_counts", "nominal_lengths_ms"]
