"""The vision side of the rig: crossings XADDed to a camera's objects stream as the daemon writes them,
at the scene's times, with the camera's faults (parts it misses) decided as it goes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis


def crossing_fields(camera: str, line: str, count: int, at_ms: int, direction: str = "in") -> dict[str, str]:
    """One `crossed` entry of the objects stream (schema version 1) for a part crossing `line`."""
    return {
        "v": "1",
        "camera": camera,
        "track": str(count),
        "label": "part",
        "cls": "0",
        "score": "0.9",
        "event": "crossed",
        "at_ms": str(at_ms),
        "line": line,
        "direction": direction,
        "count": str(count),
        "speed_px_s": "100.0",
    }


@dataclass(slots=True)
class CameraFeed:
    """Writes a crossing for each scene part the camera sees; `missing` (a share, settable while it
    runs) makes it miss parts evenly, as a detector that stopped seeing some of them."""

    client: aioredis.Redis
    stream: str
    camera: str
    line: str
    t0_wall: float = field(default_factory=time.time)
    t0_mono: float = field(default_factory=time.monotonic)
    missing: float = 0.0
    seen: int = 0
    missed: int = 0
    _debt: float = 0.0

    def start(self) -> None:
        self.t0_wall, self.t0_mono = time.time(), time.monotonic()

    def wall_ms(self, t: float) -> int:
        return round((self.t0_wall + t) * 1000)

    async def run(self, parts: list[float], on_part: Callable[[float], None] | None = None) -> None:
        """Until the last part (or cancelled): each part at its time, seen or missed."""
        for t in parts:
            delay = t - (time.monotonic() - self.t0_mono)
            if delay > 0:
                await asyncio.sleep(delay)
            if on_part is not None:
                on_part(t)
            self._debt += self.missing
            if self._debt >= 1.0:
                self._debt -= 1.0
                self.missed += 1
                continue
            self.seen += 1
            fields: dict[Any, Any] = crossing_fields(self.camera, self.line, self.seen, self.wall_ms(t))
            await self.client.xadd(self.stream, fields)


__all__ = ["CameraFeed", "crossing_fields"]
