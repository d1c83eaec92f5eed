"""Optimistic concurrency for the write routes: an `ETag` for what runs, `If-Match` on a write.

A `GET` of a writable resource (a camera's lines, a size's model) answers with a strong `ETag`:
the SHA-256 of the canonical JSON of what runs (keys sorted, no spaces), so the same state always
has the same tag, whichever instance or process computed it. A write that carries `If-Match`
is done only while the tag of what runs is one of those listed (RFC 9110 13.1.1: strong
comparison, a weak tag never matches; `*` matches whatever runs); otherwise `412` with what runs
now and its tag. A write without `If-Match` (curl, a script) is done unconditionally. The check and
the write are one step under the resource's lock (`LinesControl.put`, `ModelsControl.swap`), so of
two writers racing with the same tag exactly one wins and the other gets `412` with the winner's
state.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from daemon.ops.http.writes import json_reply

ANY = "*"


def etag_of(state: Any) -> str:
    """The strong entity tag of `state` (plain JSON data), without its quotes."""
    canonical = json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def if_match(request: web.BaseRequest) -> Callable[[str], bool] | None:
    """Whether a tag satisfies the request's `If-Match`, as a predicate over the current tag; None
    when the request has none (the write is unconditional). A header that does not parse matches
    nothing."""
    tags = request.if_match
    if tags is None:
        return None

    def matches(current: str) -> bool:
        return any(not tag.is_weak and tag.value in (ANY, current) for tag in tags)

    return matches


def quoted_etag(state: Any) -> str:
    """`state`'s tag as a header carries it: in quotes."""
    return f'"{etag_of(state)}"'


def set_etag(response: web.StreamResponse, state: Any) -> None:
    """The `ETag` header of `state` (spelt as RFC 9110 does; aiohttp's setter writes `Etag`)."""
    response.headers["ETag"] = quoted_etag(state)


def tagged(status: int, state: dict[str, Any]) -> web.Response:
    """`state` as JSON with its `ETag`."""
    response = json_reply(status, state)
    set_etag(response, state)
    return response


__all__ = ["ANY", "etag_of", "if_match", "quoted_etag", "set_etag", "tagged"]
