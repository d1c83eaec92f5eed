"""What a camera source reads through: one `Link` per camera kind, and what every link is given.

`CameraSource` (daemon.ingest.sources) owns the lifecycle every kind shares (state, reconnect
with backoff, status events, stall reporting); a `Link` opens one connection, reads it to its
end and says how it ended (`Outcome`), raising `ConnectionLostError` for a failure.
`daemon.ingest.kinds.make_link` is the one place a kind is chosen.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from daemon.core.clock import Clock
from daemon.core.frames import FrameConsumer
from daemon.core.metrics import Metrics
from daemon.core.packets import PacketRing
from daemon.core.status_kinds import StatusKind
from daemon.ingest.geometry import SourceGeometry
from daemon.ingest.reader import OnUp, Outcome


@dataclass(frozen=True, slots=True)
class LinkParts:
    """What every link hands frames and events to (owned by its `CameraSource`)."""

    consumer: FrameConsumer
    geometry: SourceGeometry
    metrics: Metrics
    clock: Clock
    stop: threading.Event
    on_up: OnUp
    status: Callable[[StatusKind, str], None]
    packets: PacketRing | None = None
    """The camera's packet ring ([clips]): links that read encoded video (RTSP, files) feed it."""


class Link(Protocol):
    """One camera's connections, one at a time, in its source's thread."""

    @property
    def frames(self) -> int:
        """Frames handed on since start (all connections)."""
        ...

    @property
    def fps(self) -> float:
        """Smoothed frame rate of the current connection (0 before two frames)."""
        ...

    @property
    def last_frame_mono(self) -> float | None:
        """When the newest frame came (monotonic seconds; None before the first)."""
        ...

    @property
    def expects_frames(self) -> bool:
        """Frames come steadily (a silence is a stall); False for a hardware-triggered camera."""
        ...

    @property
    def refused(self) -> Mapping[str, Mapping[str, str]]:
        """Settings the camera refused at the latest open: feature -> wanted and kept value."""
        ...

    def attempt(self) -> Outcome:
        """Open one connection and read it to its end (or stop); `ConnectionLostError` when it fails."""
        ...

    def end_connection(self) -> None:
        """The connection is over (called after every attempt): per-connection state goes."""
        ...
