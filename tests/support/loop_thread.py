"""An asyncio loop in a thread of its own, for tests that serve from the loop and call it blocking
(urllib, http.client, a browser) from the test's thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """`with LoopThread() as loop: loop.run(coro)`: the coroutine runs on the thread's loop; the
    loop stops and the thread is joined on exit."""

    def __init__(self, timeout_s: float = 60.0, name: str = "test-loop") -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._timeout_s = timeout_s

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The thread's loop (for `asyncio.run_coroutine_threadsafe` with a deadline of the caller's own)."""
        return self._loop

    def __enter__(self) -> LoopThread:
        self._thread.start()
        return self

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(self._timeout_s)

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(self._timeout_s)
        self._loop.close()
