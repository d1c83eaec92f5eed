"""`FileWorker`: one thread that takes jobs from a bounded queue and writes files, off the event loop.

Policy: `offer` never waits (a full queue refuses the job: the caller counts it as dropped, and the
frame or event it came with goes on unaffected); the thread handles jobs in order and calls `tick`
when it has been idle for `tick_s` (retention). `stop` lets the thread finish what is queued within a
deadline. `write_atomic` makes a file appear whole (written beside, then renamed); `failure_reason`
names an `OSError` for the drop counters (`disk_full` or `write_error`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

J = TypeVar("J")
CLOSING_POLL_S = 0.05


class FileWorker(Generic[J]):
    """A bounded queue of jobs and the one thread that handles them (see the module docstring)."""

    def __init__(
        self,
        name: str,
        size: int,
        handle: Callable[[J], None],
        *,
        prepare: Callable[[], None],
        tick: Callable[[], None],
        tick_s: float = 60.0,
    ) -> None:
        self.name = name
        self._handle = handle
        self._prepare = prepare
        self._tick = tick
        self._tick_s = tick_s
        self._jobs: queue.Queue[J | None] = queue.Queue(maxsize=size)
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()

    def offer(self, job: J) -> bool:
        """Queue `job` without waiting; False when the queue is full (the job is not taken)."""
        try:
            self._jobs.put_nowait(job)
        except queue.Full:
            return False
        return True

    def start(self) -> None:
        """Start the thread (it runs `prepare` first: create the directory, index it)."""
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Handle what is queued (within `timeout_s`), then end the thread (blocks: call it off the loop)."""
        if self._thread is None:
            return
        self._closing.set()
        with contextlib.suppress(queue.Full):  # full: the thread ends when it finds the queue empty
            self._jobs.put_nowait(None)
        self._thread.join(timeout_s)
        self._thread = None

    def _run(self) -> None:
        self._prepare()
        while True:
            try:
                job = self._jobs.get(timeout=CLOSING_POLL_S if self._closing.is_set() else self._tick_s)
            except queue.Empty:
                if self._closing.is_set():
                    return
                self._tick()
                continue
            if job is None:
                return
            self._handle(job)


def write_atomic(target: Path, data: bytes) -> None:
    """Write `data` to `target` so that it appears whole (a temporary file beside it, then a rename);
    creates the parent folders. On OSError nothing is left behind and the error is raised."""
    temporary = target.with_name(f".{target.name}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(temporary, "wb") as out:
            out.write(data)
        os.replace(temporary, target)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise


def failure_reason(exc: OSError) -> str:
    """`disk_full` (no space, or over quota) or `write_error` (anything else)."""
    return "disk_full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "write_error"


__all__ = ["FileWorker", "failure_reason", "write_atomic"]
