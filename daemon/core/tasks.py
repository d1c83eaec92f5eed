"""Owning tasks: the task group's spawn handle, and stopping tasks without swallowing the caller's
own cancellation (shared by every room that owns long-lived tasks: the daemon, the bridge, the
daemon's lanes and sink).

The lifecycle shape both processes follow (daemon.app `Daemon.run`, daemon.bridge.service
`Bridge.run`): one `asyncio.TaskGroup` owns every long-lived task, each started through `spawn`
(`spawner(group)`); an unexpected exception in any of them ends the group, and with it the process
(non-zero: systemd restarts it); the ordered stop cancels each with `stop_task`. Work a task fans out
for a while and waits for is `run_together`. A short-lived task started per request (an API write's
apply, a TLS handshake, a snapshot's render) is started in its owner's `Tracked`: kept until it ends,
its exception handed to the owner (logged, never lost), and cancelled and waited for by the owner's close.
The close that follows the stop is `run_close_steps`: named steps, each run whatever an earlier one did.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Coroutine, Iterable, Mapping
from typing import Any, TypeVar

import structlog

T = TypeVar("T")
RECANCEL_S = 1.0
Spawn = Callable[[Coroutine[Any, Any, None], str], "asyncio.Task[None]"]
"""Start a task in its owner's task group: the coroutine and the task's name."""
CloseStep = tuple[str, Callable[[], Awaitable[object]]]
"""One step of a process's close: its name (logged if it fails) and what it runs."""

log = structlog.get_logger("beltsight.close")


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
        await stop_all(tasks)


async def stop_all(tasks: Collection[asyncio.Task[Any]]) -> None:
    """Cancel every one of `tasks` first, then wait until all ended (cancelling those still running
    again every `RECANCEL_S`, as `stop_task`). A cancellation of the caller meanwhile (`stop_task`
    re-cancels its target every `RECANCEL_S`) is deferred, not obeyed: stopping them one by one, a
    repeat cancel would leave the rest running. It is remembered, the waiting goes on until every task
    ended, and it is raised then."""
    pending = {task for task in tasks if not task.done()}
    interrupted = False
    while pending:
        for task in pending:
            task.cancel()
        try:
            await asyncio.wait(pending, timeout=RECANCEL_S)
        except asyncio.CancelledError:
            interrupted = True
        pending = {task for task in pending if not task.done()}
    for task in tasks:
        if not task.cancelled():
            task.exception()  # retrieved: no "exception was never retrieved" at exit
    if interrupted:
        raise asyncio.CancelledError


class Tracked:
    """The short-lived tasks one owner starts on request (event loop only): each kept from `start`
    until it ended; an exception it ended with is retrieved and handed to `on_error` (the task's
    name and the exception), so none is lost; `close` cancels those still running and waits until
    each ended (`stop_task`), so none is left behind at shutdown."""

    def __init__(self, on_error: Callable[[str, BaseException], None]) -> None:
        self._on_error = on_error
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        """The tasks started and still running."""
        return sum(not task.done() for task in self._tasks)

    def start(self, coro: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            self._on_error(task.get_name(), exc)

    async def close(self) -> None:
        """Cancel every task still running and wait until each ended (one started meanwhile too)."""
        while self._tasks:
            batch = list(self._tasks)
            await stop_all(batch)
            self._tasks.difference_update(batch)


async def run_close_steps(steps: Iterable[CloseStep]) -> None:
    """Run every close step whatever an earlier one did: a step that raises (or is cancelled) is logged
    as `close_step_failed` with its name, the next one runs all the same, and the first such failure
    is raised once every step has run (the process still exits non-zero); a cancellation is raised
    before any other failure: never swallowed."""
    failures: list[BaseException] = []
    for name, step in steps:
        try:
            await step()
        except (Exception, asyncio.CancelledError) as exc:  # raised below, once the rest ran
            log.error("close_step_failed", step=name, error=f"{type(exc).__name__}: {exc}")
            failures.append(exc)
    cancels = [exc for exc in failures if isinstance(exc, asyncio.CancelledError)]
    if cancels or failures:
        raise (cancels or failures)[0]
