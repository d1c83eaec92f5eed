"""The endpoint the HTTP fuzzers (tests/fuzz/test_http_*fuzz.py) send requests to, and what the
contract says it must answer.

`Endpoint` is a real `HealthServer` on 127.0.0.1 (loopback only) with every route the daemon
serves: `/healthz`, `/metrics`, the lines API over a real `LinesControl` (camera `belt`, drop-ins in
a scratch directory), the models API over `RecordingSwap` (a `ModelSwap` that records each swap
asked of it: the real swapper needs sessions and models, and its checks are tested elsewhere) and
`/snapshots/` over a scratch directory with a secret file beside it. With `users` every route but
`/healthz` needs a password.

`expected(...)` is the oracle: the statuses the contract allows for a request, computed from what
the request carries (its method, path, credentials, `Host`, `Origin`, `Content-Type`), never from
the server's code. The cameras API (`/api/cameras`) and clip paths (`/clips/...`) do not exist
yet: `PROTECTED_ROUTES` gets their patterns, and the fuzzers their bodies and paths, when they land.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bcrypt

from daemon.config.cameras import CameraConfig
from daemon.config.settings import load_settings
from daemon.config.tracking import TrackingConfig
from daemon.core.metrics import Metrics
from daemon.ops.http import HealthServer, HttpLimits
from daemon.ops.http import snapshots as snapshot_routes
from daemon.ops.http.api_lines import LinesApi
from daemon.ops.http.api_models import ModelsApi
from daemon.ops.lines import LinesControl
from daemon.ops.liveview import LiveView
from daemon.ops.models import ModelsControl
from daemon.tracking.stage import TrackingStage
from tests.support.model_swap import RecordingSwap
from tools.kit.daemon_config import write_config

USER, PASSWORD = "ops", "s3cret-pass"
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
GOOD_AUTH = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
REQUEST_TIMEOUT_S = 1.0
CAMERA = "belt"
SECRET = b"\xff\xd8 the secret outside the snapshot directory \xff\xd9"

GUARDED = importlib.util.find_spec("daemon.ops.http.browser") is not None
"""Whether the browser guard (issue 52, item 1: `Host`, `Origin` and `Content-Type` checked after
authentication) is in this tree; until it is, the oracle expects the answers without it."""

OPEN_PATHS = frozenset({"/healthz", "/health"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LINES = re.compile(r"/api/cameras/(?P<camera>[A-Za-z0-9][A-Za-z0-9_.-]{0,63})/lines")
MODELS = re.compile(r"/api/models/(?P<size>[0-9]{1,5})")
SNAPSHOTS = re.compile(r"/snapshots/(?P<path>[^?#]+)")
PROTECTED_ROUTES: dict[str, tuple[re.Pattern[str], frozenset[str]]] = {
    "metrics": (re.compile(r"/metrics"), frozenset({"GET", "HEAD"})),
    "lines": (LINES, frozenset({"GET", "HEAD", "PUT"})),
    "models": (MODELS, frozenset({"GET", "HEAD", "POST"})),
    "model_list": (re.compile(r"/api/models"), frozenset({"GET", "HEAD"})),
    "snapshots": (SNAPSHOTS, frozenset({"GET", "HEAD"})),
    # "cameras": the cameras API, and "clips": clip paths, once they exist
}
WRITE_ROUTES = frozenset({("lines", "PUT"), ("models", "POST")})


@dataclass
class Snapshots:
    """The snapshot directory: `inside` (relative path -> bytes served), names that lead out."""

    root: Path
    inside: dict[str, bytes]
    leading_out: list[str]


def make_snapshots(base: Path) -> Snapshots:
    root = base / "snapshots"
    (root / CAMERA / "2026-12-06").mkdir(parents=True)
    (base / "secret.jpg").write_bytes(SECRET)
    (base / "other").mkdir()
    (base / "other" / "b.jpg").write_bytes(SECRET)
    inside = {
        "a.jpg": b"\xff\xd8 a \xff\xd9",
        f"{CAMERA}/2026-12-06/1.jpg": b"\xff\xd8 one \xff\xd9",
        f"{CAMERA}/2026-12-06/2.jpg": b"\xff\xd8 two \xff\xd9",
    }
    for name, data in inside.items():
        (root / name).write_bytes(data)
    (root / "notes.txt").write_bytes(b"not a snapshot")
    (root / "in.jpg").symlink_to(root / "a.jpg")  # a link inside to a file inside: served
    inside["in.jpg"] = inside["a.jpg"]
    (root / "out.jpg").symlink_to(base / "secret.jpg")  # leads out: never served
    (root / "outdir").symlink_to(base / "other")
    return Snapshots(root, inside, ["out.jpg", "outdir/b.jpg", "../secret.jpg", "notes.txt"])


class Endpoint:
    """The server on its own loop thread (see the module docstring)."""

    def __init__(self, base: Path, *, users: dict[str, str] | None) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="http-fuzz", daemon=True)
        metrics = Metrics()
        self.server = HealthServer(
            "127.0.0.1",
            0,
            metrics.registry,
            lambda: {"ok": True},
            metrics=metrics,
            users=users,
            limits=HttpLimits(16, REQUEST_TIMEOUT_S),
        )
        cameras = [CameraConfig.model_validate({"id": CAMERA, "url": "rtsp://127.0.0.1:1/belt"})]
        self.lines_dir = base / "lines"
        self.lines = LinesControl(
            cameras,
            self.lines_dir,
            TrackingStage(cameras, TrackingConfig(), metrics),
            LiveView(metrics, 0.5),
            on_event=lambda e: None,
        )
        self.swap = RecordingSwap()
        self.snapshots = make_snapshots(base)
        config = write_config(base / "beltsight.toml", redis_url="redis://127.0.0.1:1", cameras=[],
                              models_dropin=str(base / "models.toml"))  # fmt: skip
        self.models = ModelsControl(load_settings(config), self.swap, serving=lambda size: None)
        LinesApi(self.server, self.lines).register()
        ModelsApi(self.server, self.models).register()
        snapshot_routes.register(self.server, self.snapshots.root)

    def __enter__(self) -> Endpoint:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(30)
        return self

    def __exit__(self, *_exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
        self.loop.close()

    @property
    def port(self) -> int:
        return self.server.port

    def current_lines(self) -> dict[str, Any]:
        return asyncio.run_coroutine_threadsafe(self._current(), self.loop).result(30)

    async def _current(self) -> dict[str, Any]:
        return self.lines.current(CAMERA).to_json()


def endpoint(base: Path, *, authenticated: bool) -> Iterator[Endpoint]:
    with Endpoint(base, users={USER: HASH} if authenticated else None) as served:
        yield served


# -- the raw client --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    status: int | None  # None: closed without an answer
    headers: dict[str, str]
    body: bytes
    raw: bytes


def exchange(port: int, raw: bytes) -> Reply:
    """Send `raw` and read until the server closes (a connection left open fails here)."""
    deadline = time.monotonic() + REQUEST_TIMEOUT_S + 10
    reply = b""
    with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_S + 10) as sock:
        try:
            sock.sendall(raw)  # no half-close: an incomplete request must be ended by the server's deadline
        except OSError:
            return Reply(None, {}, b"", b"")  # refused mid-send: closed, which is an answer
        while True:
            assert time.monotonic() < deadline, f"the connection stayed open: {raw[:200]!r}"
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            reply += chunk
    return parse_reply(reply)


def parse_reply(reply: bytes) -> Reply:
    if not reply:
        return Reply(None, {}, b"", reply)
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    first = lines[0].split()
    # aiohttp answers in the request's version (HTTP/2.0 included), so only the scheme is checked
    assert len(first) >= 2 and first[0].startswith(b"HTTP/"), f"not an HTTP reply: {reply[:200]!r}"
    headers = {}
    for line in lines[1:]:
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return Reply(int(first[1]), headers, body, reply)


def request_bytes(method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    """A well-formed HTTP/1.1 request (`Content-Length` added for a body)."""
    lines = [f"{method} {target} HTTP/1.1", *(f"{name}: {value}" for name, value in headers)]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


# -- the oracle ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    """What a well-formed request carried, as the contract speaks of it."""

    method: str
    path: str  # as the server routes it: no query, no dot segments, percent-decoded
    credentials: bool  # a valid user's password
    host: str | None  # "loopback", "foreign", or None (no Host header)
    origin: str | None  # "same" (the endpoint's own: http:// + the Host sent), "foreign", or None
    fetch_site: str | None  # Sec-Fetch-Site
    json_body: bool  # Content-Type application/json
    body: bytes


def route_of(path: str) -> str | None:
    if path in OPEN_PATHS:
        return "healthz"
    return next((name for name, (pattern, _m) in PROTECTED_ROUTES.items() if pattern.fullmatch(path)), None)


def methods_of(route: str) -> frozenset[str]:
    return frozenset({"GET", "HEAD"}) if route == "healthz" else PROTECTED_ROUTES[route][1]


def host_refused(sent: Sent) -> bool:
    """Whether the browser guard refuses the request's `Host` (every route but `/healthz`)."""
    return GUARDED and sent.path not in OPEN_PATHS and sent.host == "foreign"


