"""daemon.core.tasks: the task group's spawn handle, stop_task against a task that swallows one
cancellation, run_together (all return, or the first error raised and the others stopped), and Tracked (short-lived
tasks: exceptions handed on, close ends and awaits them)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from daemon.core import tasks
from daemon.core.tasks import Tracked, run_together, spawner, stop_task


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


def test_tracked_hands_a_task_s_exception_on_and_forgets_the_task() -> None:
    """A short-lived task that raises: its exception goes to `on_error` with the task's name (retrieved:
    no "exception was never retrieved" at exit, which the warnings-as-errors run would fail on)."""
    failures: list[tuple[str, str]] = []

    async def scenario() -> int:
        tracked = Tracked(lambda name, exc: failures.append((name, repr(exc))))

        async def broken() -> None:
            raise KeyError("injected")

        task = tracked.start(broken(), "broken-1")
        await asyncio.wait([task])
        await asyncio.sleep(0)  # its done callback
        return len(tracked)

    assert asyncio.run(scenario()) == 0
    assert failures == [("broken-1", "KeyError('injected')")]


def test_tracked_close_cancels_the_tasks_still_running_and_waits_for_them() -> None:
    """`close` ends every task still running (one started by a task it cancels too) and returns
    only once each ended: none is left pending, none reported as a failure."""
    failures: list[str] = []
    ended: list[str] = []

    async def scenario() -> set[asyncio.Task[object]]:
        tracked = Tracked(lambda name, _exc: failures.append(name))

        async def slow(name: str) -> None:
            try:
                await asyncio.sleep(60)
            finally:
                if name == "first":  # a task starting another one as it ends
                    tracked.start(slow("late"), "late")
                ended.append(name)

        for name in ("first", "second"):
            tracked.start(slow(name), name)
        await asyncio.sleep(0)
        assert len(tracked) == 2
        await asyncio.wait_for(tracked.close(), 5)
        assert len(tracked) == 0
        return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}

    assert asyncio.run(scenario()) == set()
    assert sorted(ended) == ["first", "late", "second"] and failures == []


async def _slow_to_stop(started: list[asyncio.Task[object]], cleanup_s: float) -> None:
    """Runs until cancelled, then takes `cleanup_s` to end (re-cancels meanwhile swallowed)."""
    started.append(asyncio.current_task())  # type: ignore[arg-type]
    try:
        await asyncio.sleep(60)
    finally:
        until = asyncio.get_running_loop().time() + cleanup_s
        while asyncio.get_running_loop().time() < until:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0.01)


def test_run_together_stopped_by_stop_task_cancels_every_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller stopped by `stop_task`, whose repeat cancel lands while the children still take longer
    than `RECANCEL_S` to end: every child is still cancelled and ended (stopping them one by one, the
    repeat cancel left the rest running: read loops serving after intake stopped)."""
    monkeypatch.setattr(tasks, "RECANCEL_S", 0.05)

    async def scenario() -> list[bool]:
        children: list[asyncio.Task[object]] = []
        caller = asyncio.create_task(run_together({f"read-{i}": _slow_to_stop(children, 0.3) for i in range(3)}))
        await asyncio.sleep(0.05)
        assert len(children) == 3
        await asyncio.wait_for(stop_task(caller), 5)
        return [caller.cancelled(), *(child.done() for child in children)]

    assert asyncio.run(scenario()) == [True, True, True, True]


def test_tracked_close_interrupted_by_repeat_cancels_still_ends_every_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """`close` run by a task stopped with `stop_task`: its tasks slow to end are all ended all the same."""
    monkeypatch.setattr(tasks, "RECANCEL_S", 0.05)

    async def scenario() -> list[bool]:
        tracked = Tracked(lambda name, _exc: None)
        children: list[asyncio.Task[object]] = []
        for i in range(3):
            tracked.start(_slow_to_stop(children, 0.3), f"slow-{i}")
        await asyncio.sleep(0.01)
        closer = asyncio.create_task(tracked.close())
        await asyncio.sleep(0.01)
        await asyncio.wait_for(stop_task(closer), 5)
        return [closer.cancelled(), len(tracked) == 0, *(child.done() for child in children)]

    assert asyncio.run(scenario()) == [True, True, True, True, True]
