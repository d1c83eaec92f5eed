"""`GET /clips/<path>`: a crossing's clip (`daemon.publish.clips`), behind the endpoint's TLS and authentication
like every route. The path is the `crossed` entry's `clip` field; the path is refused exactly as the
snapshots' are (a 404 for anything that does not resolve to an MP4 inside `[clips] dir`), and range
requests answer `206` (a browser's `<video>` seeks with them): `daemon.ops.http.files`."""

from __future__ import annotations

from pathlib import Path

from daemon.ops.http.files import serve_directory
from daemon.ops.http.server import HealthServer
from daemon.publish.clips import resolve

ROUTE = r"/clips/(?P<path>[^?#]+)"


def register(server: HealthServer, root: Path) -> None:
    """Serve the clip directory `root` on `server`."""
    serve_directory(server, ROUTE, root, resolve, content_type="video/mp4", missing="no such clip\n")


__all__ = ["ROUTE", "register"]
