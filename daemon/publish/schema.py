"""Redis stream entries, schema version 1: the contract PLC programmers rely on.

One entry per processed frame (frames without detections included), in the camera's
stream (`RedisConfig.stream_for(camera_id)`), every field a string:

| field          | value                                                              |
|----------------|--------------------------------------------------------------------|
| `v`            | `1`                                                                |
| `camera`       | camera id                                                          |
| `seq`          | frame number within the camera's current connection                |
| `captured_ms`  | wall-clock Unix ms the frame was captured (`daemon.ingest.reader`) |
| `published_ms` | wall-clock Unix ms when the XADD was built (sent right after)      |
| `w`, `h`       | camera frame size in pixels                                        |
| `model`        | `"<input size>:<model name>"`, e.g. `"640:conveyor-640@1.0.0"`     |
| `n`            | number of detections                                               |
| `dets`         | compact JSON list of `{"cls", "label", "score", "box": [x1,y1,x2,y2]}` |

Entry IDs are explicit: `<captured_ms>-<n>`, strictly increasing per stream (see
`next_entry_id`), so a retried write can be recognised instead of duplicated.

Status events go to `RedisConfig.events_stream` with `kind`, `camera` (only when the
event concerns one camera), `detail`, `at_ms`; their IDs are Redis' own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from daemon.core.frames import FrameResult, StatusEvent

SCHEMA_VERSION = 1
ENTRY_FIELDS: tuple[str, ...] = (
    "v",
    "camera",
    "seq",
    "captured_ms",
    "published_ms",
    "w",
    "h",
    "model",
    "n",
    "dets",
)
_INT_FIELDS = frozenset({"v", "seq", "captured_ms", "published_ms", "w", "h", "n"})


class EntryId(NamedTuple):
    """A Redis stream entry ID `<ms>-<seq>`; tuples compare the way Redis orders IDs."""

    ms: int
    seq: int

    def __str__(self) -> str:
        return f"{self.ms}-{self.seq}"

    @classmethod
    def parse(cls, raw: str | bytes) -> EntryId:
        text = raw.decode() if isinstance(raw, bytes) else raw
        ms, _, seq = text.partition("-")
        return cls(int(ms), int(seq or 0))


MIN_ENTRY_ID = EntryId(0, 1)
"""Redis refuses `0-0` as an explicit XADD ID."""


def next_entry_id(last: EntryId | None, captured_ms: int) -> EntryId:
    """The ID for the next entry of a stream whose newest ID is `last`.

    `<captured_ms>-0` when the capture time moved forward; otherwise (same millisecond, or
    the wall clock went backwards) `<last.ms>-<last.seq + 1>`, so IDs strictly increase
    and entries of one camera keep their order.
    """
    candidate = max(EntryId(captured_ms, 0), MIN_ENTRY_ID)
    if last is None or candidate > last:
        return candidate
    return EntryId(last.ms, last.seq + 1)


def model_tag(model_size: int, model_name: str) -> str:
    """The `model` field: input size and model name, `"640:conveyor-640@1.0.0"`."""
    return f"{model_size}:{model_name}"


def encode_entry(result: FrameResult, published_ms: int) -> dict[str, str]:
    """The stream entry (schema v1) for one processed frame."""
    dets = [d.as_json() for d in result.detections]
    return {
        "v": str(SCHEMA_VERSION),
        "camera": result.camera_id,
        "seq": str(result.seq),
        "captured_ms": str(result.captured_ms),
        "published_ms": str(published_ms),
        "w": str(result.width),
        "h": str(result.height),
        "model": model_tag(result.model_size, result.model_name),
        "n": str(len(dets)),
        "dets": json.dumps(dets, separators=(",", ":")),
    }


def decode_entry(fields: Mapping[str, str] | Mapping[bytes, bytes]) -> dict[str, Any]:
    """Parse an entry read from Redis (str or bytes keys): integers as int, `dets` as a list.

    Adds `model_size` (int) and `model_name` (str), split from `model`. Raises ValueError
    on a missing field or a schema version other than 1.
    """
    text = {
        (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
        for k, v in fields.items()
    }
    missing = [f for f in ENTRY_FIELDS if f not in text]
    if missing:
        raise ValueError(f"stream entry lacks fields {missing}")
    if text["v"] != str(SCHEMA_VERSION):
        raise ValueError(f"unsupported schema version {text['v']!r}")
    out: dict[str, Any] = {f: (int(text[f]) if f in _INT_FIELDS else text[f]) for f in ENTRY_FIELDS}
    out["dets"] = json.loads(text["dets"])
    size, _, name = text["model"].partition(":")
    out["model_size"] = int(size)
    out["model_name"] = name
    return out


def same_frame(fields: Mapping[str, str], result: FrameResult) -> bool:
    """Whether a stored entry is the one written for `result` (camera + seq + captured_ms)."""
    return (
        fields.get("camera") == result.camera_id
        and fields.get("seq") == str(result.seq)
        and fields.get("captured_ms") == str(result.captured_ms)
    )


def encode_event(event: StatusEvent, at_ms: int) -> dict[str, str]:
    """A `beltsight:events` entry; `at_ms` is used when the event carries none."""
    fields = {"kind": event.kind, "detail": event.detail, "at_ms": str(event.at_ms or at_ms)}
    if event.camera_id is not None:
        fields["camera"] = event.camera_id
    return fields
