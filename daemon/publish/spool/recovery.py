"""Opening a spool directory after any end of the previous run: clean exit, SIGKILL or power cut.

`recover(directory)` reads the cursor and checks every record after it (length and CRC,
`daemon.publish.spool.record`):
- A segment of a format version this code does not know (a newer daemon's spool after a
  downgrade) refuses the whole directory, `SpoolFormatError`, before anything in it is changed:
  the files are kept for the daemon that wrote them.
- A torn or corrupt record (the process or the power died mid-write) ends its segment: the records
  before it are kept, the bytes from it on are cut off (the file truncated there), and
  `spool_corrupt_tail` names the segment, the offset and the bytes cut. Logged once: the next
  open finds a clean file.
- Segments before the cursor's are already published (their deletion had not happened yet):
  deleted. A cursor that is unreadable or points past the records is replaced by the start of
  the oldest segment (published records come again; their IDs let the sink recognise them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import structlog

from daemon.publish.spool.record import scan_segment, segment_start
from daemon.publish.spool.writer import CURSOR, save_cursor, segment_name

log = structlog.get_logger("beltsight.spool")


class Position(NamedTuple):
    segment: int
    offset: int


@dataclass(frozen=True, slots=True)
class Recovered:
    segments: dict[int, int]
    """Segment number -> end of its valid records, ascending numbers."""
    starts: dict[int, int]
    """Segment number -> offset of its first record (after the format header, if any)."""
    cursor: Position
    count: int
    next_segment: int


def recover(directory: Path) -> Recovered:
    """What `directory` holds (see the module docstring). SpoolFormatError: refused, untouched."""
    directory.mkdir(parents=True, exist_ok=True)
    saved = load_cursor(directory)
    numbers = sorted(int(p.name[4:-4]) for p in directory.glob("seg-*.log") if p.name[4:-4].isdigit())
    starts = {number: segment_start(directory / segment_name(number)) for number in numbers}
    segments: dict[int, int] = {}
    count = 0
    for number in numbers:
        path = directory / segment_name(number)
        if saved is not None and number < saved.segment:
            path.unlink()  # consumed; its deletion had not happened yet
            del starts[number]
            continue
        begin = max(starts[number], saved.offset if saved is not None and number == saved.segment else 0)
        n, end, size = scan_segment(path, begin)
        if end < size:
            _cut(path, n, end, size)
        segments[number] = end
        count += n
    first = next(iter(segments), None)
    if saved is not None and saved.segment == first:
        cursor = Position(first, max(starts[first], min(saved.offset, segments[first])))
    else:
        cursor = Position(first, starts[first]) if first is not None else Position(0, 0)
    if saved is not None and saved != cursor:  # stale: it must never point past new segments
        if segments:
            save_cursor(directory, (cursor.segment, cursor.offset))
        else:
            (directory / CURSOR).unlink(missing_ok=True)
    if count:
        log.info("spool_opened", directory=str(directory), records=count, segments=len(segments))
    next_segment = max([*numbers, saved.segment if saved else 0]) + 1
    return Recovered(segments, starts, cursor, count, next_segment)


def _cut(path: Path, kept: int, end: int, size: int) -> None:
    """Truncate a torn or corrupt tail, logging what was cut (kept when the file is read-only)."""
    truncated = True
    try:
        with path.open("r+b") as f:
            f.truncate(end)
    except OSError:
        truncated = False  # the bytes stay, ignored: scanned and logged again next time
    log.warning(
        "spool_corrupt_tail",
        segment=path.name,
        offset=end,
        ignored_bytes=size - end,
        kept_records=kept,
        truncated=truncated,
    )


def load_cursor(directory: Path) -> Position | None:
    try:
        doc = json.loads((directory / CURSOR).read_text())
        return Position(int(doc["segment"]), int(doc["offset"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("spool_cursor_unreadable", directory=str(directory), reason=str(exc))
        return None  # replay from the oldest segment; published records are recognised by ID


__all__ = ["Position", "Recovered", "load_cursor", "recover"]
