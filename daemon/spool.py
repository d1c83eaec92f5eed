"""On-disk spool: an append-only FIFO of stream entries for outages longer than memory allows.

Layout of `redis.spool_dir`:

    seg-00000000000000000001.log   records in arrival order; a new segment starts when the
    seg-00000000000000000002.log   current one passes `segment_bytes`, and in each new process
    cursor                         {"segment": N, "offset": K}: the first record not yet
                                   published; absent means "start of the oldest segment"

Record: length, CRC32 and a JSON payload (`daemon.spool_record`): the FrameResult and the
stream entry ID it was given, so a replay writes the same ID and the sink's same-ID check
recognises entries that had landed.

Durability (fsync policy): every `append()` batch is one `write()`, flushed and fsync'd
before it returns (one fsync per spill batch, not per entry); a new segment's directory entry
is fsync'd too. The cursor is rewritten on each `commit()` (temp file, fsync, rename). Losing
a cursor update only means replaying records that were already published; they carry their
IDs, so the sink counts them as published instead of writing them twice.

Recovery: at open every record after the cursor is checked (length and crc). A torn or
corrupt record (a crash mid-write) ends its segment there: the records before it are kept,
`spool_corrupt_tail` is logged, the bytes after it are ignored, and new records go to a new
segment. Segments are deleted once every record in them is committed.

Not thread-safe: one owner (the sink, on the event loop).
"""

from __future__ import annotations

import json
import os
from collections import deque
from pathlib import Path
from typing import IO, NamedTuple

import structlog

from daemon.spool_record import SpoolRecord, decode_payload, encode_record, read_record, scan_segment

log = structlog.get_logger("beltsight.spool")

DEFAULT_SEGMENT_BYTES = 8 * 1024 * 1024
_CURSOR = "cursor"


class Position(NamedTuple):
    segment: int
    offset: int


def _segment_name(number: int) -> str:
    return f"seg-{number:020d}.log"


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
        self._writer: IO[bytes] | None = None
        self._writer_segment = -1
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
                _save_cursor(directory, cursor)
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
        """Write `records` after the last one and fsync; on an OSError nothing is added."""
        if not records:
            return
        data = b"".join(encode_record(r) for r in records)
        writer = self._writer if self._writer is not None else self._new_segment()
        segment = self._writer_segment
        try:
            writer.write(data)
            writer.flush()
            os.fsync(writer.fileno())
        except OSError:
            self._close_writer(truncate_to=self._segments[segment])
            raise
        self._segments[segment] += len(data)
        self._count += len(records)
        if self._segments[segment] >= self.segment_bytes:
            self._close_writer()

    def _new_segment(self) -> IO[bytes]:
        number = self._next_segment
        self._next_segment += 1
        writer = (self.directory / _segment_name(number)).open("xb")
        self._segments[number] = 0
        if len(self._segments) == 1:
            self._cursor = self._read_pos = Position(number, 0)
        _fsync_dir(self.directory)
        self._writer, self._writer_segment = writer, number
        return writer

    def _close_writer(self, truncate_to: int | None = None) -> None:
        writer, self._writer = self._writer, None
        if writer is None:
            return
        try:
            if truncate_to is not None:
                writer.truncate(truncate_to)  # a failed batch must not leave half a record
        finally:
            writer.close()

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
        if self._reader is None or self._reader_segment != pos.segment:
            self._close_reader()
            self._reader = (self.directory / _segment_name(pos.segment)).open("rb")
            self._reader_segment = pos.segment
        self._reader.seek(pos.offset)
        payload = read_record(self._reader, self._segments[pos.segment])
        if payload is None:  # checked at open; changed under us: end this segment here
            self._segments[pos.segment] = pos.offset
            self._read_pos = pos
            return self._next_payload()
        self._read_pos = Position(pos.segment, self._reader.tell())
        self._handed_out.append((self._read_pos, True))
        return payload

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
        _save_cursor(self.directory, self._cursor)

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
        (self.directory / _CURSOR).unlink(missing_ok=True)
        for number in list(self._segments):
            self._delete_segment(number)
        self._cursor = self._read_pos = Position(self._next_segment, 0)
        self._handed_out.clear()

    def _delete_segment(self, number: int) -> None:
        if number == self._writer_segment:
            self._close_writer()
        if number == self._reader_segment:
            self._close_reader()
        del self._segments[number]
        (self.directory / _segment_name(number)).unlink(missing_ok=True)

    def _close_reader(self) -> None:
        reader, self._reader, self._reader_segment = self._reader, None, -1
        if reader is not None:
            reader.close()

    def close(self) -> None:
        """Close the files; the records stay on disk for the next open."""
        self._close_writer()
        self._close_reader()


def _load_cursor(directory: Path) -> Position | None:
    try:
        doc = json.loads((directory / _CURSOR).read_text())
        return Position(int(doc["segment"]), int(doc["offset"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("spool_cursor_unreadable", directory=str(directory), reason=str(exc))
        return None  # replay from the oldest segment; published records are recognised by ID


def _save_cursor(directory: Path, cursor: Position) -> None:
    tmp = directory / (_CURSOR + ".tmp")
    with tmp.open("w") as f:
        json.dump({"segment": cursor.segment, "offset": cursor.offset}, f)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(directory / _CURSOR)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["DEFAULT_SEGMENT_BYTES", "Spool", "SpoolRecord"]
