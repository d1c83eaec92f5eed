"""The endpoint the HTTP fuzzers (tests/fuzz/test_http_*fuzz.py) send requests to, and what the
contract says it must answer.

`Endpoint` is a real `HealthServer` on 127.0.0.1 (loopback only) with every route the daemon
serves: `/healthz`, `/metrics`, the lines API over a real `LinesControl` (camera `belt`, drop-ins in
a scratch directory), the models API over `RecordingSwap` (a `ModelSwap` that records each swap
asked of it: the real swapper needs sessions and models, and its checks are tested elsewhere), the
cameras API over a real `CamerasControl` (no camera configured; a camera added starts a real reader,
which the fuzzers point at a closed loopback port, and has its own lines, apart from `belt`'s so that
a `DELETE` never takes `belt` from the lines API), the live view's page and `/api/cameras` listing,
and `/snapshots/` and `/clips/` over scratch directories with secret files beside them. With `users`
every route but `/healthz` needs a password.

`expected(...)` is the oracle: the statuses the contract allows for a request, computed from what
the request carries (its method, path, credentials, `Host`, `Origin`, `Content-Type`), never from
the server's code.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import random
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bcrypt

from daemon.batching.hub import FrameHub
from daemon.batching.router import ModelRouter
from daemon.config.cameras import CameraConfig
from daemon.config.engine import EngineConfig
from daemon.config.settings import Settings, load_settings
from daemon.config.tracking import TrackingConfig
from daemon.core.backoff import Backoff
from daemon.core.metrics import Metrics
from daemon.inference.lanes import Lanes
from daemon.ingest.sources import CameraSource
from daemon.ops.cameras import CameraParts, CamerasControl
from daemon.ops.http import HealthServer, HttpLimits
from daemon.ops.http import clips as clip_routes
from daemon.ops.http import snapshots as snapshot_routes
from daemon.ops.http.api_cameras import PATH as CAMERAS_PATH
from daemon.ops.http.api_cameras import CamerasApi
from daemon.ops.http.api_lines import LinesApi
from daemon.ops.http.api_models import ModelsApi
from daemon.ops.lines import LinesControl
from daemon.ops.liveview import SCRIPTS, LiveView
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
CLIPS = re.compile(r"/clips/(?P<path>[^?#]+)")
CAMERAS = re.compile(CAMERAS_PATH)
READ = frozenset({"GET", "HEAD"})
PROTECTED_ROUTES: dict[str, tuple[re.Pattern[str], frozenset[str]]] = {
    "metrics": (re.compile(r"/metrics"), READ),
    "lines": (LINES, frozenset({"GET", "HEAD", "PUT"})),
    "models": (MODELS, frozenset({"GET", "HEAD", "POST"})),
    "model_list": (re.compile(r"/api/models"), READ),
    "snapshots": (SNAPSHOTS, READ),
    "cameras": (CAMERAS, frozenset({"GET", "HEAD", "PUT", "DELETE"})),
    "camera_list": (re.compile(r"/api/cameras"), READ),
    "clips": (CLIPS, READ),
    "page": (re.compile(r"/"), READ),
    "scripts": (re.compile(r"/static/(?:" + "|".join(re.escape(n) for n in SCRIPTS) + ")"), READ),
    "live_snapshot": (re.compile(r"/cameras/[A-Za-z0-9][A-Za-z0-9_.-]{0,63}/snapshot\.(?:jpg|json)"), READ),
}
WRITE_ROUTES = frozenset({("lines", "PUT"), ("models", "POST"), ("cameras", "PUT"), ("cameras", "DELETE")})


@dataclass
class ServedFiles:
    """A served directory (snapshots, clips): `inside` (relative path -> bytes served), names that lead out."""

    root: Path
    inside: dict[str, bytes]
    leading_out: list[str]


def make_served(base: Path, directory: str, suffix: str, contents: list[bytes]) -> ServedFiles:
    """`base/directory` with `a<suffix>` and two files in a camera's day (`contents`, three of them), a
    link inside to a file inside, and beside it `secret<suffix>` and `other/b<suffix>` (`SECRET`), with
    links leading out to them and a file of another suffix."""
    root = base / directory
    (root / CAMERA / "2026-12-06").mkdir(parents=True)
    (base / f"secret{suffix}").write_bytes(SECRET)
    (base / "other").mkdir(exist_ok=True)
    (base / "other" / f"b{suffix}").write_bytes(SECRET)
    names = [f"a{suffix}", f"{CAMERA}/2026-12-06/1{suffix}", f"{CAMERA}/2026-12-06/2{suffix}"]
    inside = dict(zip(names, contents, strict=True))
    for name, data in inside.items():
        (root / name).write_bytes(data)
    (root / "notes.txt").write_bytes(b"not served")
    (root / f"in{suffix}").symlink_to(root / f"a{suffix}")  # a link inside to a file inside: served
    inside[f"in{suffix}"] = inside[f"a{suffix}"]
    (root / f"out{suffix}").symlink_to(base / f"secret{suffix}")  # leads out: never served
    (root / "outdir").symlink_to(base / "other")
    return ServedFiles(root, inside, [f"out{suffix}", f"outdir/b{suffix}", f"../secret{suffix}", "notes.txt"])


def make_snapshots(base: Path) -> ServedFiles:
    return make_served(
        base, "snapshots", ".jpg", [b"\xff\xd8 a \xff\xd9", b"\xff\xd8 one \xff\xd9", b"\xff\xd8 two \xff\xd9"]
    )


def make_clips(base: Path) -> ServedFiles:
    """Clips of a few KiB (ranges across them mean something), each of its own bytes."""
    head = b"\x00\x00\x00\x18ftypisom"
    return make_served(
        base,
        "clips",
        ".mp4",
        [head + bytes((i * k) % 256 for i in range(n)) for k, n in ((7, 3000), (13, 1), (31, 9000))],
    )


def camera_control(settings: Settings, base: Path, metrics: Metrics) -> tuple[CamerasControl, LiveView]:
    """The cameras API's control with its own stages (see the module docstring); a camera added starts
    a real `CameraSource` (the CPU path); no lane is ever built (no frame reaches the hub)."""
    tracking = TrackingStage([], TrackingConfig(), metrics)
    liveview = LiveView(metrics, 0.5)
    hub = FrameHub(metrics)
    router = ModelRouter(sorted(settings.models), {})

    def never(*_args: Any) -> Any:
        raise AssertionError("no lane is built by the fuzzers")

    def make_source(camera: CameraConfig) -> CameraSource:
        jitter = random.Random(camera.id).random  # not the global generator, which Hypothesis watches while it draws
        backoff = Backoff(cap_s=camera.reconnect_max_s, rand=jitter)
        return CameraSource(
            camera, consumer=hub, route=router, on_status=lambda e: None, metrics=metrics, backoff=backoff
        )

    parts = CameraParts(
        sources=[],
        make_source=make_source,
        hub=hub,
        router=router,
        tracking=tracking,
        lines=LinesControl([], base / "camera-lines", tracking, liveview, on_event=lambda e: None),
        liveview=liveview,
        lanes=Lanes(EngineConfig(), metrics, build=never, batching=never, publish=never, observe=never),
        set_rules=lambda s: None,
        models={},
        metrics=metrics,
        on_event=lambda e: None,
    )
    control = CamerasControl(settings, parts)
    liveview.configured_from(control.listing)
    return control, liveview


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
        self.clips = make_clips(base)
        config = write_config(base / "beltsight.toml", redis_url="redis://127.0.0.1:1", cameras=[],
                              models_dropin=str(base / "models.toml"))  # fmt: skip
        settings = load_settings(config)
        self.models = ModelsControl(settings, self.swap, serving=lambda size: None)
        self.cameras, liveview = camera_control(settings, base, metrics)
        self.cameras_dir = settings.cameras_dir
        LinesApi(self.server, self.lines).register()
        ModelsApi(self.server, self.models).register()
        CamerasApi(self.server, self.cameras).register()
        liveview.register(self.server, lambda: {"cameras": {}})  # the page and `/api/cameras`: no camera runs
        snapshot_routes.register(self.server, self.snapshots.root)
        clip_routes.register(self.server, self.clips.root)

    def __enter__(self) -> Endpoint:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(30)
        return self

    def __exit__(self, *_exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop_cameras(), self.loop).result(60)
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

    def camera_views(self) -> dict[str, dict[str, Any] | None]:
        """Every configured camera's view (`CamerasControl.view`), read on the loop."""
        return asyncio.run_coroutine_threadsafe(self._views(), self.loop).result(30)

    async def _views(self) -> dict[str, dict[str, Any] | None]:
        return {cid: self.cameras.view(cid) for cid in self.cameras.listing()}

    async def _stop_cameras(self) -> None:
        """Every camera still configured removed (their readers stopped and joined), then the control closed."""
        for camera_id in list(self.cameras.listing()):
            await self.cameras.delete(camera_id, "fuzz")
        await self.cameras.close()


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
    if route in ("model_list", "camera_list", "page", "scripts"):
        return {200}
    if route == "cameras":  # GET: 404 for an unknown camera; a write: the API's answers (the fuzzers narrow them)
        return {200, 404} if sent.method in SAFE_METHODS else {200, 201, 400, 404, 412, 413}
    if route == "live_snapshot":  # no camera runs on the fuzzers' endpoint
        return {404}
    return {200, 404}  # snapshots and clips: the path fuzzers say which


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
    "ServedFiles",
    "endpoint",
    "exchange",
    "expected",
    "parse_reply",
    "request_bytes",
    "route_of",
]
