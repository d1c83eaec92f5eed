"""The review record on a real endpoint and a real Redis: crossings written to the objects streams as the
sink writes them (explicit IDs, each beside its frame's detections entry), the recorder reading them,
its API on a `HealthServer`, and stand-ins for what other parts serve (`/snapshots/`, `/clips/`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from aiohttp import web
from prometheus_client import CollectorRegistry

from daemon.config.redis import RedisConfig
from daemon.config.review import ReviewConfig
from daemon.config.tracking import LineConfig
from daemon.ops.http import HealthServer
from daemon.ops.http import snapshots as snapshot_route
from daemon.ops.review.api import ReviewApi
from daemon.ops.review.consumer import Recorder
from daemon.publish.sink.objects import EVENTS_PER_FRAME
from tests.support.daemon_harness import http_get
from tests.support.fixtures_redis import RedisServer
from tests.support.loop_thread import LoopThread

LINES = {
    "count": LineConfig(id="count", start=(0.5, 0.05), end=(0.5, 0.95)),
    "reject": LineConfig(id="reject", start=(0.2, 0.1), end=(0.2, 0.9)),
}


@dataclass
class Belt:
    """Writes object events and their frames' detections entries as the daemon's sink does."""

    client: redis.Redis
    frame_seq: dict[str, int] = field(default_factory=dict)
    top_ms: dict[str, int] = field(default_factory=dict)
    counts: dict[tuple[str, str, str], int] = field(default_factory=dict)
    written: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    """(objects stream entry ID, fields) of each crossing written."""

    def crossing(
        self,
        camera: str,
        at_ms: int,
        *,
        line: str = "count",
        direction: str = "in",
        label: str = "bolt",
        track: int = 1,
        snapshot: str | None = None,
        clip: str | None = None,
        clip_offset_ms: int | None = None,
        box: tuple[float, float, float, float] = (100.0, 80.0, 180.0, 160.0),
    ) -> str:
        frame_ms = self.top_ms[camera] = max(at_ms + 17, self.top_ms.get(camera, 0))  # the frame after the crossing
        seq = self.frame_seq[camera] = self.frame_seq.get(camera, 0) + 1
        frame_id = f"{frame_ms}-{seq}"
        det = {"cls": 0, "label": label, "score": 0.9, "box": list(box), "track": track}
        self.client.xadd(
            f"beltsight:detections:{camera}",
            {"v": "1", "camera": camera, "seq": str(seq), "captured_ms": str(frame_ms), "published_ms": str(frame_ms),
             "w": "640", "h": "480", "model": "416:demo", "n": "1", "dets": json.dumps([det])},
            id=frame_id,
        )  # fmt: skip
        key = (camera, line, direction)
        self.counts[key] = self.counts.get(key, 0) + 1
        fields = {
            "v": "1", "camera": camera, "track": str(track), "label": label, "cls": "0", "score": "0.9",
            "event": "crossed", "at_ms": str(at_ms), "line": line, "direction": direction,
            "count": str(self.counts[key]), "speed_px_s": "120.5", "eta": json.dumps({"gate1": at_ms + 900}),
        }  # fmt: skip
        if snapshot is not None:
            fields["snapshot"] = snapshot
        if clip is not None:
            fields["clip"] = clip
            fields["clip_offset_ms"] = str(clip_offset_ms or 0)
        entry = f"{frame_ms}-{seq * EVENTS_PER_FRAME + 1}"
        self.client.xadd(f"beltsight:objects:{camera}", dict[Any, Any](fields), id=entry)
        self.written.append((entry, fields))
        return entry

    def other(self, camera: str, at_ms: int, fields: dict[str, str]) -> None:
        """Another entry (a `new` or `end` event, a malformed one) in the camera's objects stream."""
        seq = self.frame_seq[camera] = self.frame_seq.get(camera, 0) + 1
        frame_ms = self.top_ms[camera] = max(at_ms, self.top_ms.get(camera, 0))
        self.client.xadd(
            f"beltsight:objects:{camera}", dict[Any, Any](fields), id=f"{frame_ms}-{seq * EVENTS_PER_FRAME + 1}"
        )


@dataclass
class ReviewEndpoint:
    port: int
    recorder: Recorder

    def get(self, path: str) -> Any:
        reply = http_get(self.port, path, timeout_s=20)
        assert reply.status == 200, (reply.status, reply.body)
        return reply.json()

    def all_crossings(self, query: str = "", limit: int = 100) -> list[dict[str, Any]]:
        """Every crossing of `query`, following `next`."""
        out: list[dict[str, Any]] = []
        cursor = ""
        while True:
            page = self.get(f"/api/crossings?limit={limit}&{query}{'&cursor=' + cursor if cursor else ''}")
            out += page["crossings"]
            if page["next"] is None:
                return out
            cursor = page["next"]


@contextmanager
def review_endpoint(
    server: RedisServer,
    db: Path,
    cameras: list[str],
    *,
    snapshots: Path | None = None,
    clips: Path | None = None,
    retention_days: float = 3650.0,
) -> Iterator[ReviewEndpoint]:
    """The recorder reading `cameras`' objects streams into `db`, its API on a loopback endpoint."""
    cfg = ReviewConfig(enabled=True, db=db)
    recorder = Recorder(
        cfg, RedisConfig(url=server.url), cameras, retention_days, line_of=lambda _c, line: LINES.get(line)
    )
    with LoopThread(timeout_s=60) as loop:
        endpoint = HealthServer("127.0.0.1", 0, CollectorRegistry(), lambda: {"ok": True})
        ReviewApi(endpoint, recorder).register()
        if snapshots is not None:
            snapshot_route.register(endpoint, snapshots)
        if clips is not None:
            serve_clips(endpoint, clips)
        loop.run(endpoint.start())

        async def start() -> asyncio.Task[None]:
            return asyncio.create_task(recorder.run())

        task = loop.run(start())
        try:
            yield ReviewEndpoint(endpoint.port, recorder)
        finally:

            async def stop() -> None:
                failed = task.exception() if task.done() else None  # the recorder must run until stopped
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                await endpoint.close()
                if failed is not None:
                    raise failed

            try:
                loop.run(stop())
            finally:
                recorder.close()


def serve_clips(endpoint: HealthServer, root: Path) -> None:
    """A stand-in for the clips' route (`GET /clips/<path>`, another part of #56): the file, with ranges."""

    async def clip(request: web.BaseRequest, params: dict[str, str]) -> web.StreamResponse:
        path = root / params["path"]
        if ".." in path.parts or not await asyncio.to_thread(path.is_file):
            return web.Response(status=404)
        return web.FileResponse(path, headers={"Content-Type": "video/mp4"})

    endpoint.route(r"/clips/(?P<path>[^?#]+)", clip)
