"""`GET /api/models`, `GET` and `POST /api/models/{size}`: what serves each input size, and a swap
of one size's model without stopping the line.

`GET /api/models/{size}` answers `200` `{"size", "path", "name", "version", "classes", "sha256",
"source"}` (`source`: `config` or `drop-in`, where the entry that serves comes from) with its `ETag`
(`daemon.ops.http.preconditions`), `404` for a size not configured; `GET /api/models` answers
`{"models": [...]}`, each size's state with its tag as `etag`.

`POST` body: `{"path": "/abs/model.onnx", "allow_new_classes": false}`. The swap itself (checks,
sessions built beside the serving ones, warm-up, canary, the swap between two batches, the audit)
is `daemon.inference.swap.ModelSwapper`'s; `daemon.ops.models.ModelsControl` persists it in the
models drop-in before answering. Answers:

- `200` `{"size", "old", "new", "version", "sha256", "path", "took_s"}` once the new model serves
  (from each lane worker's next batch on) and is persisted, with the size's new `ETag`;
- `412` with the size's state and `ETag` when `If-Match` does not name the tag of what serves
  (someone else swapped it since it was read); nothing changed. Without `If-Match` the swap is
  made whatever serves;
- `500` when the drop-in cannot be written (the swap is undone);
- `400` `{"reason", "problems": [reason]}` for a body that is not such an object (or a relative
  path), `422` for a file refused (missing, not a model, another input size, other classes without
  `allow_new_classes`, a camera's class filter it lacks, a failed session or canary); the old model
  still serves;
- `401`/`403` as for every write (`daemon.ops.http.writes`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiohttp import web

from daemon.inference.swap import SwapError
from daemon.ops.http.preconditions import etag_of, if_match, quoted_etag, set_etag, tagged
from daemon.ops.http.server import HealthServer
from daemon.ops.http.writes import json_reply, refused, writer
from daemon.ops.models import ModelsControl, StaleError

PATH = r"/api/models/(?P<size>[0-9]{1,5})"
LIST_PATH = r"/api/models"
MAX_BODY_BYTES = 16 * 1024


def _problem(status: int, reason: str) -> web.Response:
    return json_reply(status, {"reason": reason, "problems": [reason]})


def parse(raw: bytes) -> tuple[Path, bool]:
    """The body's path and `allow_new_classes`; ValueError naming what is wrong."""
    try:
        data: Any = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"(body): not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError('(body): expected an object {"path": ..., "allow_new_classes": ...}')
    unknown = sorted(set(data) - {"path", "allow_new_classes"})
    if unknown:
        raise ValueError(f"(body): unknown keys {unknown}")
    path, allow = data.get("path"), data.get("allow_new_classes", False)
    if not isinstance(path, str) or not path:
        raise ValueError("path: a model file's absolute path is required")
    if not Path(path).is_absolute():
        raise ValueError(f"path: {path!r} is not absolute")
    if not isinstance(allow, bool):
        raise ValueError("allow_new_classes: expected true or false")
    return Path(path), allow


class ModelsApi:
    """The routes, over a `ModelsControl` (see the module docstring)."""

    def __init__(self, server: HealthServer, control: ModelsControl) -> None:
        self._server = server
        self._control = control

    def register(self) -> None:
        self._server.route(PATH, self.handle, methods=("GET", "HEAD", "POST"))
        self._server.route(LIST_PATH, self.listing)

    async def listing(self, _request: web.BaseRequest, _params: dict[str, str]) -> web.StreamResponse:
        states = [await self._control.state(size) for size in self._control.sizes]
        return json_reply(200, {"models": [{**state, "etag": quoted_etag(state)} for state in states]})

    async def handle(self, request: web.BaseRequest, params: dict[str, str]) -> web.StreamResponse:
        size = int(params["size"])
        if request.method != "POST":
            if size not in self._control.sizes:
                return _problem(404, f"no model of size {size} is configured ([models] has {self._control.sizes})")
            return tagged(200, await self._control.state(size))
        if (forbidden := refused(self._server)) is not None:
            return forbidden
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            return _problem(413, f"(body): larger than {MAX_BODY_BYTES} bytes")
        try:
            path, allow_new_classes = parse(await request.read())
        except ValueError as exc:
            return _problem(400, str(exc))
        matches = if_match(request)
        try:
            done, state = await self._control.swap(
                size,
                path,
                allow_new_classes=allow_new_classes,
                by=writer(self._server, request),
                precondition=None if matches is None else lambda state: matches(etag_of(state)),
            )
        except StaleError as exc:
            return tagged(412, exc.current)
        except SwapError as exc:
            return _problem(exc.status, exc.reason)
        response = json_reply(200, done.to_json())
        set_etag(response, state)
        return response


__all__ = ["LIST_PATH", "PATH", "ModelsApi", "parse"]
