"""The spool's record format: one stream entry as a length- and CRC-framed JSON payload.

Record: an 8-byte header, `<u32 payload length><u32 crc32(payload)>` (little-endian), then
the payload: compact JSON of the FrameResult (its detections with their track ids, and its
object events as their stream fields) and the stream entry ID it was given, so a
replay writes the same ID and the sink's same-ID check recognises entries that had landed.
A record that fails the length or CRC check is torn or corrupt: reading stops there.

Segment: new segments start with an 8-byte header, `b"BSPL"` and `<u32 format version>`
(`SEGMENT_VERSION`), then records. Files written before the header existed start with a record
(their first 4 bytes, a payload length, can never read as `BSPL`: that is over `MAX_RECORD_BYTES`)
and are read as version 1. Any other version is refused (`SpoolFormatError`), never rewritten.
"""

from __future__ import annotations

import json
import struct
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from daemon.core.frames import Detection, FrameResult
from daemon.core.objects import parse_fields
from daemon.publish.schema import EntryId

HEADER = struct.Struct("<II")
MAX_RECORD_BYTES = 16 * 1024 * 1024
RECORD_VERSION = 1
SEGMENT_MAGIC = b"BSPL"
SEGMENT_VERSION = 2
SEGMENT_HEADER = SEGMENT_MAGIC + struct.pack("<I", SEGMENT_VERSION)
KNOWN_VERSIONS = (1, SEGMENT_VERSION)
MAX_FORMAT_VERSION = 0xFFFF
"""Above this a header's version is no format's number: the header was torn (a crash while the
segment was created, the file extended with zeros or stale blocks), not written by a newer daemon."""


class SpoolFormatError(ValueError):
    """A segment written by another (newer) format version: refused, left as it is."""


@dataclass(frozen=True, slots=True)
class SpoolRecord:
    """One spooled stream entry: the frame result and the entry ID it was given."""

    result: FrameResult
    entry_id: EntryId


def encode_record(record: SpoolRecord) -> bytes:
    r = record.result
    payload = json.dumps(
        {
            "v": RECORD_VERSION,
            "id": str(record.entry_id),
            "camera": r.camera_id,
            "seq": r.seq,
            "captured_ms": r.captured_ms,
            "w": r.width,
            "h": r.height,
            "model_size": r.model_size,
            "model_name": r.model_name,
            "dets": [[d.cls, d.label, d.score, *d.box, *(() if d.track is None else (d.track,))] for d in r.detections],
            **({"objects": [o.to_fields() for o in r.objects]} if r.objects else {}),
        },
        separators=(",", ":"),
    ).encode()
    return HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def decode_payload(payload: bytes) -> SpoolRecord:
    """The record in a checked payload; `captured_mono` is rebuilt from the wall-clock age."""
    doc: dict[str, Any] = json.loads(payload)
    age_s = max(0.0, (time.time_ns() // 1_000_000 - int(doc["captured_ms"])) / 1000)
    result = FrameResult(
        camera_id=str(doc["camera"]),
        seq=int(doc["seq"]),
        captured_ms=int(doc["captured_ms"]),
        captured_mono=time.monotonic() - age_s,
        width=int(doc["w"]),
        height=int(doc["h"]),
        model_size=int(doc["model_size"]),
        model_name=str(doc["model_name"]),
        detections=tuple(_detection(d) for d in doc["dets"]),
        objects=tuple(parse_fields(o) for o in doc.get("objects", ())),
    )
    return SpoolRecord(result, EntryId.parse(str(doc["id"])))


def _detection(row: list[Any]) -> Detection:
    """`[cls, label, score, x1, y1, x2, y2]`, with the track id as an eighth element when it has one."""
    c, label, score, x1, y1, x2, y2, *track = row
    box = (float(x1), float(y1), float(x2), float(y2))
    return Detection(int(c), str(label), float(score), box, int(track[0]) if track else None)


def read_record(f: IO[bytes], limit: int) -> bytes | None:
    """The next record's payload, or None at `limit` or at a torn/corrupt record."""
    start = f.tell()
    if start + HEADER.size > limit:
        return None
    length, crc = HEADER.unpack(f.read(HEADER.size))
    if length > MAX_RECORD_BYTES or start + HEADER.size + length > limit:
        return None
    payload = f.read(length)
    if len(payload) != length or zlib.crc32(payload) != crc:
        return None
    return payload


def segment_start(path: Path) -> int:
    """Where the segment's records begin: after its header, or 0 in a version-1 file (no header).

    SpoolFormatError for a version this code does not know (a newer daemon's segment: left as it is).
    A header cut short (a crash while the segment was created) reads as an empty segment whose records
    would begin after it; so does a header whose version no format has (0, or past
    `MAX_FORMAT_VERSION`: the magic survived, the rest is what the file system left there), since
    nothing after a torn header can be a record of ours that passes its CRC."""
    with path.open("rb") as f:
        head = f.read(len(SEGMENT_HEADER))
    if head[: len(SEGMENT_MAGIC)] != SEGMENT_MAGIC[: len(head)] or not head:
        return 0  # version 1: records from the first byte
    if len(head) < len(SEGMENT_HEADER):
        return len(SEGMENT_HEADER)
    (version,) = struct.unpack("<I", head[len(SEGMENT_MAGIC) :])
    if version not in KNOWN_VERSIONS and 0 < version <= MAX_FORMAT_VERSION:
        raise SpoolFormatError(f"{path.name}: spool format version {version}, this daemon reads {KNOWN_VERSIONS}")
    return len(SEGMENT_HEADER)


def scan_segment(path: Path, start: int) -> tuple[int, int, int]:
    """(complete records from `start`, offset after the last of them, file size)."""
    size = path.stat().st_size
    count, end = 0, min(start, size)
    with path.open("rb") as f:
        f.seek(end)
        while read_record(f, size) is not None:
            count += 1
            end = f.tell()
    return count, end, size


__all__ = [
    "HEADER",
    "SEGMENT_HEADER",
    "SpoolFormatError",
    "SpoolRecord",
    "decode_payload",
    "encode_record",
    "read_record",
    "scan_segment",
    "segment_start",
]
