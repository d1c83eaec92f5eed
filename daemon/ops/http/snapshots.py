"""`GET /snapshots/<path>`: a crossing's JPEG (`daemon.publish.snapshots`), behind the endpoint's TLS and
authentication like every route. The path is the `crossed` entry's `snapshot` field; anything that does
not resolve to a JPEG inside `[snapshots] dir` (`..`, absolute paths, symlinks leading out, a missing
file: `daemon.publish.snapshots.resolve`) is a 404 (`daemon.ops.http.files`, shared with the clips)."""

from __future__ import annotations

from pathlib import Path

from daemon.ops.http.files import serve_directory
from daemon.ops.http.server import HealthServer
from daemon.publish.snapshots import resolve

ROUTE = r"/snapshots/(?P<path>[^?#]+)"


def register(server: HealthServer, root: Path) -> None:
    """Serve the snapshot directory `root` on `server`."""
    serve_directory(server, ROUTE, root, resolve, content_type="image/jpeg", missing="no such snapshot\n")


__all__ = ["ROUTE", "register"]
