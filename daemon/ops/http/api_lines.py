"""`GET` and `PUT /api/cameras/{id}/lines`: a camera's `mm_per_px` and counting lines, as JSON.

The body is the TOML shape of a camera's lines (`daemon.config.lines_dropin.CameraLines`):
`{"mm_per_px": float | null, "lines": [{"id", "start": [x, y], "end": [x, y], "direction": [dx, dy],
"gates": [{"id", "distance_mm"}]}]}`. Answers:

- `200` with what runs now (after a `PUT`: what was just applied, persisted first) and its `ETag`
  (`daemon.ops.http.preconditions`: the SHA-256 of the canonical JSON);
- `412` with what runs now and its `ETag` for a `PUT` whose `If-Match` does not name the tag of
  what runs (another writer changed the camera since it was read); nothing changed. A `PUT`
  without `If-Match` is applied whatever runs;
- `400` `{"problems": ["lines.0.start: ...", ...]}`: every problem, by key path, found by the config's
  own models; nothing changed;
- `401` without a valid user's password where `basic_auth_users` is set (the server's check);
- `403` for a `PUT` where writes are not allowed: only with authentication configured, or on an
  endpoint listening on loopback only (`daemon.ops.http.writes`, the guard of every write route);
- `404` for a camera this instance does not run; `500` when the drop-in cannot be written (nothing
  changed).
"""

from __future__ import annotations

import json

from aiohttp import web

from daemon.config.lines_dropin import LinesInvalidError, parse
from daemon.ops.http.preconditions import etag_of, if_match, tagged
from daemon.ops.http.server import HealthServer
from daemon.ops.http.writes import json_reply as _json
from daemon.ops.http.writes import loopback_only, refused, writer
from daemon.ops.lines import LinesControl, StaleError

PATH = r"/api/cameras/(?P<camera>[A-Za-z0-9][A-Za-z0-9_.-]{0,63})/lines"
MAX_BODY_BYTES = 256 * 1024


class LinesApi:
    """The routes, over a `LinesControl` (see the module docstring)."""

    def __init__(self, server: HealthServer, control: LinesControl) -> None:
        self._server = server
        self._control = control

    def register(self) -> None:
        self._server.route(PATH, self.handle, methods=("GET", "HEAD", "PUT"))

    async def handle(self, request: web.BaseRequest, params: dict[str, str]) -> web.StreamResponse:
        camera_id = params["camera"]
        if request.method == "PUT" and (forbidden := refused(self._server)) is not None:
            return forbidden
        if camera_id not in self._control.camera_ids:
            return _json(404, {"problems": [f"no camera {camera_id!r}"]})
        if request.method != "PUT":
            return tagged(200, self._control.current(camera_id).to_json())
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            return _json(413, {"problems": [f"(body): larger than {MAX_BODY_BYTES} bytes"]})
        try:
            data = json.loads(await request.read())
        except (ValueError, UnicodeDecodeError) as exc:
            return _json(400, {"problems": [f"(body): not JSON: {exc}"]})
        try:
            lines = parse(data)
        except LinesInvalidError as exc:
            return _json(400, {"problems": exc.problems})
        matches = if_match(request)
        try:
            applied = await self._control.put(
                camera_id,
                lines,
                writer(self._server, request),
                None if matches is None else lambda current: matches(etag_of(current.to_json())),
            )
        except StaleError as exc:
            return tagged(412, exc.current.to_json())
        except OSError as exc:
            return _json(500, {"problems": [f"cannot write {self._control.lines_dir}: {exc.strerror}"]})
        return tagged(200, applied.to_json())


__all__ = ["PATH", "LinesApi", "loopback_only"]
