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

import math
from collections.abc import Callable, Iterable, Sequence
from datetime import time

from daemon.core.shifts import Bucket, bucket_start

MINUTE_MS = 60_000
_FIXED_MS = {"15m": 15 * MINUTE_MS, "1h": 60 * MINUTE_MS}
Span = tuple[int, int, str, int]
"""(start ms, length ms, direction, crossings): crossings counted over a stretch of whole minutes."""


def nominal_lengths_ms(bucket: Bucket, shifts: Sequence[time]) -> tuple[int, ...]:
    """The lengths a bucket has away from a daylight-saving change."""
    if bucket != "shift":
        return (_FIXED_MS[bucket],)
    minutes = [s.hour * 60 + s.minute for s in shifts]
    gaps = {(b - a) % 1440 or 1440 for a, b in zip(minutes, minutes[1:] + minutes[:1], strict=True)}
    return tuple(sorted(g * MINUTE_MS for g in gaps))


def chunk_ms(bucket: Bucket, shifts: Sequence[time]) -> int:
    """The longest stretch that a bucket's start or end can fall on: 15 min (every zone's offset from UTC is
    a multiple of it), or less where a shift starts off the quarter hour. Counts summed per chunk in SQL
    are bucketed a chunk at a time (a chunk that straddles two buckets, per minute)."""
    starts = [s.hour * 60 + s.minute for s in shifts] if bucket == "shift" else []
    return math.gcd(15, *starts) * MINUTE_MS


def bucket_counts(
    spans: Iterable[Span],
    bucket: Bucket,
    shifts: Sequence[time] = (),
    minutes: Callable[[int, str], Iterable[Span]] | None = None,
) -> list[tuple[int, dict[str, int]]]:
    """(bucket start, {"in": N, "out": M}) from (start ms, length ms, direction, crossings), oldest bucket
    first. A span longer than a minute that does not lie in one bucket is asked of `minutes(start, direction)`."""
    lengths = nominal_lengths_ms(bucket, shifts)
    out: dict[int, dict[str, int]] = {}
    start = end = 0
    for t, length, direction, n in sorted(spans):
        if not (start <= t and t + length <= end):
            start = bucket_start(t, bucket, shifts)
            end = _proved_end(start, bucket, shifts, lengths)
            if t + length > end and length > MINUTE_MS:
                if minutes is None:
                    raise ValueError("a span straddles two buckets and its minutes cannot be read")
                for m, _one, d, k in minutes(t, direction):
                    per = out.setdefault(bucket_start(m, bucket, shifts), {"in": 0, "out": 0})
                    per[d] = per.get(d, 0) + k
                start = end = 0
                continue
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


__all__ = ["Span", "bucket_counts", "chunk_ms", "nominal_lengths_ms"]
