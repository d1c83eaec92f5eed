"""A GigE Vision frame's `seq`, from the camera's block id (its `captured_ms`: `daemon.ingest.capture_clock`).

`FrameIds`: the step between consecutive block ids, so `seq` advances by one per camera frame and
a frame the camera sent but the host never received leaves a gap. GigE Vision 1.x block ids are
16 bits and skip 0 (65535 is followed by 1); 2.x extended ids are 64 bits. An id that goes back
without wrapping (the camera restarted its counter) counts as the next frame.
"""

from __future__ import annotations

BLOCK_ID_16 = 0xFFFF
"""The largest GigE Vision 1.x block id; the next is 1 (0 is never used)."""


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
