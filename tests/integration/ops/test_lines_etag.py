"""Optimistic concurrency on `GET`/`PUT /api/cameras/{id}/lines`, over the real endpoint (a loopback
HealthServer) and the real `LinesControl` writing drop-ins: the `ETag` is the SHA-256 of the
canonical JSON of what runs, a `PUT` with a stale `If-Match` gets `412` with what runs and changes
nothing, a `PUT` without one is applied, and of writers racing with the same tag exactly one wins."""

from __future__ import annotations

import asyncio
import hashlib
import json
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

from daemon.config.cameras import CameraConfig
from daemon.config.lines_dropin import CameraLines
from daemon.config.tracking import TrackingConfig
from daemon.core.metrics import Metrics
from daemon.ops.http import HealthServer
from daemon.ops.http.api_lines import LinesApi
from daemon.ops.lines import LinesControl
from daemon.ops.liveview import LiveView
from daemon.tracking.stage import TrackingStage
from tests.support.http_api import LINE

PATH = "/api/cameras/belt/lines"
JSON = {"Content-Type": "application/json"}


def canonical_tag(state: Any) -> str:
    """The tag as a client can compute it from a body: quoted SHA-256 of the sorted, compact JSON."""
    return '"' + hashlib.sha256(json.dumps(state, sort_keys=True, separators=(",", ":")).encode()).hexdigest() + '"'


def body(x: float) -> dict[str, Any]:
    return {"mm_per_px": None, "lines": [{**LINE, "start": [x, 0.0], "end": [x, 1.0]}]}


Reply = tuple[int, str | None, Any]
Call = Callable[..., Awaitable[Reply]]


def serve(tmp_path: Path, scenario: Callable[[Call, LinesControl], Awaitable[None]]) -> None:
    """Run `scenario` against a loopback endpoint with the lines API of one camera, `belt`."""
    cameras = [CameraConfig.model_validate({"id": "belt", "url": "rtsp://127.0.0.1:1/belt"})]
    metrics = Metrics()
    tracking = TrackingStage(cameras, TrackingConfig(), metrics)
    control = LinesControl(cameras, tmp_path / "lines", tracking, LiveView(metrics, 0.5), on_event=lambda e: None)

    async def run() -> None:
        server = HealthServer("127.0.0.1", 0, metrics.registry, lambda: {"ok": True})
        LinesApi(server, control).register()
        await server.start()
        try:
            async with aiohttp.ClientSession() as session:

                async def call(method: str, data: Any = None, headers: dict[str, str] | None = None) -> Reply:
                    url = f"http://127.0.0.1:{server.port}{PATH}"
                    raw = None if data is None else json.dumps(data)
                    async with session.request(method, url, data=raw, headers={**JSON, **(headers or {})}) as r:
                        text = await r.text()
                        return r.status, r.headers.get("ETag"), json.loads(text) if text else None

                await scenario(call, control)
        finally:
            await server.close()

    asyncio.run(run())


def dropin(tmp_path: Path) -> dict[str, Any]:
    return CameraLines.model_validate(tomllib.loads((tmp_path / "lines" / "belt.toml").read_text())).to_json()


def test_a_write_with_a_stale_if_match_gets_412_with_what_runs_and_changes_nothing(tmp_path: Path) -> None:
    async def scenario(call: Call, control: LinesControl) -> None:
        status, tag, first = await call("GET")
        assert status == 200 and first == {"mm_per_px": None, "lines": []} and tag == canonical_tag(first)
        head = await call("HEAD")
        assert head[0] == 200 and head[1] == tag

        # someone else writes (no If-Match: applied whatever runs); the PUT answers the new tag
        status, other_tag, applied = await call("PUT", body(0.3))
        assert status == 200 and applied == body(0.3) and other_tag == canonical_tag(body(0.3)) != tag

        # the editor that read `first` applies with its tag: 412, what runs now, nothing changed
        status, now_tag, now = await call("PUT", body(0.7), {"If-Match": tag or ""})
        assert (status, now_tag, now) == (412, other_tag, body(0.3))
        assert control.current("belt").to_json() == body(0.3) and dropin(tmp_path) == body(0.3)

        # with the tag of what runs: applied, the new tag back
        status, new_tag, applied = await call("PUT", body(0.7), {"If-Match": f'"nope", {other_tag}'})
        assert (status, new_tag, applied) == (200, canonical_tag(body(0.7)), body(0.7))
        assert (await call("GET"))[1] == new_tag and dropin(tmp_path) == body(0.7)

        # a weak tag never matches (strong comparison), nor does garbage; "*" matches whatever runs
        assert (await call("PUT", body(0.1), {"If-Match": f"W/{new_tag}"}))[0] == 412
        assert (await call("PUT", body(0.1), {"If-Match": "not a tag"}))[0] == 412
        assert dropin(tmp_path) == body(0.7)
        assert (await call("PUT", body(0.1), {"If-Match": "*"}))[:2] == (200, canonical_tag(body(0.1)))

        # an invalid body is still 400 (the precondition is not reached); unknown camera 404
        status, _tag, reply = await call("PUT", {"mm_per_px": 0}, {"If-Match": "*"})
        assert status == 400 and reply["problems"][0].startswith("mm_per_px")

    serve(tmp_path, scenario)


def test_of_writers_racing_with_the_same_tag_exactly_one_wins_and_the_others_see_its_lines(tmp_path: Path) -> None:
    async def scenario(call: Call, control: LinesControl) -> None:
        _status, tag, _first = await call("GET")
        xs = [round(0.05 + 0.09 * i, 2) for i in range(10)]
        replies = await asyncio.gather(*(call("PUT", body(x), {"If-Match": tag or ""}) for x in xs))
        winners = [r for r in replies if r[0] == 200]
        assert len(winners) == 1, [r[0] for r in replies]
        (_status, win_tag, won), losers = winners[0], [r for r in replies if r[0] != 200]
        assert len(losers) == len(xs) - 1 and all(r == (412, win_tag, won) for r in losers)
        assert control.current("belt").to_json() == won == dropin(tmp_path)

        # racing again, each with the tag of what runs: again exactly one
        replies = await asyncio.gather(*(call("PUT", body(x), {"If-Match": win_tag or ""}) for x in reversed(xs)))
        assert sorted(r[0] for r in replies) == [200] + [412] * (len(xs) - 1)
        final = next(r for r in replies if r[0] == 200)
        assert control.current("belt").to_json() == final[2] == dropin(tmp_path)

    serve(tmp_path, scenario)
