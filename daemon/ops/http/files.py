"""Serving a directory of written files (crossing snapshots, crossing clips) on the endpoint.

`serve_directory` registers one route whose `path` parameter is resolved by the directory's own
`resolve` (daemon.publish.files.paths: no `..`, no absolute paths, no symlinks leading out); anything that
does not resolve, or is gone by the time it is opened (retention), is a 404, so nothing about the
disk outside can be learnt. The file is sent by aiohttp's `FileResponse` (off the loop, `sendfile` where it
can): HTTP range requests answer `206 Partial Content` (a `<video>` element seeks with them), a range past
the end `416`, and every answer says `Accept-Ranges: bytes`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from daemon.ops.http.server import HealthServer

Resolve = Callable[[Path, str], Path | None]
CACHE_CONTROL = "private, max-age=86400"


def serve_directory(
    server: HealthServer, route: str, root: Path, resolve: Resolve, *, content_type: str, missing: str
) -> None:
    """Serve the files under `root` that `resolve` admits at `route` (a pattern with a `path` group)."""

    async def serve(_request: web.BaseRequest, params: dict[str, str]) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        path = await loop.run_in_executor(None, resolve, root, params["path"])
        if path is None:
            return web.Response(status=404, text=missing)
        # A file removed between resolving and opening is FileResponse's own 404.
        return web.FileResponse(path, headers={"Content-Type": content_type, "Cache-Control": CACHE_CONTROL})

    server.route(route, serve)


__all__ = ["serve_directory"]
