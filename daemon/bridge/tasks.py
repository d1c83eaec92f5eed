"""Stopping tasks without swallowing the caller's own cancellation."""

from __future__ import annotations

import asyncio


async def stop_task(task: asyncio.Task[object] | asyncio.Task[None]) -> None:
    """Cancel `task` and wait until it ended. `asyncio.wait` never raises the task's own exception
    or CancelledError; a cancellation of the caller while it waits still propagates."""
    task.cancel()
    await asyncio.wait([task])
    if not task.cancelled():
        task.exception()  # retrieved: no "exception was never retrieved" at exit
