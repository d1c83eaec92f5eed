"""The tracking room's rows: its state file and the resume after a restart (the resume read is the
sink's, the state file tracking's own).
"""

from __future__ import annotations

from daemon.ops.logging.event import LogEvent

TRACKING_EVENTS: tuple[LogEvent, ...] = (
    LogEvent(
        "tracking_resume_failed",
        "warning",
        "Redis could not be read at startup to continue track ids and counts: ids continue from a"
        " time-based base (still unique), line counts restart at 0",
        ("error", "cameras"),
    ),
    LogEvent(
        "tracking_resumed",
        "info",
        "a tracked camera's ids and counts continue from its objects stream (and the spool) after a restart",
        ("camera", "next_track", "counts"),
    ),
    LogEvent(
        "tracking_state_unreadable",
        "warning",
        "the tracking state file next to the spool could not be read at startup (ids and counts then"
        " continue from the objects stream and the spool alone)",
        ("path", "error"),
    ),
    LogEvent(
        "tracking_state_unwritable",
        "error",
        "the tracking state file could not be written (disk full or read-only): a restart while Redis is"
        " down may then restart line counts",
        ("path", "error"),
    ),
)
