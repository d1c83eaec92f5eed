"""Owning tasks: the task group's spawn handle, and stopping tasks without swallowing the caller's
own cancellation (shared by every room that owns long-lived tasks: the daemon, the bridge, the
daemon's lanes and sink).

The lifecycle shape both processes follow (daemon.app `Daemon.run`, daemon.bridge.service
`Bridge.run`): one `asyncio.TaskGroup` owns every long-lived task, each started through `spawn`
(`spawner(group)`); an unexpected exception in any of them ends the group, and with it the process
(non-zero: systemd restarts it); the ordered stop cancels each with `stop_task`. Work a task fans out
for a while and waits for is `run_together`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

RECANCEL_S = 1.0
Spawn = Callable[[Coroutine[Any, Any, None], str], "asyncio.Task[None]"]
"""Start a task in its owner's task group: the coroutine and the task's name."""


def spawner(group: asyncio.TaskGroup) -> Spawn:
    """`group.create_task` as a `Spawn`: what the owner of a task group hands to what starts tasks."""

    def spawn(coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        return group.create_task(coro, name=name)

    return spawn


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


async def run_together(coros: Mapping[str, Coroutine[Any, Any, None]]) -> None:
    """Run `coros` (by task name) as tasks until all of them returned, or until the first raised: the
    others are then stopped (`stop_task`) and that exception is raised, itself (not in a group).
    Cancelling the caller stops them all the same way."""
    tasks = [asyncio.create_task(coro, name=name) for name, coro in coros.items()]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()  # the first error, raised
    finally:
        for task in tasks:
            await stop_task(task)
