"""Stopping tasks without swallowing the caller's own cancellation (shared by every room that
owns long-lived tasks: the bridge, the daemon's lanes and sink)."""

from __future__ import annotations

import asyncio

RECANCEL_S = 1.0


async def stop_task(task: asyncio.Task[object] | asyncio.Task[None]) -> None:
    """Cancel `task` and wait until it ended, cancelling it again every `RECANCEL_S` while it runs:
    a library that swallows one cancellation (redis-py's read timeout racing it) would otherwise
    leave it waiting forever. `asyncio.wait` never raises the task's own exception or
    CancelledError; a cancellation of the caller while it waits still propagates."""
    while not task.done():
        task.cancel()
        await asyncio.wait([task], timeout=RECANCEL_S)
    if not task.cancelled():
        task.exception()  # retrieved: no "exception was never retrieved" at exit
