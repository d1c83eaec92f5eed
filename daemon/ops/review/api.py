"""The record on the endpoint (behind its TLS and authentication, like every route):

- `GET /api/crossings?camera=&line=&label=&direction=&since=&until=&limit=&cursor=`:
  `{"crossings": [...], "next": <cursor or null>}`, newest first. `since` (inclusive) and `until`
  (exclusive) are ms since the epoch or ISO 8601 (`2026-12-06T10:42:00+01:00`; without an offset:
  the box's local time); `limit` 1..1000 (100); `next` is null on the last page, else the `cursor`
  of the next one: following it visits each crossing of the range once.
- `GET /api/counts?camera=&line=&label=&direction=&since=&until=&bucket=15m|1h|shift`:
  `{"buckets": [{"start": <ms>, "in": N, "out": M}, ...]}`, oldest first, only buckets holding a
  crossing; buckets start on the local clock (`daemon.core.shifts`), shifts at `[review] shifts`.
- `GET /api/crossings/lines`: `{"lines": [{"camera", "line"}, ...]}`, the lines with a crossing on record
  (the page's filter).
- `GET /review`: the review page, `/static/review_page.js` its script.

A bad parameter is a `400` `{"problems": ["since: ...", ...]}` naming each.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from importlib import resources
from typing import Any, cast

from aiohttp import web

from daemon.core.shifts import BUCKETS, Bucket
from daemon.ops.http.server import HealthServer
from daemon.ops.review.consumer import Recorder
from daemon.ops.review.store import MAX_LIMIT, Crossing, Cursor, Filters

DEFAULT_LIMIT = 100
PAGE = "review_page.html"
SCRIPT = "review_page.js"


class ProblemsError(ValueError):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def parse_time(name: str, text: str) -> int:
    """ms since the epoch from an integer or ISO 8601 (naive: local time)."""
    if text.lstrip("-").isdigit():
        return int(text)
    head, space, tail = text.rpartition(" ")  # a "+hh:mm" offset whose "+" a query string made a space
    for candidate in (text, f"{head}+{tail}" if space else text):
        try:
            return int(datetime.fromisoformat(candidate).timestamp() * 1000)
        except ValueError:
            continue
    raise ValueError(f"{name}: not ms since the epoch nor ISO 8601: {text!r}")


def encode_cursor(crossing: Crossing) -> str:
    key = [crossing.at_ms, crossing.camera, crossing.entry_ms, crossing.entry_seq]
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(text: str) -> Cursor:
    try:
        raw = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        at_ms, camera, entry_ms, entry_seq = raw
        if not (isinstance(camera, str) and all(type(v) is int for v in (at_ms, entry_ms, entry_seq))):
            raise TypeError
    except (ValueError, TypeError, binascii.Error):
        raise ValueError("cursor: not a cursor this API gave") from None
    return int(at_ms), camera, int(entry_ms), int(entry_seq)


def filters_of(query: Any) -> Filters:
    """The filters of a request's query; ProblemsError naming each bad one."""
    problems: list[str] = []
    times: dict[str, int | None] = {"since": None, "until": None}
    for name in times:
        if text := query.get(name):
            try:
                times[name] = parse_time(name, text)
            except ValueError as exc:
                problems.append(str(exc))
    direction = query.get("direction") or None
    if direction not in (None, "in", "out"):
        problems.append(f"direction: 'in' or 'out', got {direction!r}")
    if problems:
        raise ProblemsError(problems)
    return Filters(
        camera=query.get("camera") or None,
        line=query.get("line") or None,
        label=query.get("label") or None,
        direction=direction,
        since=times["since"],
        until=times["until"],
    )


def _problems(problems: list[str]) -> web.Response:
    return web.json_response({"problems": problems}, status=400)


class ReviewApi:
    """The routes over a `Recorder` (see the module docstring)."""

    def __init__(self, server: HealthServer, recorder: Recorder) -> None:
        self._server = server
        self._recorder = recorder
        package = resources.files("daemon.ops.review")
        self._page = package.joinpath(PAGE).read_bytes()
        self._script = package.joinpath(SCRIPT).read_bytes()

    def register(self) -> None:
        self._server.route(r"/review", self.page)
        self._server.route(r"/static/review_page\.js", self.script)
        self._server.route(r"/api/crossings", self.crossings)
        self._server.route(r"/api/counts", self.counts)
        self._server.route(r"/api/crossings/lines", self.lines)

    async def page(self, _request: web.BaseRequest, _params: dict[str, str]) -> web.StreamResponse:
        return web.Response(body=self._page, content_type="text/html", charset="utf-8")

    async def script(self, _request: web.BaseRequest, _params: dict[str, str]) -> web.StreamResponse:
        return web.Response(body=self._script, content_type="text/javascript", charset="utf-8")

    async def crossings(self, request: web.BaseRequest, _params: dict[str, str]) -> web.StreamResponse:
        query = request.query
        problems: list[str] = []
        try:
            filters = filters_of(query)
        except ProblemsError as exc:
            problems += exc.problems
        limit = DEFAULT_LIMIT
        if text := query.get("limit"):
            if text.isdigit() and 1 <= int(text) <= MAX_LIMIT:
                limit = int(text)
            else:
                problems.append(f"limit: a whole number 1..{MAX_LIMIT}, got {text!r}")
        after: Cursor | None = None
        if text := query.get("cursor"):
            try:
                after = decode_cursor(text)
            except ValueError as exc:
                problems.append(str(exc))
        if problems:
            return _problems(problems)
        rows = await self._recorder.page(filters, limit + 1, after)
        more = len(rows) > limit
        rows = rows[:limit]
        body = {"crossings": [c.to_json() for c in rows], "next": encode_cursor(rows[-1]) if more else None}
        return web.json_response(body, headers={"Cache-Control": "no-store"})

    async def lines(self, _request: web.BaseRequest, _params: dict[str, str]) -> web.StreamResponse:
        pairs = await self._recorder.lines()
        return web.json_response({"lines": [{"camera": c, "line": ln} for c, ln in pairs]})

    async def counts(self, request: web.BaseRequest, _params: dict[str, str]) -> web.StreamResponse:
        query = request.query
        problems: list[str] = []
        try:
            filters = filters_of(query)
        except ProblemsError as exc:
            problems += exc.problems
        bucket = query.get("bucket") or "1h"
        if bucket not in BUCKETS:
            problems.append(f"bucket: one of {list(BUCKETS)}, got {bucket!r}")
        if problems:
            return _problems(problems)
        rows = await self._recorder.counts(filters, cast(Bucket, bucket))
        buckets = [{"start": start, "in": n.get("in", 0), "out": n.get("out", 0)} for start, n in rows]
        return web.json_response({"buckets": buckets}, headers={"Cache-Control": "no-store"})


__all__ = ["ReviewApi", "decode_cursor", "encode_cursor", "filters_of", "parse_time"]
