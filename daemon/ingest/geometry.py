"""A camera's frame size and the letterbox for the model its frames route to."""

from __future__ import annotations

from collections.abc import Callable

import structlog

from daemon.core.frames import Letterbox, Router
from daemon.core.status_kinds import StatusKind

log = structlog.get_logger("beltsight.source")


class SourceGeometry:
    """One camera's last frame size and its letterbox, worked out once per resolution.

    A change of resolution is logged and reported (`camera_resolution_changed`) and routed again:
    the camera may move to another model. A size that routes to no model gets no letterbox and
    one `camera_no_model` warning per size.
    """

    def __init__(self, camera_id: str, route: Router, status: Callable[[StatusKind, str], None]) -> None:
        self._camera_id = camera_id
        self._route = route
        self._status = status
        self._letterbox: Letterbox | None = None
        self._routed: tuple[int, int] | None = None
        """The size `_letterbox` is for; set once routing returned (a router that raised is asked
        again on the next frame, without reporting the size change twice)."""
        self._warned_no_model: set[tuple[int, int]] = set()
        self.width: int | None = None
        self.height: int | None = None

    @property
    def size_text(self) -> str:
        """The last frame size as "WxH" ("unknown" before the first frame)."""
        return f"{self.width}x{self.height}" if self.width is not None else "unknown"

    def letterbox_for(self, width: int, height: int) -> Letterbox | None:
        """The letterbox for a `width` x `height` frame (None: no model takes this size)."""
        if (width, height) == self._routed:
            return self._letterbox
        new = f"{width}x{height}"
        if self.width is not None and (self.width, self.height) != (width, height):
            old = self.size_text
            log.info("camera_resolution_changed", camera=self._camera_id, old=old, new=new)
            self._status("camera_resolution_changed", f"{old} -> {new}")
        self.width, self.height = width, height
        size = self._route(self._camera_id, width, height)
        self._routed = (width, height)
        self._letterbox = Letterbox.fit(width, height, size) if size is not None else None
        if size is None and (width, height) not in self._warned_no_model:
            self._warned_no_model.add((width, height))
            log.warning("camera_no_model", camera=self._camera_id, size=new)
        return self._letterbox
