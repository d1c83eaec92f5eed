"""What a `CameraSource` is wired to, for tests: a consumer that keeps every frame, and the router."""

from __future__ import annotations

import threading

from daemon.core.frames import Frame, nearest_model_size


class RecordingConsumer:
    """A FrameConsumer that keeps every frame (the hub's Protocol, without its dropping policy)."""

    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self.waited: list[bool] = []
        self.discards = 0
        self._lock = threading.Lock()

    def put(self, frame: Frame, *, wait: bool = False, stop: threading.Event | None = None) -> bool:
        with self._lock:
            self.frames.append(frame)
            self.waited.append(wait)
        return True

    def discard(self, camera_id: str) -> None:
        with self._lock:
            self.discards += 1

    def of(self, camera_id: str) -> list[Frame]:
        with self._lock:
            return [f for f in self.frames if f.camera_id == camera_id]


def route(camera_id: str, width: int, height: int) -> int | None:
    """The daemon's routing: the model nearest the camera's resolution."""
    return nearest_model_size(width, height)
