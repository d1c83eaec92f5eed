"""`POST /api/models/{size}`: swap the model serving one input size without stopping the line.

Body: `{"path": "/abs/model.onnx", "allow_new_classes": false}`. The swap itself (checks, sessions
built beside the serving ones, warm-up, canary, the swap between two batches, the audit) is
`daemon.inference.swap.ModelSwapper`'s. Answers:

- `200` `{"size", "old", "new", "version", "sha256", "path", "took_s"}` once the new model serves
  (from each lane worker's next batch on);
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

from daemon.inference.swap import ModelSwap, SwapError
from daemon.ops.http.server import HealthServer
from daemon.ops.http.writes import json_reply, refused, writer

PATH = r"/api/models/(?P<size>[0-9]{1,5})"
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
    """The route, over a `ModelSwap` (see the module docstring)."""

    def __init__(self, server: HealthServer, swapper: ModelSwap) -> None:
        self._server = server
        self._swapper = swapper

    def register(self) -> None:
        self._server.route(PATH, self.handle, methods=("POST",))

    async def handle(self, request: web.BaseRequest, params: dict[str, str]) -> web.StreamResponse:
        if (forbidden := refused(self._server)) is not None:
            return forbidden
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            return _problem(413, f"(body): larger than {MAX_BODY_BYTES} bytes")
        try:
            path, allow_new_classes = parse(await request.read())
        except ValueError as exc:
            return _problem(400, str(exc))
        try:
            done = await self._swapper.swap(
                int(params["size"]), path, allow_new_classes=allow_new_classes, by=writer(self._server, request)
            )
        except SwapError as exc:
            return _problem(exc.status, exc.reason)
        return json_reply(200, done.to_json())


__all__ = ["PATH", "ModelsApi", "parse"]
