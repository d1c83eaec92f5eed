"""A camera's packet ring filled from an MP4 the kit wrote, through the reader's own tap (`PacketTap`), with
wall times that keep the file's spacing and end now: what the ring holds after `seconds` of a live camera."""

from __future__ import annotations

import time
from pathlib import Path

import av

from daemon.core.packets import PacketRing
from daemon.ingest.packet_tap import PacketTap


def fill_ring(ring: PacketRing, path: Path, *, end_ms: int | None = None) -> tuple[int, int]:
    """Every video packet of `path` into `ring`; returns the wall ms of the first and the last packet."""
    end_ms = end_ms if end_ms is not None else int(time.time() * 1000)
    tap = PacketTap(ring)
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        packets = [p for p in container.demux(stream) if p.size]
        assert stream.time_base is not None
        last_ms = max(float((p.pts or 0) * stream.time_base * 1000) for p in packets)
        tap.start(stream)
        walls = [end_ms - round(last_ms - float((p.pts or 0) * stream.time_base * 1000)) for p in packets]
        for packet, wall in zip(packets, walls, strict=True):
            tap.add(packet, wall)
    return walls[0], walls[-1]
