"""A frame's capture instant on a host clock, from the source's own timestamps (RTSP and GigE Vision).

A frame stamped when the host gets to it carries the host's delays: on a busy host a decoder held
back for 60 ms stamps the frame 60 ms late, and the tracker, predicting a part's position from
the stamps' spacing, sees it move too far in one frame and too little in the next. At 5 fps on a
counting line that breaks tracks: replaying one run's detections with stamps late by
|N(0, 100 ms)| lost up to 3 of 63 crossings (`docs/reports/tracking.md`).

The source's own timestamps keep the spacing the camera captured at: an RTSP stream's presentation
time (the RTP clock) or a GigE Vision camera's tick. `CaptureClock` maps them onto a host clock:
the offset is the smallest (host arrival - source time) over the last `WINDOW` frames. The
least-delayed frame's transfer is taken as the latency floor, so the mapped time is the capture
instant plus that floor: steady against the jitter of single frames, and following a drifting
source clock (or a host clock step) within `WINDOW` frames. This is how a jitter buffer recovers a
sender's timing (GStreamer's `rtpjitterbuffer`, DeepStream with RTCP).

- A frame without a timestamp gets its arrival time.
- A source time that goes back (a camera that restarted its clock, a stream that was cut and
  spliced) starts the window again: the old offsets describe another clock.
- A source time that jumps forward needs nothing: its smaller offset is the new minimum.
- The result is never later than the arrival, and never goes back: each frame at least
  `MIN_STEP_NS` after the one before.
"""

from __future__ import annotations

from collections import deque

WINDOW = 256
"""Frames over which the offset's minimum is taken (about 8 s at 30 fps, 51 s at 5 fps)."""
MIN_STEP_NS = 1_000_000
"""Each mapped instant is at least this after the one before (1 ms)."""


class CaptureClock:
    """Source timestamps -> host-clock ns (one per connection: a new connection measures again)."""

    def __init__(self) -> None:
        self._samples: deque[tuple[int, int]] = deque()  # (index, offset ns), offsets increasing
        self._index = 0
        self._last_source: int | None = None
        self._last: int | None = None

    def capture_ns(self, source_ns: int | None, arrival_ns: int) -> int:
        """The frame's capture instant on the host clock that `arrival_ns` (its arrival) is read from."""
        if source_ns is None:
            value = arrival_ns
        else:
            if self._last_source is not None and source_ns < self._last_source:
                self._samples.clear()
            self._last_source = source_ns
            value = source_ns + self._offset(arrival_ns - source_ns)
        if self._last is not None:
            value = max(value, self._last + MIN_STEP_NS)
        self._last = value
        return value

    def _offset(self, sample: int) -> int:
        """The minimum offset over the last `WINDOW` samples (a monotonic deque: O(1) per frame)."""
        self._index += 1
        samples = self._samples
        while samples and samples[-1][1] >= sample:
            samples.pop()
        samples.append((self._index, sample))
        while samples[0][0] <= self._index - WINDOW:
            samples.popleft()
        return samples[0][1]


__all__ = ["MIN_STEP_NS", "WINDOW", "CaptureClock"]
