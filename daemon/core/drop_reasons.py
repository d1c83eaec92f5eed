"""Why an accepted frame was dropped: the `reason` label of `beltsight_frames_dropped_total`, named once.

`DropReason` is what `Metrics.dropped` accepts (mypy refuses another), `DROP_REASONS` says what
each means; the metrics page lists them from here (`python -m tools.docs`).
"""

from __future__ import annotations

from typing import Final, Literal, get_args

DropReason = Literal[
    "superseded",
    "stale",
    "no_model",
    "engine_error",
    "buffer_full",
    "spool_full",
    "stream_refused",
    "shutdown",
    "thermal",
    "frame_lost",
    "incomplete",
    "removed",
    "behind",
]

DROP_REASONS: Final[dict[DropReason, str]] = {
    "superseded": "a newer frame of the camera replaced it before it was batched",
    "stale": "older than `engine.max_age_ms` when its batch would start",
    "no_model": "its resolution routes to no configured model",
    "engine_error": "inference failed for its batch",
    "buffer_full": "the sink's memory buffer was full",
    "spool_full": "the spool's cap or a full disk: not kept on disk",
    "stream_refused": "held apart beyond its hold's bound while Redis refused the camera's stream key",
    "shutdown": "unpublished when the shutdown grace period ended",
    "thermal": "inference was paused by the thermal governor",
    "frame_lost": "a GigE Vision camera's frame that never arrived (a gap in its block ids)",
    "incomplete": "a GigE Vision frame with packets the resend could not recover: never handed on",
    "removed": "left in the slot of a camera removed live when its drain timed out",
    "behind": "never decoded: the camera's decoding ran behind its stream, so its reader skipped to a keyframe "
    "near the live edge (`daemon.ingest.lag`)",
}

__all__ = ["DROP_REASONS", "DropReason", "reasons"]


def reasons() -> tuple[DropReason, ...]:
    """Every reason, in the order declared."""
    return get_args(DropReason)
