"""The guard of every write route (the lines API, the models API): a write is allowed only where
authentication is configured (`[health] basic_auth_users`; the server's check then answers `401`
without a valid password) or on an endpoint listening on loopback only; elsewhere `403`.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from daemon.ops.http.auth import request_user
from daemon.ops.http.browser import loopback_only
from daemon.ops.http.server import HealthServer

REFUSED = "writes need [health] basic_auth_users, or a loopback-only listen"


def write_allowed(server: HealthServer) -> bool:
    return server.authenticated or loopback_only(server.host)


def json_reply(status: int, body: dict[str, Any]) -> web.Response:
    return web.json_response(body, status=status, dumps=lambda v: json.dumps(v, sort_keys=True))


def refused(server: HealthServer) -> web.Response | None:
    """The `403` for a write where writes are not allowed; None where they are."""
    return None if write_allowed(server) else json_reply(403, {"problems": [REFUSED]})


def writer(server: HealthServer, request: web.BaseRequest) -> str:
    """Who wrote: the authenticated user, else `local <peer address>`."""
    user = request_user(request) if server.authenticated else None
    return user or f"local {request.remote}"


__all__ = ["REFUSED", "json_reply", "loopback_only", "refused", "write_allowed", "writer"]
