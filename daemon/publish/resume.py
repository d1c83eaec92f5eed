"""Where tracking resumes at start: each tracked camera's objects stream read back, then the spool.

A restarted daemon continues track ids past the highest one it gave and each line's counts from
where they stood, instead of starting at 1 and 0: `read_resume` scans a camera's objects stream
from its newest entry back, `fold_spooled` advances that past the events of frames still waiting
in the spool (newer than anything in Redis), and `resume_points` does both for every tracked
camera within a deadline. When Redis cannot be read in time, `tracking_resume_failed` is logged
and tracking starts from its defaults (see `daemon.tracking.persist`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog
from redis.exceptions import ResponseError

from daemon.core.frames import FrameResult
from daemon.core.objects import ObjectsResume
from daemon.core.redaction import SECRETS
from daemon.publish.redis_conn import RETRYABLE, RedisClient, as_text
from daemon.publish.schema import MIN_ENTRY_ID, EntryId

log = structlog.get_logger("beltsight.sink")  # the sink's logger, as before the read had a module of its own


async def resume_points(
    connect: Callable[[], RedisClient],
    objects_stream_for: Callable[[str], str],
    cameras: dict[str, set[tuple[str, str]]],
    timeout_s: float,
    *,
    spooled: list[FrameResult],
) -> tuple[dict[str, ObjectsResume], bool]:
    """Where each tracked camera's ids and counts continue (`cameras`: its (line, direction)s): its
    objects stream read back on a client of its own from `connect`, then the events of `spooled`
    (the spool's frames, oldest first); and whether Redis could be read within `timeout_s`."""
    resume = {camera: ObjectsResume() for camera in cameras}
    read = True
    client = connect()
    try:
        async with asyncio.timeout(timeout_s):
            for camera, lines in cameras.items():
                resume[camera] = await read_resume(client, objects_stream_for(camera), lines)
    except (*RETRYABLE, ResponseError, TimeoutError) as exc:  # ResponseError: WRONGTYPE, NOPERM
        log.warning("tracking_resume_failed", error=SECRETS.scrub(str(exc)), cameras=len(cameras))
        read = False
    finally:
        await client.aclose()
    fold_spooled(resume, spooled)
    return resume, read


RESUME_PAGE = 1000


async def read_resume(
    client: Any, stream: str, lines: set[tuple[str, str]], *, max_entries: int = 1_000_000
) -> ObjectsResume:
    """Where a camera's ids and counts continue: scan its objects stream from the newest entry back
    (XREVRANGE, pages of 1000) until the newest `new` and every (line, direction)'s newest `crossed`
    are found, or `max_entries` were read. A (line, direction) never crossed starts at 0."""
    newest_new: int | None = None  # ids are given at confirmation, so the newest `new` holds the highest
    highest = 0  # fallback when no `new` is left in the (trimmed) stream
    counts: dict[tuple[str, str], int] = {}
    upper, scanned = "+", 0
    while scanned < max_entries and not (newest_new is not None and len(counts) == len(lines)):
        page = await client.xrevrange(stream, max=upper, min="-", count=RESUME_PAGE)
        if not page:
            break
        for _entry_id, raw in page:
            fields = as_text(raw)
            track = int(fields["track"]) if fields.get("track", "").isdigit() else 0
            highest = max(highest, track)
            if newest_new is None and fields.get("event") == "new":
                newest_new = track
            key = (fields.get("line", ""), fields.get("direction", ""))
            if fields.get("event") == "crossed" and key in lines and key not in counts:
                count = fields.get("count", "")
                if count.isdigit():
                    counts[key] = int(count)
        scanned += len(page)
        last = EntryId.parse(page[-1][0])
        if last <= MIN_ENTRY_ID:
            break
        upper = f"({last}"
    next_id = (newest_new if newest_new is not None else highest) + 1
    return ObjectsResume(next_id, counts)


def fold_spooled(resume: dict[str, ObjectsResume], results: list[FrameResult]) -> None:
    """Advance `resume` past the events of frames still in the spool (newer than Redis' copy)."""
    for result in results:
        if not result.objects or result.camera_id not in resume:
            continue
        state = resume[result.camera_id]
        counts = dict(state.counts)
        next_id = state.next_track_id
        for event in result.objects:
            next_id = max(next_id, event.track + 1)
            if event.event == "crossed" and event.line is not None and event.direction is not None:
                key = (event.line, event.direction)
                counts[key] = max(counts.get(key, 0), event.count or 0)
        resume[result.camera_id] = ObjectsResume(next_id, counts)


__all__ = ["RESUME_PAGE", "fold_spooled", "read_resume", "resume_points"]
