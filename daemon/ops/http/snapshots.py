"""`GET /snapshots/<path>`: a crossing's JPEG (`daemon.publish.snapshots`), behind the endpoint's TLS and
authentication like every route. The path is the `crossed` entry's `snapshot` field; anything that does
not resolve to a JPEG inside `[snapshots] dir` (`..`, absolute paths, symlinks leading out, a missing
file: `daemon.publish.snapshots.resolve`) is a 404, with the same answer for each so nothing about the
disk outside can be learnt. The file is read in a thread, off the loop."""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiohttp import web

from daemon.ops.http.server import HealthServer
from daemon.publish.snapshots import resolve

ROUTE = r"/snapshots/(?P<path>[^?#]+)"


def register(server: HealthServer, root: Path) -> None:
    """Serve the snapshot directory `root` on `server`."""

    async def snapshot(_request: web.BaseRequest, params: dict[str, str]) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        body = await loop.run_in_executor(None, _read, root, params["path"])
        if body is None:
            return web.Response(status=404, text="no such snapshot\n")
        return web.Response(body=body, content_type="image/jpeg", headers={"Cache-Control": "private, max-age=86400"})

    server.route(ROUTE, snapshot)


def _read(root: Path, relative: str) -> bytes | None:
    path = resolve(root, relative)
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError:  # removed by retention in between
        return None


__all__ = ["ROUTE", "register"]
