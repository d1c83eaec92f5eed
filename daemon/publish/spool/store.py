"""On-disk spool: an append-only FIFO of stream entries for outages longer than memory allows.

Layout of `redis.spool_dir`:

    seg-00000000000000000001.log   records in arrival order; a new segment starts when the
    seg-00000000000000000002.log   current one passes `segment_bytes`, and in each new process
    cursor                         {"segment": N, "offset": K}: the first record not yet
                                   published; absent means "start of the oldest segment"

Record: length, CRC32 and a JSON payload (`daemon.publish.spool.record`): the FrameResult and the
stream entry ID it was given, so a replay writes the same ID and the sink's same-ID check
recognises entries that had landed.

I/O off the event loop: the spool's index lives in memory and every file operation (create,
write, fsync, cursor save, delete) is handed, in order, to one writer thread
(`daemon.publish.spool.writer`), so a slow fsync (hundreds of ms on eMMC or an SD card) never stalls
the loop. Until the writer reports an appended batch durable, its bytes stay in memory too and
reads are served from there. The hand-off is bounded (`HANDOFF_MAX_BYTES` not yet on disk):
beyond it `append()` raises OSError at once, as for a failed write, and the caller keeps the
entries in memory or drops the oldest (counted) rather than block.

Durability (fsync policy): the writer fsyncs each segment once per batch of appends it finds
queued (group commit), a new segment's directory entry too, so data reaches the disk within
about one fsync's time of `append()`; a process killed before that loses those entries as it
loses the memory buffer, and what did reach the file is always a prefix of what was appended
(one thread, FIFO). The cursor is rewritten after each `commit()` (temp file, fsync, rename).
Losing a cursor update only means replaying records that were already published; they carry
their IDs, so the sink counts them as published instead of writing them twice. A write or
fsync that fails is reported by the next `append()` (OSError, nothing added); the batches it
concerned are still readable from memory (published this run, not after a restart), and new
records go to a new segment. `flush()` waits for the writer (tests, shutdown).

A full disk (ENOSPC, EDQUOT): the failed append is handled as any failed write (cut back, kept
in memory, the next `append()` raises), and `spool_disk_full` is logged once; `spool_disk_ok`
once when an append reaches the disk again.

Format: each new segment starts with a version header (`daemon.publish.spool.record`); files
without one (older daemons) are read as version 1. Recovery at open (`daemon.publish.spool.recovery`):
every record after the cursor is checked, a torn or corrupt tail is cut off (logged once:
`spool_corrupt_tail`), a directory holding a segment of an unknown version is refused
(`SpoolFormatError`) and left untouched. New records go to a new segment. Segments are deleted
once every record in them is committed.

Not thread-safe: one owner (the sink, on the event loop); only the writer thread is internal.
"""

from __future__ import annotations

import errno
import io
import itertools
from collections import deque
from pathlib import Path
from typing import IO, NamedTuple

import structlog

from daemon.publish.spool.record import SEGMENT_HEADER, SpoolRecord, decode_payload, encode_record, read_record
from daemon.publish.spool.recovery import Position, Recovered, recover
from daemon.publish.spool.writer import Job, SpoolWriter
from daemon.publish.spool.writer import segment_name as _segment_name

log = structlog.get_logger("beltsight.spool")

DEFAULT_SEGMENT_BYTES = 8 * 1024 * 1024
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
HANDOFF_MAX_BYTES = 32 * 1024 * 1024
"""Appended bytes the writer thread may have yet to make durable before `append()` refuses more."""


class _Chunk(NamedTuple):
    """One appended batch not yet reported durable: its segment offset and bytes."""

    offset: int
    data: bytes


