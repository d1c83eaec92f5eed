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
- A frame more than `MAX_BEHIND_NS` behind the floor starts the window again from that frame: no
  host delay explains a second (a live RTSP reader that far behind skips to its stream's live
  edge, `daemon.ingest.lag`), but a network stall's burst or a source clock that runs slow does.
  Where that happens `UNTRUSTED_AFTER` times within `UNTRUSTED_SPAN_NS`, the source's clock does not
  keep time with the host's (a camera that stamps its frames at a nominal rate, not when it
  captured them): from then on the connection's frames get their arrival times (`trusted` False,
  logged once as `camera_clock_untrusted`), which is never worse than stamping them when they come.
- The result is never later than the arrival (but for the step below), and never goes back: each
  frame at least `MIN_STEP_NS` after the one before.
"""

from __future__ import annotations

from collections import deque

import structlog

from daemon.ingest.lag import BOUND_S

log = structlog.get_logger("beltsight.source")

WINDOW = 256
"""Frames over which the offset's minimum is taken (about 8 s at 30 fps, 51 s at 5 fps)."""
MIN_STEP_NS = 1_000_000
"""Each mapped instant is at least this after the one before (1 ms)."""
MAX_BEHIND_NS = round(BOUND_S * 1e9)
"""A frame this far behind the floor starts the window again: the lag past which a live reader skips."""
UNTRUSTED_AFTER = 3
"""So many restarts within `UNTRUSTED_SPAN_NS`: the source's clock is not used for the connection."""
UNTRUSTED_SPAN_NS = 60_000_000_000
"""The span over which restarts are counted (60 s of the host's clock)."""


class CaptureClock:
    """One camera's source timestamps -> host-clock ns (one per connection: a new connection measures again)."""

    def __init__(self, camera_id: str) -> None:
        self.camera_id = camera_id
        self._samples: deque[tuple[int, int]] = deque()  # (index, offset ns), offsets increasing
        self._index = 0
        self._last_source: int | None = None
        self._last: int | None = None
        self._restarts: deque[int] = deque(maxlen=UNTRUSTED_AFTER)  # arrival times of the recent restarts
        self.trusted = True
        """False once the source's clock was found not to keep time with the host's (see the module text)."""

    def capture_ns(self, source_ns: int | None, arrival_ns: int) -> int:
        """The frame's capture instant on the host clock that `arrival_ns` (its arrival) is read from."""
        if source_ns is None or not self.trusted:
            value = arrival_ns
        else:
            if self._last_source is not None and source_ns < self._last_source:
                self._samples.clear()
            self._last_source = source_ns
            sample = arrival_ns - source_ns
            floor = self._offset(sample)
            if sample - floor > MAX_BEHIND_NS:
                floor = self._restart(sample, arrival_ns)
            value = source_ns + floor if self.trusted else arrival_ns
        if self._last is not None:
            value = max(value, self._last + MIN_STEP_NS)
        self._last = value
        return value

    def _restart(self, sample: int, arrival_ns: int) -> int:
        """Start the window again from `sample`; the source's clock is untrusted after too many restarts."""
        self._samples.clear()
        restarts = self._restarts
        restarts.append(arrival_ns)
        if len(restarts) == UNTRUSTED_AFTER and arrival_ns - restarts[0] <= UNTRUSTED_SPAN_NS:
            self.trusted = False
            log.warning("camera_clock_untrusted", camera=self.camera_id)
        self._samples.append((self._index, sample))
        return sample

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


__all__ = ["MAX_BEHIND_NS", "MIN_STEP_NS", "UNTRUSTED_AFTER", "UNTRUSTED_SPAN_NS", "WINDOW", "CaptureClock"]
