"""`read_stream(client, stream)`: a Redis stream's entries as text, typed for the checks that read them back.

redis-py types `XRANGE`'s reply loosely (bytes or str, an entry's fields possibly None); the soak's and the
bench's checks want (entry ID, fields) pairs of `str`, whichever way the client decodes its replies.
"""

from __future__ import annotations

import redis


def _text(value: bytes | str | None) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def read_stream(client: redis.Redis, stream: str) -> list[tuple[str, dict[str, str]]]:
    """Every entry of `stream`, oldest first: (entry ID, fields), all text."""
    return [
        (_text(entry_id), {_text(k): _text(v) for k, v in (fields or {}).items()})
        for entry_id, fields in client.xrange(stream) or []
    ]
