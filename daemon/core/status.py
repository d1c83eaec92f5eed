"""The one status-callback type: how a stage tells the daemon something operators should see.

A `StatusCallback` takes a `StatusEvent` (`daemon.core.frames`); the daemon hands it to the sink
(the Redis status stream). `emit_status` is how a stage calls one: a failing listener is logged
(`status_listener_failed`), never raised into the stage that reported.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from daemon.core.clock import Clock, time_ms
from daemon.core.frames import StatusEvent
from daemon.core.status_kinds import StatusKind

StatusCallback = Callable[[StatusEvent], None]

log = structlog.get_logger("beltsight.status")


def emit_status(on_status: StatusCallback, clock: Clock, kind: StatusKind, detail: str) -> None:
    """Send a StatusEvent stamped with `clock`'s wall time; a failing listener is logged, not raised."""
    try:
        on_status(StatusEvent(kind=kind, detail=detail, at_ms=time_ms(clock)))
    except Exception as exc:
        log.error("status_listener_failed", kind=kind, error=type(exc).__name__)
