"""`OpenClip`: one clip between its opening crossing and its last packet, shared by the loop and the writer.

The loop extends it (`extend`, a crossing inside it); the writer's thread closes it (`close_at`) once it
has written every packet up to the end it read, and only if no extension came meanwhile, so a crossing
either lands in a clip that will cover its `post_s` or opens a new one. One small lock.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from daemon.core.packets import Packet, PacketRing, StreamInfo
from daemon.publish.files.paths import resolve as resolve_file

SUFFIX = ".mp4"


def clip_path(camera: str, start_ms: int, at_ms: int) -> str:
    """`<camera>/<YYYY-MM-DD>/<start_ms>-<at_ms>.mp4`: the UTC day and wall time of its first packet and the
    time of the crossing that opened it (unique: a camera's clips never open twice for one crossing)."""
    day = time.strftime("%Y-%m-%d", time.gmtime(start_ms / 1000))
    return f"{camera}/{day}/{start_ms}-{at_ms}{SUFFIX}"


def resolve(root: Path, relative: str) -> Path | None:
    """The MP4 `relative` names inside `root`, or None (`daemon.publish.files.paths.resolve`)."""
    return resolve_file(root, relative, SUFFIX)


class OpenClip:
    """See the module docstring."""

    def __init__(
        self, path: str, ring: PacketRing, info: StreamInfo, start: Packet, *, end_ms: int, limit_ms: int
    ) -> None:
        self.path = path
        self.camera = ring.camera_id
        self.ring = ring
        self.info = info
        self.start = start
        """The keyframe it starts at; its dts is the clip's zero."""
        self.limit_ms = limit_ms
        """No extension beyond this wall time (its first packet plus `max_s`)."""
        self._end_ms = end_ms
        self._closed = False
        self._lock = threading.Lock()

    @property
    def end_ms(self) -> int:
        """Wall time of the last moment it covers (its newest crossing plus `post_s`)."""
        return self._end_ms

    def extend(self, end_ms: int) -> bool:
        """Cover up to `end_ms` (never beyond `limit_ms`); False when the writer closed it already."""
        with self._lock:
            if self._closed or end_ms > self.limit_ms:
                return False
            self._end_ms = max(self._end_ms, end_ms)
            return True

    def close(self) -> None:
        """The writer ended it early (a reconnect, a lost packet, a failure): no more extensions."""
        with self._lock:
            self._closed = True

    def close_at(self, end_ms: int) -> bool:
        """The writer wrote up to `end_ms`: closed (True) unless an extension moved the end meanwhile."""
        with self._lock:
            if self._end_ms != end_ms:
                return False
            self._closed = True
            return True


__all__ = ["SUFFIX", "OpenClip", "clip_path", "resolve"]
