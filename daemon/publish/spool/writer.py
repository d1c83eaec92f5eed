"""The spool's file I/O on a thread of its own, so a slow disk never stalls the event loop.

`Spool` (`daemon.publish.spool.store`, on the event loop) decides everything and keeps its index in memory;
it hands each file operation to `SpoolWriter`, which runs them on one thread strictly in the
order given (FIFO): create a segment (its format header fsync'd, and the directory), append bytes, seal a full
segment, save or remove the cursor, delete a segment, close. Appends queued together are
written one after the other and made durable with one fsync per segment ("group commit"), so
the disk's fsync latency bounds how often data reaches the disk, not how fast entries arrive.

`completed()` reports, per append ticket, whether its bytes are on disk (written and fsync'd).
After a failed write or fsync the segment is truncated back to its last durable byte and
closed; its later appends fail too (the caller starts a new segment). A failure to save the
cursor is logged (`spool_write_failed`): it only means replaying records already published,
which carry their IDs.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

import structlog

from daemon.core.ratelimit import RateLimited

log = structlog.get_logger("beltsight.spool")

CURSOR = "cursor"
ERROR_LOG_INTERVAL_S = 5.0

Kind = Literal["create", "append", "seal", "cursor", "drop_cursor", "delete"]


def segment_name(number: int) -> str:
    return f"seg-{number:020d}.log"


@dataclass(frozen=True, slots=True)
class Job:
    kind: Kind
    segment: int = -1
    data: bytes = b""
    ticket: int = -1
    cursor: tuple[int, int] = (0, 0)


@dataclass(frozen=True, slots=True)
class Done:
    """The outcome of one append: `error` is None when its bytes are durable."""

    ticket: int
    segment: int
    error: OSError | None


class SpoolWriter:
    """One thread executing `Job`s in order for one spool directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._cond = threading.Condition()
        self._jobs: deque[Job] = deque()
        self._busy = False
        self._closing = False
        self._done: deque[Done] = deque()
        self._files: dict[int, IO[bytes]] = {}
        self._durable: dict[int, int] = {}  # segment -> bytes known to be on disk
        self._broken: dict[int, OSError] = {}  # segment -> why it takes no more writes
        self._errors = RateLimited(ERROR_LOG_INTERVAL_S)  # the writer thread's own
        self._thread = threading.Thread(target=self._run, name="spool-writer", daemon=True)
        self._thread.start()

    # -- the caller's side (event loop) ---------------------------------------------------------

    def submit(self, job: Job) -> None:
        with self._cond:
            if self._closing:
                raise RuntimeError("spool writer is closed")
            self._jobs.append(job)
            self._cond.notify()

    def completed(self) -> list[Done]:
        """Appends finished since the last call (thread-safe, never blocks on I/O)."""
        out: list[Done] = []
        while self._done:
            out.append(self._done.popleft())
        return out

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until every job submitted so far has run (not for the event loop)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._jobs and not self._busy, timeout)

    def close(self) -> None:
        """Run what is queued, close the files and end the thread (blocks)."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join()

    # -- the writer thread ------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._jobs or self._closing)
                if not self._jobs:
                    break
                batch = list(self._jobs)
                self._jobs.clear()
                self._busy = True
            try:
                self._execute(batch)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
        for number in list(self._files):
            self._close(number)

    def _execute(self, batch: list[Job]) -> None:
        written: list[Job] = []  # appends whose bytes are written, not yet fsync'd
        for job in batch:
            if job.kind == "append":
                if self._write(job):
                    written.append(job)
                continue
            if job.kind in ("seal", "delete", "cursor") and written:
                written = self._sync(written)  # keep the order: durable before it is closed/removed
            self._other(job)
        self._sync(written)

    def _write(self, job: Job) -> bool:
        if job.segment in self._broken:
            self._done.append(Done(job.ticket, job.segment, self._earlier(job.segment, "write")))
            return False
        f = self._files.get(job.segment)
        try:
            if f is None:
                f = self._files[job.segment] = (self.directory / segment_name(job.segment)).open("ab")
            f.write(job.data)
            f.flush()
        except OSError as exc:
            self._fail(job.segment, exc)
            self._done.append(Done(job.ticket, job.segment, exc))
            return False
        return True

    def _sync(self, written: list[Job]) -> list[Job]:
        for number in {j.segment for j in written}:
            f = self._files.get(number)
            if f is None or number in self._broken:
                continue
            try:
                os.fsync(f.fileno())
                self._durable[number] = f.tell()
            except OSError as exc:
                self._fail(number, exc)
        for job in written:
            error = self._earlier(job.segment, "fsync") if job.segment in self._broken else None
            self._done.append(Done(job.ticket, job.segment, error))
        return []

    def _earlier(self, number: int, what: str) -> OSError:
        cause = self._broken[number]
        return OSError(cause.errno, f"{what} of {segment_name(number)} failed: {cause.strerror or cause}")

    def _fail(self, number: int, exc: OSError) -> None:
        """A write or fsync failed: cut the segment back to what is durable, write no more to it."""
        self._broken[number] = exc
        self._log_error(exc)
        f = self._files.pop(number, None)
        if f is None:
            return
        try:
            f.truncate(self._durable.get(number, 0))
        except OSError:
            pass  # the next open's scan ends the segment at its last complete record
        finally:
            _close_quietly(f)

    def _other(self, job: Job) -> None:
        try:
            if job.kind == "create":
                self._create(job)
            elif job.kind == "seal":
                self._close(job.segment)
            elif job.kind == "delete":
                self._close(job.segment)
                self._broken.pop(job.segment, None)
                self._durable.pop(job.segment, None)
                (self.directory / segment_name(job.segment)).unlink(missing_ok=True)
            elif job.kind == "cursor":
                save_cursor(self.directory, job.cursor)
            elif job.kind == "drop_cursor":
                (self.directory / CURSOR).unlink(missing_ok=True)
        except OSError as exc:
            if job.kind == "create":
                self._broken[job.segment] = exc
            self._log_error(exc)

    def _create(self, job: Job) -> None:
        """A new segment with its format header (`job.data`), durable, its directory entry too."""
        path = self.directory / segment_name(job.segment)
        with path.open("xb", buffering=0) as f:
            try:
                if f.write(job.data) != len(job.data):
                    raise OSError(errno.ENOSPC, "header cut short")
                os.fsync(f.fileno())
            except OSError:
                f.truncate(0)  # no half header: the next open reads an empty segment
                raise
        self._durable[job.segment] = len(job.data)
        _fsync_dir(self.directory)

    def _close(self, number: int) -> None:
        f = self._files.pop(number, None)
        if f is not None:
            _close_quietly(f)

    def _log_error(self, exc: OSError) -> None:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return  # the spool logs a full disk once per state change (spool_disk_full)
        if self._errors.allow() is not None:
            log.error("spool_write_failed", directory=str(self.directory), reason=str(exc))


def _close_quietly(f: IO[bytes]) -> None:
    with contextlib.suppress(OSError):
        f.close()


def save_cursor(directory: Path, cursor: tuple[int, int]) -> None:
    """Atomically: temp file, fsync, rename (a crash leaves the old cursor or the new one)."""
    tmp = directory / (CURSOR + ".tmp")
    with tmp.open("w") as f:
        json.dump({"segment": cursor[0], "offset": cursor[1]}, f)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(directory / CURSOR)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["CURSOR", "Done", "Job", "SpoolWriter", "save_cursor", "segment_name"]
