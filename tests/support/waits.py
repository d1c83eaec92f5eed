"""Polling for a condition with a deadline: `wait_until` from threads, `async_wait_until` in a loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol


class MayFail(Protocol):
    """Something running beside the test that records why it died (an `InProcessDaemon`)."""

    @property
    def error(self) -> BaseException | None: ...


def wait_until(
    predicate: Callable[[], bool], timeout_s: float, what: str, daemon: MayFail | None = None, *, poll_s: float = 0.05
) -> None:
    """Return once `predicate()` holds; fail naming `what` after `timeout_s`, or at once when
    `daemon` has failed meanwhile."""
    deadline = time.monotonic() + timeout_s
    while True:
        if daemon is not None and daemon.error is not None:
            raise AssertionError(f"daemon failed while waiting for {what}") from daemon.error
        if predicate():
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(poll_s)


async def async_wait_until(cond: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """`wait_until` for coroutines: polls every 10 ms without blocking the event loop."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)
