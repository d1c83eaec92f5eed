"""On-disk spool: an append-only FIFO of stream entries for outages longer than memory allows.

Layout of `redis.spool_dir`:

    seg-00000000000000000001.log   records in arrival order; a new segment starts when the
    seg-00000000000000000002.log   current one passes `segment_bytes`, and in each new process
    cursor                         {"segment": N, "offset": K}: the first record not yet
                                   published; absent means "start of the oldest segment"

Record: length, CRC32 and a JSON payload (`daemon.publish.spool_record`): the FrameResult and the
stream entry ID it was given, so a replay writes the same ID and the sink's same-ID check
recognises entries that had landed.

I/O off the event loop: the spool's index lives in memory and every file operation (create,
write, fsync, cursor save, delete) is handed, in order, to one writer thread
(`daemon.publish.spool_writer`), so a slow fsync (hundreds of ms on eMMC or an SD card) never stalls
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

Recovery: at open every record after the cursor is checked (length and crc). A torn or
corrupt record (a crash mid-write) ends its segment there: the records before it are kept,
`spool_corrupt_tail` is logged, the bytes after it are ignored, and new records go to a new
segment. Segments are deleted once every record in them is committed.

Not thread-safe: one owner (the sink, on the event loop); only the writer thread is internal.
"""

from __future__ import annotations

import errno
import io
import itertools
import json
from collections import deque
from pathlib import Path
from typing import IO, NamedTuple

import structlog

from daemon.publish.spool_record import SpoolRecord, decode_payload, encode_record, read_record, scan_segment
from daemon.publish.spool_writer import CURSOR as _CURSOR
from daemon.publish.spool_writer import Job, SpoolWriter, save_cursor
from daemon.publish.spool_writer import segment_name as _segment_name

log = structlog.get_logger("beltsight.spool")

DEFAULT_SEGMENT_BYTES = 8 * 1024 * 1024
HANDOFF_MAX_BYTES = 32 * 1024 * 1024
"""Appended bytes the writer thread may have yet to make durable before `append()` refuses more."""


class Position(NamedTuple):
    segment: int
    offset: int


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

    def __init__(
        self,
        directory: Path,
        *,
        max_bytes: int,
        segment_bytes: int,
        segments: dict[int, int],
        cursor: Position,
        count: int,
        next_segment: int,
    ) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self._segments = segments  # number -> end of its valid records, ascending numbers
        self._cursor = cursor
        self._read_pos = cursor
        self._handed_out: deque[tuple[Position, bool]] = deque()  # (end, decodable) per record read
        self._count = count
        self._next_segment = next_segment
        self._writer_segment = -1  # the segment appends go to (-1: start a new one)
        self._io = SpoolWriter(directory)
        self._tickets = itertools.count()
        self._unwritten: dict[int, dict[int, _Chunk]] = {}  # segment -> ticket -> chunk
        self._unwritten_bytes = 0
        self._write_error: OSError | None = None
        self._reader: IO[bytes] | None = None
        self._reader_segment = -1

    @classmethod
    def open(cls, directory: Path, max_bytes: int, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> Spool:
        """Open (creating) the spool, check every unpublished record, drop consumed segments."""
        directory.mkdir(parents=True, exist_ok=True)
        saved = _load_cursor(directory)
        numbers = sorted(int(p.name[4:-4]) for p in directory.glob("seg-*.log") if p.name[4:-4].isdigit())
        segments: dict[int, int] = {}
        count = 0
        for number in numbers:
            path = directory / _segment_name(number)
            if saved is not None and number < saved.segment:
                path.unlink()  # consumed; its deletion had not happened yet
                continue
            start = saved.offset if saved is not None and number == saved.segment else 0
            n, end, size = scan_segment(path, start)
            if end < size:
                log.warning("spool_corrupt_tail", segment=path.name, kept_records=n, ignored_bytes=size - end)
            segments[number] = end
            count += n
        first = next(iter(segments), None)
        if saved is not None and saved.segment == first:
            cursor = Position(saved.segment, min(saved.offset, segments[saved.segment]))
        else:
            cursor = Position(first if first is not None else 0, 0)
        if saved is not None and saved != cursor:  # stale: it must never point past new segments
            if segments:
                save_cursor(directory, (cursor.segment, cursor.offset))
            else:
                (directory / _CURSOR).unlink(missing_ok=True)
        if count:
            log.info("spool_opened", directory=str(directory), records=count, segments=len(segments))
        next_segment = max([*numbers, saved.segment if saved else 0]) + 1
        return cls(
            directory,
            max_bytes=max_bytes,
            segment_bytes=segment_bytes,
            segments=segments,
            cursor=cursor,
            count=count,
            next_segment=next_segment,
        )

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
        self._io.submit(Job("create", number))
        self._segments[number] = 0
        if len(self._segments) == 1:
            self._cursor = self._read_pos = Position(number, 0)
        self._writer_segment = number
        return number

    def _close_writer(self) -> None:
        if self._writer_segment >= 0:
            self._io.submit(Job("seal", self._writer_segment))
        self._writer_segment = -1

    def _reap(self) -> None:
        """Take in the writer's reports: durable chunks leave memory; a failure is kept for `append`."""
        for done in self._io.completed():
            if done.error is None:
                chunk = self._unwritten.get(done.segment, {}).pop(done.ticket, None)
                if chunk is not None:
                    self._unwritten_bytes -= len(chunk.data)
                continue
            self._write_error = done.error  # the chunk stays readable from memory
            if done.segment == self._writer_segment:
                self._writer_segment = -1  # nothing more after the hole: a new segment

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
            except (ValueError, KeyError, TypeError) as exc:  # crc fine, content not ours
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
            pos = Position(later[0], 0)
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
            self._cursor = Position(min(self._segments), 0)
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


def _load_cursor(directory: Path) -> Position | None:
    try:
        doc = json.loads((directory / _CURSOR).read_text())
        return Position(int(doc["segment"]), int(doc["offset"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("spool_cursor_unreadable", directory=str(directory), reason=str(exc))
        return None  # replay from the oldest segment; published records are recognised by ID


__all__ = ["DEFAULT_SEGMENT_BYTES", "HANDOFF_MAX_BYTES", "Spool", "SpoolRecord"]
