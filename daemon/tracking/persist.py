"""The tracking stage's continuity between runs: resume at startup, keep the state file current.

`resume_stage` is the start-up step (`daemon.app.Daemon` awaits it once the sink is open, before
any camera starts): it asks where each tracked camera's lines stand (`ResumePoints`: the sink's
read of the objects streams and the spool, `daemon.publish.resume`) and resumes the stage from it.
`resume` starts each tracked camera from the highest of: its objects stream (and the events
still in the spool), as the sink read them, and the local state file (`daemon.tracking.state`).
When none of them knows a camera (Redis unreadable, no state file yet), its ids continue from
a time-based base, `unix_seconds * 1000`, unique across restarts while a camera confirms under
1,000 tracks a second, and its counts start at 0 (logged as `tracking_resume_failed` by the sink).

`keep` rewrites the state file at most every `interval_s` while something changed, off the
event loop (the fsync), and once more when it is cancelled at shutdown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import structlog

from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.core.objects import ObjectsResume
from daemon.tracking import state
from daemon.tracking.stage import TrackingStage

log = structlog.get_logger("beltsight.tracking")

SAVE_INTERVAL_S = 1.0
RESUME_TIMEOUT_S = 10.0
"""How long the start-up waits for the resume points before it starts from what it has."""

ResumePoints = Callable[[dict[str, set[tuple[str, str]]], float], Awaitable[tuple[dict[str, ObjectsResume], bool]]]
"""(camera -> its (line, direction) counters, timeout in s) -> (camera -> where it stands, whether
the streams were read): the sink's `resume_points`."""


def load_saved(directory: Path | None) -> dict[str, ObjectsResume] | None:
    if directory is None:
        return None
    try:
        return state.load(directory)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("tracking_state_unreadable", path=str(directory / state.FILE_NAME), error=str(exc))
        return None


async def resume_stage(stage: TrackingStage, points: ResumePoints, directory: Path | None) -> Path | None:
    """Resume every tracked camera (`resume`) from `points` and the state file in `directory`;
    returns the directory whose state file `keep` keeps current from now on (None: none to keep)."""
    cameras = {cid: {(line.id, d) for line in stage.lines_of(cid) for d in ("in", "out")} for cid in stage.camera_ids}
    if not cameras:
        return None
    from_streams, read = await points(cameras, RESUME_TIMEOUT_S)
    resume(stage, from_streams, read, directory)
    return directory


def resume(
    stage: TrackingStage,
    from_streams: Mapping[str, ObjectsResume],
    streams_read: bool,
    directory: Path | None,
    clock: Clock = SYSTEM_CLOCK,
) -> None:
    """Start every tracked camera's tracker where the runs before left it (see the module)."""
    saved = load_saved(directory)
    merged = state.merge(from_streams, saved)
    for camera_id in stage.camera_ids:
        known = streams_read or (saved is not None and camera_id in saved)
        start = merged.get(camera_id, ObjectsResume())
        if not known and start.next_track_id <= 1:
            start = ObjectsResume(int(clock.time()) * 1000, start.counts)
        stage.resume(camera_id, start)
        counts = {f"{line}:{d}": n for (line, d), n in sorted(start.counts.items())}
        log.info("tracking_resumed", camera=camera_id, next_track=start.next_track_id, counts=counts)


async def keep(stage: TrackingStage, directory: Path, interval_s: float = SAVE_INTERVAL_S) -> None:
    """Save the stage's state whenever it changed, at most every `interval_s`; once more on cancel."""
    loop = asyncio.get_running_loop()
    saved: dict[str, ObjectsResume] = {}
    try:
        while True:
            await asyncio.sleep(interval_s)
            now = stage.snapshot()
            if now != saved:
                await loop.run_in_executor(None, _save, directory, now)
                saved = now
    finally:
        now = stage.snapshot()
        if now and now != saved:
            _save(directory, now)  # shutting down: on this thread, once


def _save(directory: Path, snapshot: Mapping[str, ObjectsResume]) -> None:
    try:
        state.save(directory, snapshot)
    except OSError as exc:
        log.error("tracking_state_unwritable", path=str(directory / state.FILE_NAME), error=str(exc))


__all__ = ["RESUME_TIMEOUT_S", "ResumePoints", "keep", "load_saved", "resume", "resume_stage"]
