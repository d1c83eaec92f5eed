"""The bridge's Redis replies read into types, once: XREADGROUP (RESP2 list or RESP3 dict), XAUTOCLAIM
(`AutoClaim`: where to go on, the entries claimed, the ids deleted meanwhile) and XPENDING's summary,
as the sink reads its own (`daemon.publish.schema`). Keys, ids and values may come as bytes or str."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

Fields = dict[str, str]
Entries = Sequence[tuple[str, Fields | None]]
"""(entry id, fields) in stream order; None fields: an entry deleted while it was pending."""


def text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def fields_of(raw: Any) -> Fields | None:
    if raw is None:
        return None
    return {text(k): text(v) for k, v in raw.items()}


def stream_entries(reply: Any) -> list[tuple[str, Entries]]:
    """XREADGROUP's reply (RESP2 list or RESP3 dict) as [(stream, [(id, fields)])]."""
    if not reply:
        return []
    items = reply.items() if isinstance(reply, dict) else reply
    out: list[tuple[str, Entries]] = []
    for stream, entries in items:
        rows = entries[0] if isinstance(reply, dict) and entries and isinstance(entries[0], list) else entries
        out.append((text(stream), [(text(eid), fields_of(f)) for eid, f in rows]))
    return out


class AutoClaim(NamedTuple):
    """One XAUTOCLAIM reply: `next_start` ("0-0" when the scan is done), the entries claimed, and the
    ids of pending entries no longer in the stream (Redis 7; as entries with None fields)."""

    next_start: str
    entries: list[tuple[str, Fields | None]]
    deleted: list[tuple[str, Fields | None]]

    @classmethod
    def of(cls, reply: Sequence[Any]) -> AutoClaim:
        deleted = reply[2] if len(reply) > 2 else []
        return cls(
            text(reply[0]),
            [(text(eid), fields_of(f)) for eid, f in reply[1]],
            [(text(eid), None) for eid in deleted],
        )


def pending_count(summary: Any) -> int:
    """The number of pending entries in XPENDING's summary (a dict from redis-py, or RESP2's list)."""
    return int(summary.get("pending", 0) if isinstance(summary, dict) else summary[0])


__all__ = ["AutoClaim", "Entries", "Fields", "fields_of", "pending_count", "stream_entries", "text"]
