"""A GigE Vision frame's `seq` (from the camera's block id) and `captured_ms` (its timestamp on the host clock).

- `FrameIds`: the step between consecutive block ids, so `seq` advances by one per camera frame and
  a frame the camera sent but the host never received leaves a gap. GigE Vision 1.x block ids are
  16 bits and skip 0 (65535 is followed by 1); 2.x extended ids are 64 bits. An id that goes back
  without wrapping (the camera restarted its counter) counts as the next frame.
- `CameraClock`: the camera's timestamp (its own clock, in ns since it started) mapped onto the
  host's wall clock. The offset is the smallest (host arrival - camera timestamp) over the last
  `WINDOW` frames: the least-delayed frame's transfer is taken as the camera-to-host latency floor,
  so the mapped time is the capture instant plus that floor (a few ms on a direct link), steady
  against the jitter of individual frames, and following a drifting camera clock or a host clock
  step within `WINDOW` frames. A camera without timestamps (0) gets the host arrival time. The
  result never goes back (each frame at least 1 ms after the one before).
"""

from __future__ import annotations

from collections import deque

BLOCK_ID_16 = 0xFFFF
"""The largest GigE Vision 1.x block id; the next is 1 (0 is never used)."""
WINDOW = 256
"""Frames over which the clock offset's minimum is taken (about 8 s at 30 fps)."""


class FrameIds:
    """Steps between a connection's block ids (one per connection)."""

    def __init__(self) -> None:
        self._last: int | None = None

    def step(self, frame_id: int) -> int:
        """How many camera frames since the previous id (1: the next one; 0 for the first)."""
        last, self._last = self._last, frame_id
        if last is None:
            return 0
        if frame_id > last:
            return frame_id - last
        if last <= BLOCK_ID_16 and last - frame_id > BLOCK_ID_16 // 2:  # a 16-bit id wrapped past 65535
            return frame_id + BLOCK_ID_16 - last
        return 1  # the camera restarted its count (or repeated an id): the next frame all the same


class CameraClock:
    """Camera timestamps -> host wall-clock ms (one per connection: a new connection measures again)."""

    def __init__(self) -> None:
        self._samples: deque[tuple[int, int]] = deque()  # (index, offset ns), offsets increasing
        self._index = 0
        self._last_ms: int | None = None

    def captured_ms(self, camera_ns: int, arrival_ns: int) -> int:
        """The frame's capture time in Unix ms, from its camera timestamp and host arrival time (ns)."""
        value_ns = camera_ns + self._offset(arrival_ns - camera_ns) if camera_ns > 0 else arrival_ns
        ms = value_ns // 1_000_000
        if self._last_ms is not None:
            ms = max(ms, self._last_ms + 1)
        self._last_ms = ms
        return ms

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
