"""`PendingFrames`: each inferred frame kept (a reference, no copy) until its result is published.

The lanes hand over a batch's frames (`keep`) before their results are tracked and published; a
writer that needs the picture of a published result (`take`) finds its frame here. Taking a frame
frees it and every older frame of the same camera whose result never came (an engine error); at most
`max_per_camera` are kept per camera. Event loop only."""

from __future__ import annotations

from collections.abc import Iterable

from daemon.core.frames import Frame

MAX_PENDING_PER_CAMERA = 64
"""Frames kept per camera between `keep` and `take` at most (more than any batch in flight)."""


class PendingFrames:
    def __init__(self, max_per_camera: int = MAX_PENDING_PER_CAMERA) -> None:
        self._max = max_per_camera
        self._frames: dict[str, dict[float, Frame]] = {}

    def keep(self, frames: Iterable[Frame]) -> None:
        for frame in frames:
            pending = self._frames.setdefault(frame.camera_id, {})
            pending[frame.captured_mono] = frame
            if len(pending) > self._max:
                del pending[next(iter(pending))]

    def take(self, camera_id: str, captured_mono: float) -> Frame | None:
        """The frame of that camera and instant (None: gone), freed with every older one of the camera."""
        pending = self._frames.get(camera_id, {})
        frame = pending.pop(captured_mono, None)
        for stale in [t for t in pending if t < captured_mono]:
            del pending[stale]
        return frame

    def clear(self) -> None:
        self._frames.clear()


__all__ = ["MAX_PENDING_PER_CAMERA", "PendingFrames"]