class Spool:
    """A durable FIFO of SpoolRecords in `directory` (see the module docstring for the format).

    Reading is two-phase: `read(n)` hands out records past the read position; `commit(n)`
    makes the first n handed-out records gone for good (they were published or dropped);
    `rewind()` hands them out again on the next read. `trim()` drops the oldest records while
    the spool is larger than `max_bytes` and returns how many per camera, for counting.
    """

    def __init__(self, directory: Path, *, max_bytes: int, segment_bytes: int, found: Recovered) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self._segments = found.segments  # number -> end of its valid records, ascending numbers
        self._starts = found.starts  # number -> offset of its first record (after the header)
        self._cursor = self._read_pos = found.cursor
        self._handed_out: deque[tuple[Position, bool]] = deque()  # (end, decodable) per record read
        self._count = found.count
        self._next_segment = found.next_segment
        self._writer_segment = -1  # the segment appends go to (-1: start a new one)
        self._io = SpoolWriter(directory)
        self._tickets = itertools.count()
        self._unwritten: dict[int, dict[int, _Chunk]] = {}  # segment -> ticket -> chunk
        self._unwritten_bytes = 0
        self._write_error: OSError | None = None
        self.disk_full = False
        """The last append the writer finished failed for want of space (ENOSPC, EDQUOT)."""
        self._reader: IO[bytes] | None = None
        self._reader_segment = -1

    @classmethod
    def open(cls, directory: Path, max_bytes: int, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> Spool:
        """Open (creating) the spool: `daemon.publish.spool.recovery` checks every unpublished record,
        cuts a torn tail, drops consumed segments. SpoolFormatError: another format version, untouched."""
        return cls(directory, max_bytes=max_bytes, segment_bytes=segment_bytes, found=recover(directory))

    # -- sizes ---------------------------------------------------------------------------------

    def __len__(self) -> int:
        """Records not yet committed (handed-out ones included)."""
        return self._count

    @property
    def unread(self) -> int:
        return self._count - len(self._handed_out)

    @property
    def size_bytes(self) -> int:
        """Bytes of records not yet committed."""
        return self._bytes_after(self._cursor)

    # -- writing -------------------------------------------------------------------------------

    def append(self, records: list[SpoolRecord]) -> None:
        """Hand `records` to the writer after the last one (never blocks on the disk).

        OSError, with nothing added: an earlier batch failed to reach the disk, or the writer is
        more than `HANDOFF_MAX_BYTES` behind."""
        if not records:
            return
        self._reap()
        if self._write_error is not None:
            error, self._write_error = self._write_error, None
            raise error
        data = b"".join(encode_record(r) for r in records)
        if self._unwritten_bytes + len(data) > HANDOFF_MAX_BYTES:
            behind = self._unwritten_bytes // (1024 * 1024)
            raise OSError(errno.EAGAIN, f"spool writer behind: {behind} MiB not yet on disk")
        segment = self._writer_segment if self._writer_segment >= 0 else self._new_segment()
        ticket = next(self._tickets)
        self._unwritten.setdefault(segment, {})[ticket] = _Chunk(self._segments[segment], data)
        self._unwritten_bytes += len(data)
        self._io.submit(Job("append", segment, data=data, ticket=ticket))
        self._segments[segment] += len(data)
        self._count += len(records)
        if self._segments[segment] >= self.segment_bytes:
            self._close_writer()

    def _new_segment(self) -> int:
        number = self._next_segment
        self._next_segment += 1
        self._io.submit(Job("create", number, data=SEGMENT_HEADER))
        self._segments[number] = self._starts[number] = len(SEGMENT_HEADER)
        if len(self._segments) == 1:
            self._cursor = self._read_pos = Position(number, len(SEGMENT_HEADER))
        self._writer_segment = number
        return number

    def _close_writer(self) -> None:
        if self._writer_segment >= 0:
            self._io.submit(Job("seal", self._writer_segment))
        self._writer_segment = -1

    def _reap(self) -> None:
        """Take in the writer's reports: durable chunks leave memory; a failure is kept for `append`."""
        for done in self._io.completed():
            self._disk_state(done.error)
            if done.error is None:
                chunk = self._unwritten.get(done.segment, {}).pop(done.ticket, None)
                if chunk is not None:
                    self._unwritten_bytes -= len(chunk.data)
                continue
            self._write_error = done.error  # the chunk stays readable from memory
            if done.segment == self._writer_segment:
                self._writer_segment = -1  # nothing more after the hole: a new segment

    def _disk_state(self, error: OSError | None) -> None:
        """Log a full disk once when appends start failing for want of space, and once when one works again."""
        full = error is not None and error.errno in NO_SPACE
        if full == self.disk_full or (error is not None and not full):
            return
        self.disk_full = full
        if full:
            log.error("spool_disk_full", directory=str(self.directory), reason=str(error), records=self._count)
        else:
            log.info("spool_disk_ok", directory=str(self.directory), records=self._count)

    def poll(self) -> None:
        """Take in what the writer finished (never blocks): a full disk is noticed and logged."""
        self._reap()

    def flush(self) -> None:
        """Block until everything handed to the writer is on disk; OSError if some of it failed
        (not for the event loop: tests and shutdown)."""
        self._io.wait_idle()
        self._reap()
        if self._write_error is not None:
            error, self._write_error = self._write_error, None
            raise error

    # -- reading -------------------------------------------------------------------------------

    def read(self, n: int) -> list[SpoolRecord]:
        """Up to n records after the read position, in order (they stay until committed)."""
        out: list[SpoolRecord] = []
        while len(out) < n and self.unread > 0:
            payload = self._next_payload()
            if payload is None:
                break
            try:
                out.append(decode_payload(payload))
            except (ValueError, KeyError, TypeError, OverflowError) as exc:  # crc fine, content not ours (Infinity)
                log.error("spool_record_unreadable", position=str(self._read_pos), reason=str(exc))
                self._handed_out[-1] = (self._handed_out[-1][0], False)
        return out

    def _next_payload(self) -> bytes | None:
        pos = self._read_pos
        while pos.offset >= self._segments.get(pos.segment, 0):  # segment done: the next one
            later = [s for s in self._segments if s > pos.segment]
            if not later:
                log.error("spool_count_mismatch", expected=self.unread)
                self._count = len(self._handed_out)
                return None
            pos = Position(later[0], self._starts.get(later[0], 0))
        payload, end = self._read_at(pos)
        if payload is None:  # checked at open; changed under us: end this segment here
            self._segments[pos.segment] = pos.offset
            self._read_pos = pos
            return self._next_payload()
        self._read_pos = Position(pos.segment, end)
        self._handed_out.append((self._read_pos, True))
        return payload

    def _read_at(self, pos: Position) -> tuple[bytes | None, int]:
        """The record at `pos` and the offset after it: from memory while its batch is not yet
        reported durable, else from the file (page cache: written before it was reported)."""
        self._reap()
        for chunk in self._unwritten.get(pos.segment, {}).values():
            if chunk.offset <= pos.offset < chunk.offset + len(chunk.data):
                buf = io.BytesIO(chunk.data)
                buf.seek(pos.offset - chunk.offset)
                return read_record(buf, len(chunk.data)), chunk.offset + buf.tell()
        if self._reader is None or self._reader_segment != pos.segment:
            self._close_reader()
            self._reader = (self.directory / _segment_name(pos.segment)).open("rb")
            self._reader_segment = pos.segment
        self._reader.seek(pos.offset)
        return read_record(self._reader, self._segments[pos.segment]), self._reader.tell()

    def commit(self, n: int) -> None:
        """The first n records handed out (by read) are done: advance the cursor, delete used segments.

        Undecodable records handed out before or right after them (logged by `read`) go too.
        """
        readable = sum(ok for _, ok in self._handed_out)
        if not 0 <= n <= readable:
            raise ValueError(f"commit({n}) with {readable} records handed out")
        popped = 0
        while self._handed_out and (n > 0 or not self._handed_out[0][1]):
            self._cursor, ok = self._handed_out.popleft()
            n -= ok
            popped += 1
        if popped == 0:
            return
        self._count -= popped
        if self._count == 0:
            self._reset()
            return
        for number in [s for s in self._segments if s < self._cursor.segment]:
            self._delete_segment(number)
        if self._cursor.offset >= self._segments[self._cursor.segment] and self._cursor.segment != max(self._segments):
            self._delete_segment(self._cursor.segment)
            first = min(self._segments)
            self._cursor = Position(first, self._starts.get(first, 0))
        self._io.submit(Job("cursor", cursor=(self._cursor.segment, self._cursor.offset)))

    def rewind(self) -> None:
        """Forget what was handed out: the next read starts again at the cursor."""
        self._handed_out.clear()
        self._read_pos = self._cursor

    def trim(self) -> dict[str, int]:
        """Drop the oldest records while over `max_bytes` (rewinds first); return drops per camera."""
        self.rewind()
        dropped: dict[str, int] = {}
        while self._bytes_after(self._read_pos) > self.max_bytes and self.unread > 0:
            for record in self.read(1):
                camera = record.result.camera_id
                dropped[camera] = dropped.get(camera, 0) + 1
        self.commit(sum(dropped.values()))
        self.rewind()
        return dropped

    def _bytes_after(self, pos: Position) -> int:
        later = sum(end for number, end in self._segments.items() if number > pos.segment)
        return later + max(0, self._segments.get(pos.segment, 0) - pos.offset)

    # -- housekeeping ----------------------------------------------------------------------------

    def _reset(self) -> None:
        """Everything is published: remove the cursor first (a crash in between only replays)."""
        self._close_writer()
        self._close_reader()
        self._io.submit(Job("drop_cursor"))
        for number in list(self._segments):
            self._delete_segment(number)
        self._cursor = self._read_pos = Position(self._next_segment, 0)
        self._handed_out.clear()

    def _delete_segment(self, number: int) -> None:
        if number == self._writer_segment:
            self._writer_segment = -1
        if number == self._reader_segment:
            self._close_reader()
        del self._segments[number]
        self._starts.pop(number, None)
        for chunk in self._unwritten.pop(number, {}).values():  # committed: no longer needed
            self._unwritten_bytes -= len(chunk.data)
        self._io.submit(Job("delete", number))

    def _close_reader(self) -> None:
        reader, self._reader, self._reader_segment = self._reader, None, -1
        if reader is not None:
            reader.close()

    def close(self) -> None:
        """Let the writer finish (blocks), close the files; the records stay on disk for the next open."""
        self._close_writer()
        self._close_reader()
        self._io.close()
        self._reap()


__all__ = ["DEFAULT_SEGMENT_BYTES", "HANDOFF_MAX_BYTES", "NO_SPACE", "Spool", "SpoolRecord"]
