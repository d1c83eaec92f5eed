"""daemon.core.tasks: the task group's spawn handle, stop_task against a task that swallows one
cancellation, and run_together (all return, or the first error raised and the others stopped)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from daemon.core import tasks
from daemon.core.tasks import run_together, spawner, stop_task


def test_spawn_starts_a_named_task_in_the_group() -> None:
    async def scenario() -> list[str]:
        ran: list[str] = []

        async def work() -> None:
            ran.append(asyncio.current_task().get_name())  # type: ignore[union-attr]

        async with asyncio.TaskGroup() as group:
            spawner(group)(work(), "worker")
        return ran

    assert asyncio.run(scenario()) == ["worker"]


def test_stop_task_ends_a_task_that_swallows_one_cancellation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tasks, "RECANCEL_S", 0.05)

    async def stubborn() -> None:
        with contextlib.suppress(asyncio.CancelledError):  # a library racing its own timeout
            await asyncio.sleep(60)
        await asyncio.sleep(60)

    async def scenario() -> bool:
        task = asyncio.create_task(stubborn())
        await asyncio.sleep(0)
        await asyncio.wait_for(stop_task(task), 5)
        return task.cancelled()

    assert asyncio.run(scenario())


def test_run_together_returns_once_all_returned() -> None:
    async def scenario() -> list[int]:
        done: list[int] = []

        async def one(n: int) -> None:
            await asyncio.sleep(0.01 * n)
            done.append(n)

        await run_together({f"loop-{n}": one(n) for n in (3, 1, 2)})
        return done

    assert asyncio.run(scenario()) == [1, 2, 3]


def test_run_together_raises_the_first_error_itself_and_stops_the_others() -> None:
    async def scenario() -> tuple[BaseException | None, bool]:
        other = asyncio.Event()

        async def forever() -> None:
            try:
                await asyncio.sleep(60)
            finally:
                other.set()

        async def broken() -> None:
            await asyncio.sleep(0.01)
            raise ConnectionError("gone")

        error: BaseException | None = None
        try:
            await run_together({"forever": forever(), "broken": broken()})
        except ConnectionError as exc:  # not an ExceptionGroup: the caller's `except` sees it
            error = exc
        return error, other.is_set() and asyncio.all_tasks() == {asyncio.current_task()}

    error, stopped = asyncio.run(scenario())
    assert isinstance(error, ConnectionError) and stopped
