"""`PacketTap`: what the reader hands each connection's stream and each demuxed video packet to, for clips.

The reader calls `start(stream)` when a connection opens and `add(packet, wall_ms)` for every video packet
before decoding it; the tap copies the packet's bytes and timestamps into the camera's
`daemon.core.packets.PacketRing`. Audio never reaches it (the reader demuxes the video stream only).
Cost per packet: one copy of its payload (a 4 Mbit/s camera: about 0.5 MB/s) and a deque append.
"""

from __future__ import annotations

import io
from fractions import Fraction

import av
import av.container
from av.video.stream import VideoStream

from daemon.core.packets import PacketRing


class PacketTap:
    """Feeds one camera's `PacketRing` from its reader (the reader's thread only)."""

    def __init__(self, ring: PacketRing) -> None:
        self.ring = ring
        self._holder: av.container.OutputContainer | None = None

    def start(self, stream: VideoStream) -> None:
        """A connection opened: keep its codec parameters in a stream apart from the input container (a
        never-written in-memory MP4 holds it), so a clip can be muxed after a reconnect closed the input."""
        holder = av.open(io.BytesIO(), "w", format="mp4")
        template = holder.add_stream_from_template(stream)
        self._holder = holder
        ctx = stream.codec_context
        self.ring.start(ctx.name, ctx.width, ctx.height, stream.time_base or Fraction(1, av.time_base), template)

    def add(self, packet: av.Packet[VideoStream], wall_ms: int) -> None:
        """One demuxed packet (a flush packet without data, or one without timestamps, is skipped)."""
        dts = packet.dts if packet.dts is not None else packet.pts
        if dts is None or packet.size == 0:
            return
        pts = packet.pts if packet.pts is not None else dts
        self.ring.add(bytes(packet), pts, dts, packet.is_keyframe, wall_ms)


__all__ = ["PacketTap"]
