"""The lines that run: what the lines API shows and changes, and what a reload applies.

`LinesControl` holds each of this instance's cameras' `mm_per_px` and counting lines as they run now.
`apply` hands a validated `CameraLines` to the tracking stage (on the event loop, so between two of the
camera's frames: `TrackingStage.apply_lines` keeps tracks, ids and kept lines' counts), to the live
view, and audits it: a `lines_changed` log line (camera, user, before and after) and a `lines_changed`
entry in `beltsight:events`. The API persists first (`daemon.config.lines_dropin.write`, off the loop):
a change that cannot be written is not applied. One change of a camera at a time (a lock per camera),
so two writers of one camera cannot leave the file and what runs apart; a write with a precondition
(the API's `If-Match`) is checked under that lock, against what runs then (`StaleError` when it fails).
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import structlog

from daemon.config.cameras import CameraConfig
from daemon.config.lines_dropin import CameraLines, write
from daemon.core.clock import SYSTEM_CLOCK, time_ms
from daemon.core.frames import StatusEvent
from daemon.ops.liveview import LiveView
from daemon.tracking.stage import TrackingStage

log = structlog.get_logger("beltsight.lines")

Precondition = Callable[[CameraLines], bool]
"""Whether a write may replace the lines that run (given them); see `LinesControl.put`."""


class StaleError(Exception):
    """A write whose precondition no longer holds: nothing changed; `current` is what runs."""

    def __init__(self, current: CameraLines) -> None:
        self.current = current
        super().__init__("the camera's lines changed since they were read")


class LinesControl:
    """The running lines of each camera (event loop only; see the module docstring)."""

    def __init__(
        self,
        cameras: Sequence[CameraConfig],
        lines_dir: Path,
        tracking: TrackingStage,
        liveview: LiveView,
        on_event: Callable[[StatusEvent], None],
    ) -> None:
        self._current = {c.id: CameraLines.of(c) for c in cameras}
        self.lines_dir = lines_dir
        self._tracking = tracking
        self._liveview = liveview
        self._on_event = on_event
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    @property
    def camera_ids(self) -> list[str]:
        return list(self._current)

    def add(self, camera: CameraConfig) -> None:
        """Run `camera` (added live) on its own lines; its lines API answers from now on."""
        self._current[camera.id] = CameraLines.of(camera)
        self._liveview.set_lines(camera.id, camera.lines)

    def remove(self, camera_id: str) -> None:
        """`camera_id` was removed live: its lines API answers `404` from now on (its drop-in stays)."""
        self._current.pop(camera_id, None)
        self._locks.pop(camera_id, None)

    def current(self, camera_id: str) -> CameraLines:
        """What `camera_id` counts on now; KeyError for a camera this instance does not run."""
        return self._current[camera_id]

    async def put(
        self, camera_id: str, lines: CameraLines, user: str, precondition: Precondition | None = None
    ) -> CameraLines:
        """Persist `lines` as the camera's drop-in, then apply them (OSError: nothing changed); with a
        `precondition`, only while it holds for what runs (`StaleError`: nothing changed)."""
        if camera_id not in self._current:
            raise KeyError(camera_id)
        async with self._locks[camera_id]:
            if precondition is not None and not precondition(self._current[camera_id]):
                raise StaleError(self._current[camera_id])
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, write, self.lines_dir, camera_id, lines)
            self.apply(camera_id, lines, user)
        return lines

    def apply(self, camera_id: str, lines: CameraLines, user: str) -> bool:
        """Run `camera_id` on `lines` from its next frame on and audit the change; False when they
        are what runs already (nothing done)."""
        before = self._current[camera_id]
        if lines == before:
            return False
        if camera_id in self._tracking.camera_ids:
            self._tracking.apply_lines(camera_id, lines.lines, lines.mm_per_px)
        self._liveview.set_lines(camera_id, lines.lines)
        self._current[camera_id] = lines
        log.info("lines_changed", camera=camera_id, user=user, before=before.to_json(), after=lines.to_json())
        detail = json.dumps({"user": user, "before": before.to_json(), "after": lines.to_json()}, separators=(",", ":"))
        self._on_event(StatusEvent("lines_changed", detail, camera_id, time_ms(SYSTEM_CLOCK)))
        return True


__all__ = ["LinesControl", "Precondition", "StaleError"]
