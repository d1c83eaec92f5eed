"""`PacketRing`: one camera's last encoded video packets, for clips cut without decoding or encoding.

The camera's reader thread appends every demuxed video packet (`add`, a copy of its bytes stamped with the
wall-clock time it was read, the clock `captured_ms` uses); the clip writer's thread reads them back
(`since`), and the event loop finds where a clip starts and where a crossing falls in it (`locate`).

Bounds (checked at every `add`): the ring always starts at a keyframe, and drops its oldest group of
pictures (a keyframe and what follows up to the next one) while the next keyframe alone still covers
`keep_ms` up to the newest packet, or while the ring is over `max_bytes` (then it covers less). So it
holds `keep_ms` plus at most one keyframe interval. A new connection (`start`) empties it: timestamps
and codec parameters start again. Thread-safe: one lock, held for a deque append or a short scan.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

PACKET_OVERHEAD_BYTES = 120
"""What each kept packet costs besides its payload (its record and the bytes object's header), counted
in `nbytes` so the byte bound holds for streams of many small packets too."""


@dataclass(frozen=True, slots=True)
class StreamInfo:
    """One connection's video stream as a muxer needs it."""

    connection: int
    """Counts the ring's connections from 1; packets of different connections never share a clip."""
    codec: str
    width: int
    height: int
    time_base: Fraction
    template: Any
    """A PyAV stream holding the connection's codec parameters (`OutputContainer.add_stream_from_template`),
    made by the reader (daemon.ingest.packet_tap); kept apart from the input container, which a reconnect
    closes."""


@dataclass(frozen=True, slots=True)
class Packet:
    """One encoded video packet (an access unit) as the camera sent it."""

    index: int
    """Running number in the ring, across connections (never reused)."""
    wall_ms: int
    """Unix ms when the reader read it (the `captured_ms` clock: its frame is decoded at once after)."""
    pts: int
    dts: int
    keyframe: bool
    data: bytes


@dataclass(frozen=True, slots=True)
class Located:
    """Where a clip for a moment starts in the ring, and how far into it the moment is."""

    info: StreamInfo
    start: Packet
    """The keyframe the clip starts at."""
    base: int
    """The clip's zero in stream ticks: the start keyframe's dts (so no dts is negative)."""
    offset_ms: int
    """The moment's time in the clip (0 at `base`)."""


class PacketRing:
    """See the module docstring."""

    def __init__(self, camera_id: str, *, keep_ms: int, max_bytes: int) -> None:
        self.camera_id = camera_id
        self.keep_ms = keep_ms
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._packets: deque[Packet] = deque()
        self._keyframes: deque[int] = deque()  # indexes of the keyframes held, oldest first
        self._info: StreamInfo | None = None
        self._next_index = 0
        self._connections = 0
        self.nbytes = 0
        """Bytes held: payloads plus `PACKET_OVERHEAD_BYTES` each."""

    # -- the reader's side ----------------------------------------------------------------
    def start(self, codec: str, width: int, height: int, time_base: Fraction, template: Any) -> None:
        """A new connection: empty the ring and keep its stream's parameters."""
        with self._lock:
            self._connections += 1
            self._info = StreamInfo(self._connections, codec, width, height, time_base, template)
            self._packets.clear()
            self._keyframes.clear()
            self.nbytes = 0

    def add(self, data: bytes, pts: int, dts: int, keyframe: bool, wall_ms: int) -> None:
        """Append one packet (ignored until the connection's first keyframe), then trim to the bounds."""
        with self._lock:
            if not self._packets and not keyframe:
                return
            packet = Packet(self._next_index, wall_ms, pts, dts, keyframe, data)
            self._next_index += 1
            self._packets.append(packet)
            if keyframe:
                self._keyframes.append(packet.index)
            self.nbytes += len(data) + PACKET_OVERHEAD_BYTES
            self._trim(wall_ms)

    def _trim(self, newest_ms: int) -> None:
        packets, keyframes = self._packets, self._keyframes
        while len(keyframes) > 1:
            second = packets[keyframes[1] - packets[0].index]
            if newest_ms - second.wall_ms < self.keep_ms and self.nbytes <= self.max_bytes:
                break
            keyframes.popleft()
            while packets[0].index < second.index:
                self.nbytes -= len(packets.popleft().data) + PACKET_OVERHEAD_BYTES

    # -- the clip writer's and the event loop's side --------------------------------------
    @property
    def info(self) -> StreamInfo | None:
        return self._info

    def since(self, index: int) -> tuple[StreamInfo | None, list[Packet]]:
        """The current connection and its packets held after `index` (the first may be later than
        `index + 1` when the ring dropped some meanwhile: the caller checks)."""
        with self._lock:
            packets = self._packets
            if not packets:
                return self._info, []
            skip = max(0, index + 1 - packets[0].index)
            return self._info, [packets[i] for i in range(skip, len(packets))]

    def locate(self, start_ms: int, at_ms: int, *, base: Packet | None = None) -> Located | None:
        """A clip for the moment `at_ms`: from the newest keyframe at or before `start_ms` (the oldest one
        held when none is that old), or from `base` (an open clip's start, which must still be of this
        connection); None when the ring holds no packet (yet)."""
        with self._lock:
            info, packets = self._info, self._packets
            if info is None or not packets:
                return None
            if base is None:
                keys = [packets[i - packets[0].index] for i in self._keyframes]
                at = bisect_right([k.wall_ms for k in keys], start_ms)
                base = keys[max(0, at - 1)]
            near = self._nearest(at_ms)
        zero = base.dts
        ticks_ms = float(info.time_base * 1000)
        offset = (near.pts - zero) * ticks_ms + (at_ms - near.wall_ms)
        return Located(info, base, zero, max(0, round(offset)))

    def _nearest(self, wall_ms: int) -> Packet:
        """The held packet read closest to `wall_ms` (lock held; the ring is not empty)."""
        packets = self._packets
        lo, hi = 0, len(packets) - 1
        while lo < hi:  # the first packet read at or after wall_ms
            mid = (lo + hi) // 2
            if packets[mid].wall_ms < wall_ms:
                lo = mid + 1
            else:
                hi = mid
        if lo > 0 and wall_ms - packets[lo - 1].wall_ms < packets[lo].wall_ms - wall_ms:
            lo -= 1
        return packets[lo]


__all__ = ["PACKET_OVERHEAD_BYTES", "Located", "Packet", "PacketRing", "StreamInfo"]
