"""`GET`, `PUT` and `DELETE /api/cameras/{id}`: one camera of the set, added, replaced or removed live.

`GET /api/cameras` (every camera with its running state) is the live view's listing, which takes
each camera's settings from `daemon.ops.cameras.CamerasControl.listing`. Here, for one camera:

- `GET` -> `200` its settings as they run (`url` with the password redacted, `source`: the config
  file or its drop-in, `runs`: whether this instance runs it) and its `ETag`
  (`daemon.ops.http.preconditions`); `404` for an unknown camera;
- `PUT` with the keys of one `[[cameras]]` table as JSON (`id` optional, equal to the path's when
  given) -> `201` (added) or `200` (replaced) with its settings and `ETag`, persisted first as its
  drop-in (`cameras_dir`), then applied live to that camera only; `400` `{"problems": ["url: ...",
  ...]}` with every problem by key path, found by the config's own model (and the models' sizes
  and labels), nothing changed; `412` when `If-Match` does not name the camera's current tag (the
  body: its settings, or `{}` with the tag of `{}` when it does not exist);
- `DELETE` -> `200` `{"removed": id}` once the removal is recorded and the camera drained and
  stopped; `404` for an unknown camera; `412` as for `PUT`;
- writes: `401`/`403` as the lines API (`daemon.ops.http.writes`, the browser guard); `413` for a
  body over 256 KiB; `500` when the drop-in cannot be written (nothing changed).
"""

from __future__ import annotations

import json

from aiohttp import web

from daemon.config.cameras_dropin import CamerasInvalidError, parse
from daemon.ops.cameras import CamerasControl, Precondition, StaleError
from daemon.ops.http.preconditions import etag_of, if_match, tagged
from daemon.ops.http.server import HealthServer
from daemon.ops.http.writes import json_reply as _json
from daemon.ops.http.writes import refused, writer

PATH = r"/api/cameras/(?P<camera>[A-Za-z0-9][A-Za-z0-9_.-]{0,63})"
MAX_BODY_BYTES = 256 * 1024


class CamerasApi:
    """The routes, over a `CamerasControl` (see the module docstring)."""

    def __init__(self, server: HealthServer, control: CamerasControl) -> None:
        self._server = server
        self._control = control

    def register(self) -> None:
        self._server.route(PATH, self.handle, methods=("GET", "HEAD", "PUT", "DELETE"))

    async def handle(self, request: web.BaseRequest, params: dict[str, str]) -> web.StreamResponse:
        camera_id = params["camera"]
        if request.method in ("PUT", "DELETE") and (forbidden := refused(self._server)) is not None:
            return forbidden
        if request.method == "PUT":
            return await self._put(request, camera_id)
        if request.method == "DELETE":
            return await self._delete(request, camera_id)
        view = self._control.view(camera_id)
        if view is None:
            return _json(404, {"problems": [f"no camera {camera_id!r}"]})
        return tagged(200, view)

    async def _put(self, request: web.BaseRequest, camera_id: str) -> web.StreamResponse:
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            return _json(413, {"problems": [f"(body): larger than {MAX_BODY_BYTES} bytes"]})
        try:
            data = json.loads(await request.read())
        except (ValueError, UnicodeDecodeError) as exc:
            return _json(400, {"problems": [f"(body): not JSON: {exc}"]})
        if not isinstance(data, dict):
            return _json(400, {"problems": ["(body): must be a JSON object with the keys of one [[cameras]] table"]})
        if data.setdefault("id", camera_id) != camera_id:
            return _json(400, {"problems": [f"id: {data['id']!r} is not the path's camera {camera_id!r}"]})
        try:
            camera = parse(data)
            created = await self._control.put(camera, writer(self._server, request), _precondition(request))
        except CamerasInvalidError as exc:
            return _json(400, {"problems": exc.problems})
        except StaleError as exc:
            return tagged(412, exc.current or {})
        except OSError as exc:
            return _json(500, {"problems": [f"cannot write {self._control.cameras_dir}: {exc.strerror}"]})
        view = self._control.view(camera_id)
        assert view is not None
        return tagged(201 if created else 200, view)

    async def _delete(self, request: web.BaseRequest, camera_id: str) -> web.StreamResponse:
        try:
            removed = await self._control.delete(camera_id, writer(self._server, request), _precondition(request))
        except StaleError as exc:
            return tagged(412, exc.current or {})
        except OSError as exc:
            return _json(500, {"problems": [f"cannot write {self._control.cameras_dir}: {exc.strerror}"]})
        if not removed:
            return _json(404, {"problems": [f"no camera {camera_id!r}"]})
        return _json(200, {"removed": camera_id})


def _precondition(request: web.BaseRequest) -> Precondition | None:
    matches = if_match(request)
    return None if matches is None else lambda current: matches(etag_of(current))


__all__ = ["PATH", "CamerasApi"]
