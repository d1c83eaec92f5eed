"""A web page in the operator's browser cannot drive the endpoint (`daemon.ops.http.browser`).

On a real endpoint (loopback, no users: the default, where writes need no password) serving the real
lines and models APIs: a write from another origin is `403`, a write that is not JSON is `415`, a
`Host` that is not a loopback name is `403` on every route but `/healthz`; curl-style and same-origin
requests pass. Then the attack itself, in headless Chromium: a page of another origin posts a
"simple" cross-site `text/plain` request and a form to the models and lines APIs, and nothing is
swapped or changed."""

from __future__ import annotations

import asyncio
import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from aiohttp import web

from daemon.config.cameras import CameraConfig
from daemon.config.tracking import TrackingConfig
from daemon.core.metrics import Metrics
from daemon.inference.swap import SwapError, Swapped
from daemon.ops.http import HealthServer
from daemon.ops.http.api_lines import LinesApi
from daemon.ops.http.api_models import ModelsApi
from daemon.ops.lines import LinesControl
from daemon.ops.liveview import LiveView
from daemon.tracking.stage import TrackingStage
from tests.support.chromium import CHROMIUM, Chromium
from tests.support.http_api import LINE
from tests.support.loop_thread import LoopThread
from tests.support.waits import wait_until

LINES = "/api/cameras/belt/lines"
MODELS = "/api/models/640"
MODEL_BODY = json.dumps({"path": "/nonexistent/model.onnx"}).encode()
LINES_BODY = json.dumps({"lines": [LINE]}).encode()


class RecordingSwapper:
    """Models as `ModelsApi` sees them (a `ModelsControl`'s surface) that record each swap that reached
    them and refuse it (no model is ever loaded here)."""

    sizes = (640,)

    def __init__(self) -> None:
        self.calls: list[Path] = []

    async def state(self, size: int) -> dict[str, Any]:
        return {"size": size, "path": "/models/conveyor-640.onnx"}

    async def swap(self, size: int, path: Path, **kwargs: Any) -> tuple[Swapped, dict[str, Any]]:
        self.calls.append(path)
        raise SwapError(422, f"recorded {path}")


class Endpoint:
    def __init__(self, tmp_path: Path, **kwargs: Any) -> None:
        cameras = [CameraConfig.model_validate({"id": "belt", "url": "rtsp://127.0.0.1:1/belt"})]
        self.metrics = Metrics()
        tracking = TrackingStage(cameras, TrackingConfig(), self.metrics)
        self.lines = LinesControl(
            cameras, tmp_path / "lines", tracking, LiveView(self.metrics, 0.5), on_event=lambda e: None
        )
        self.swapper = RecordingSwapper()
        self.server = HealthServer("127.0.0.1", 0, self.metrics.registry, lambda: {"ok": True},
                                   metrics=self.metrics, **kwargs)  # fmt: skip
        LinesApi(self.server, self.lines).register()
        ModelsApi(self.server, self.swapper).register()  # type: ignore[arg-type]

    @property
    def port(self) -> int:
        return self.server.port

    def refused(self, reason: str) -> float:
        value = self.metrics.registry.get_sample_value("beltsight_http_requests_refused_total", {"reason": reason})
        return value or 0.0


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[Endpoint]:
    with LoopThread() as loop:
        made = Endpoint(tmp_path)
        loop.run(made.server.start())
        try:
            yield made
        finally:
            loop.run(made.server.close())


