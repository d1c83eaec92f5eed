"""The endpoint's write APIs as a client sees them: JSON requests, and what they leave in Redis."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from daemon.core.objects import ObjectEvent
from tests.support.daemon_harness import InProcessDaemon
from tests.support.fixtures_redis import RedisServer
from tests.support.objects import objects
from tests.support.waits import wait_until

LINE = {"id": "count", "start": [0.5, 0.0], "end": [0.5, 1.0], "direction": [1.0, 0.0], "gates": []}
"""A vertical counting line through the middle of the frame, `in` to the right (the clips' belt)."""


def request(
    port: int,
    path: str,
    method: str = "GET",
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout_s: float = 10.0,
) -> tuple[int, Any]:
    """(status, JSON body, or the text when it is not JSON) of one request to the endpoint (a body is
    sent as `application/json`, as curl with `-H 'Content-Type: application/json'` would)."""
    data = None if body is None else json.dumps(body).encode()
    sent = {"Content-Type": "application/json"} if data is not None else {}
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, method=method, headers={**sent, **(headers or {})}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            raw = exc.read()
        try:
            return exc.code, json.loads(raw)
        except ValueError:
            return exc.code, raw.decode()


def crossings(redis: RedisServer, camera: str, line: str) -> list[ObjectEvent]:
    """The `crossed` entries of `line` (each entry checked against the objects contract)."""
    return [e for _id, e in objects(redis, camera) if e.event == "crossed" and e.line == line]


def events(redis: RedisServer, kind: str) -> list[dict[str, str]]:
    """The events stream's entries of one `kind`, oldest first."""
    client = redis.client()
    try:
        raw = client.xrange("beltsight:events") or []
    finally:
        client.close()
    entries = [{str(k): str(v) for k, v in (fields or {}).items()} for _id, fields in raw]
    return [f for f in entries if f["kind"] == kind]


def running(d: InProcessDaemon) -> int:
    """The endpoint's port once the in-process daemon reports running."""
    wait_until(lambda: d.daemon.health is not None and d.daemon.state == "running", 60, "the daemon to be ready", d)
    assert d.daemon.health is not None
    return d.daemon.health.port