def write_refusal(sent: Sent) -> int | None:
    """The browser guard's refusal of a write (issue 52's contract: another origin's page `403`, a
    body that is not JSON `415`), None when it lets the request through."""
    if not GUARDED or sent.method in SAFE_METHODS:
        return None
    if sent.origin == "foreign":
        return 403
    if sent.origin is None and (sent.fetch_site or "").lower() in ("cross-site", "same-site"):
        return 403
    if not sent.json_body and (sent.body or sent.method != "DELETE"):
        return 415
    return None


def expected(sent: Sent, authenticated: bool) -> set[int]:
    """Every status the contract allows for `sent`; the route's own answer (`200`, `400`...) is
    narrowed down by the fuzzers that know the body. Never a `5xx`. A write method on a path that
    takes none may get the guard's answer or the 404/405: the contract names the write routes."""
    if authenticated and not sent.credentials and sent.path not in OPEN_PATHS:
        return {401}  # whatever else it carries
    route = route_of(sent.path)
    if host_refused(sent):
        return {403} if route is not None else {403, 404}
    refusal = write_refusal(sent)
    if route is None:
        return {404} if refusal is None else {refusal, 404}
    if sent.method not in methods_of(route):
        return {405} if refusal is None else {refusal, 405}
    if refusal is not None:
        return {refusal}
    if route in ("healthz", "metrics"):
        return {200}
    if route == "lines":
        camera = LINES.fullmatch(sent.path)
        assert camera is not None
        if camera["camera"] != CAMERA:
            return {404}
        return {200} if sent.method != "PUT" else {200, 400, 413}
    if route == "models":
        if sent.method != "POST":  # what serves a size: 404 for a size [models] does not have
            return {200, 404}
        return {200, 400, 412, 413, 422}
    if route == "model_list":
        return {200}
    return {200, 404}  # snapshots: the snapshot fuzzer says which


__all__ = [
    "CAMERA",
    "GOOD_AUTH",
    "GUARDED",
    "HASH",
    "PASSWORD",
    "PROTECTED_ROUTES",
    "REQUEST_TIMEOUT_S",
    "SECRET",
    "USER",
    "Endpoint",
    "RecordingSwap",
    "Reply",
    "Sent",
    "endpoint",
    "exchange",
    "expected",
    "parse_reply",
    "request_bytes",
    "route_of",
]