def call(port: int, method: str, path: str, body: bytes | None = None, **headers: str) -> int:
    """The status of one request with exactly these headers (`Host` defaults to the endpoint's address)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        sent = {"Host": f"127.0.0.1:{port}", **{k.replace("_", "-"): v for k, v in headers.items()}}
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in sent.items():
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


JSON = "application/json"


def test_the_contract_on_a_loopback_endpoint_without_users(endpoint: Endpoint) -> None:
    port = endpoint.port
    own = f"http://127.0.0.1:{port}"
    # curl-style (JSON, no Origin) and same-origin writes reach the API
    assert call(port, "PUT", LINES, LINES_BODY, Content_Type=JSON) == 200
    assert call(port, "PUT", LINES, LINES_BODY, Content_Type="application/json; charset=utf-8", Origin=own) == 200
    assert call(port, "POST", MODELS, MODEL_BODY, Content_Type=JSON) == 422  # reached the swapper: recorded
    assert call(port, "POST", MODELS, MODEL_BODY, Content_Type=JSON, Origin=f"http://localhost:{port}",
                Host=f"localhost:{port}") == 422  # fmt: skip
    assert len(endpoint.swapper.calls) == 2
    # another origin: 403, whatever the body
    for origin in ("http://evil.example", f"http://127.0.0.1:{port + 1}", "null", f"https://127.0.0.1:{port}"):
        assert call(port, "POST", MODELS, MODEL_BODY, Content_Type=JSON, Origin=origin) == 403, origin
        assert call(port, "PUT", LINES, LINES_BODY, Content_Type=JSON, Origin=origin) == 403, origin
    assert call(port, "POST", MODELS, MODEL_BODY, Content_Type="text/plain", Origin="http://evil.example") == 403
    assert call(port, "POST", MODELS, MODEL_BODY, Content_Type=JSON, Sec_Fetch_Site="cross-site") == 403
    # not JSON: 415 (a simple cross-site post, a form, no type at all)
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        assert call(port, "POST", MODELS, MODEL_BODY, Content_Type=kind) == 415, kind
        assert call(port, "PUT", LINES, LINES_BODY, Content_Type=kind) == 415, kind
    assert call(port, "POST", MODELS, MODEL_BODY) == 415
    assert len(endpoint.swapper.calls) == 2  # none of the refused ones reached the swapper
    # a rebound name: 403 on every route (reads too), but /healthz
    evil = f"evil.example:{port}"
    for method, path, body in (("GET", LINES, None), ("GET", "/metrics", None), ("GET", "/", None),
                               ("PUT", LINES, LINES_BODY), ("POST", MODELS, MODEL_BODY)):  # fmt: skip
        assert call(port, method, path, body, Host=evil, Content_Type=JSON) == 403, path
    assert call(port, "GET", "/healthz", Host=evil) == 200
    for name in ("localhost", "app.localhost", "127.0.0.2", "[::1]", "LOCALHOST"):
        assert call(port, "GET", "/metrics", Host=f"{name}:{port}") == 200, name
    assert call(port, "GET", "/metrics", Host="user@127.0.0.1") == 403  # not a host value at all
    assert len(endpoint.swapper.calls) == 2
    assert endpoint.refused("origin") >= 10 and endpoint.refused("content_type") >= 7
    assert endpoint.refused("host") >= 6


def test_each_refusal_is_logged_once_per_interval_per_reason(endpoint: Endpoint) -> None:
    port = endpoint.port
    with structlog.testing.capture_logs() as logs:
        for _ in range(5):
            assert call(port, "POST", MODELS, MODEL_BODY, Content_Type=JSON, Origin="http://evil.example") == 403
            assert call(port, "GET", "/metrics", Host="evil.example") == 403
    lines = [e for e in logs if e["event"] == "http_request_refused"]
    assert sorted(e["reason"] for e in lines) == ["host", "origin"]
    assert all(e["peer"] == "127.0.0.1" for e in lines)


def test_allowed_hosts_and_origins_apply_and_reload(tmp_path: Path) -> None:
    with LoopThread() as loop:
        made = Endpoint(tmp_path, allowed_hosts=["beltsight-01.plant.example"],
                        allowed_origins=["https://hmi.plant.example"])  # fmt: skip
        loop.run(made.server.start())
        try:
            port = made.port
            assert call(port, "GET", LINES, Host=f"beltsight-01.plant.example:{port}") == 200
            assert call(port, "GET", LINES, Host=f"other.plant.example:{port}") == 403
            hmi = "https://hmi.plant.example:443"  # the default port is the same origin
            assert call(port, "PUT", LINES, LINES_BODY, Content_Type=JSON, Origin=hmi) == 200
            made.server.set_browser_policy([], [])
            assert call(port, "GET", LINES, Host=f"beltsight-01.plant.example:{port}") == 403
            assert call(port, "PUT", LINES, LINES_BODY, Content_Type=JSON, Origin=hmi) == 403
        finally:
            loop.run(made.server.close())


def test_off_loopback_the_host_is_not_checked_and_writes_still_need_users(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, int]:
        made = Endpoint(tmp_path)
        made.server = HealthServer("0.0.0.0", 0, made.metrics.registry, lambda: {"ok": True}, metrics=made.metrics)
        LinesApi(made.server, made.lines).register()
        await made.server.start()
        try:
            loop = asyncio.get_running_loop()
            read = await loop.run_in_executor(None, lambda: call(made.port, "GET", LINES, Host="box.plant.example"))
            write = await loop.run_in_executor(
                None, lambda: call(made.port, "PUT", LINES, LINES_BODY, Content_Type=JSON, Host="box.plant.example")
            )
            return read, write
        finally:
            await made.server.close()

    assert asyncio.run(scenario()) == (200, 403)  # the write guard: no users, not loopback


ATTACK_PAGE = """<!doctype html><title>a page from another site</title>
<form id="f" method="POST" action="{target}/api/models/640" enctype="text/plain" target="sink">
<input name='{{"path": "/attacker/model.onnx", "x": "' value='"}}'></form>
<iframe name="sink"></iframe>
<script>
window.sent = 0;
async function attack() {{
  const body = JSON.stringify({{path: "/attacker/model.onnx"}});
  for (const type of ["text/plain", "application/x-www-form-urlencoded"]) {{
    const init = {{method: "POST", mode: "no-cors", body, headers: {{"Content-Type": type}}}};
    try {{ await fetch("{target}/api/models/640", init); }} catch (e) {{}}
    window.sent++;
  }}
  // a PUT cannot be "no-cors": the browser refuses to send it (a CORS preflight would be refused too)
  const put = {{method: "PUT", mode: "no-cors", body: JSON.stringify({{lines: []}})}};
  try {{ await fetch("{target}/api/cameras/belt/lines", put); }} catch (e) {{}}
  window.sent++;
  document.getElementById("f").submit();
  window.sent++;
}}
attack();
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_a_page_of_another_origin_in_a_real_browser_cannot_swap_the_model(tmp_path: Path) -> None:
    async def attacker_page(_request: web.Request) -> web.Response:
        return web.Response(text=ATTACK_PAGE.format(target=f"http://127.0.0.1:{target_port}"), content_type="text/html")

    with LoopThread() as loop:
        made = Endpoint(tmp_path)
        loop.run(made.server.start())
        target_port = made.port
        app = web.Application()
        app.router.add_get("/", attacker_page)
        runner = web.AppRunner(app)
        loop.run(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run(site.start())
        attacker_port = runner.addresses[0][1]
        browser = Chromium(tmp_path)
        try:
            browser.open(f"http://localhost:{attacker_port}/")  # another origin than http://127.0.0.1:<port>
            browser.wait_for("window.sent === 4", what="the attack page's requests")

            def tried() -> float:
                return made.refused("origin") + made.refused("content_type")

            # two posts and the form (the PUT never leaves the browser); the form may land after `sent` counts it
            wait_until(lambda: tried() >= 3, 30, "the browser's three requests refused at the endpoint")
            assert made.swapper.calls == []
            assert made.lines.current("belt").lines == []  # nothing was put either
        finally:
            browser.close()
            loop.run(runner.cleanup())
            loop.run(made.server.close())
