"""Crossing clips through the whole daemon (in-process): a real RTSP camera sending H.264 or H.265 (the kit's
GStreamer server), real Redis, the real endpoint with basic authentication. Each `crossed` entry names its
clip; the MP4 appears within `post_s` + 5 s of the crossing and meets the contract (PyAV); `GET /clips/<path>`
serves it with ranges, only with credentials, and nothing outside the directory; every frame and every
object event is still published exactly once."""

from __future__ import annotations

import base64
import http.client
from collections.abc import Callable
from pathlib import Path

import bcrypt
import pytest

from tests.support.clip_contract import check_contract, clip_facts
from tests.support.daemon_harness import InProcessDaemon, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip, RtspServer
from tests.support.metrics import inferred
from tests.support.objects import assert_objects_exactly_once, objects
from tests.support.streams import assert_exactly_once_in_order, stream
from tests.support.waits import wait_until
from tools.kit.synth.video import reencode

pytestmark = pytest.mark.slow
USER, PASSWORD = "quality", "why-rejected"
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
LINE = {"id": "mid", "start": [0.5, 0.0], "end": [0.5, 1.0]}
PRE_S, POST_S = 3.0, 2.0
FPS = 10
KEYFRAME_INTERVAL_MS = 1000  # the kit's clips: a keyframe every second


def request(
    port: int, path: str, headers: dict[str, str] | None = None, *, auth: bool = True
) -> tuple[int, dict[str, str], bytes]:
    sent = dict(headers or {})
    if auth:
        sent["Authorization"] = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=sent)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


@pytest.mark.parametrize("codec", ["h264", "hevc"])
def test_each_crossing_names_a_clip_that_meets_the_contract(
    codec: str,
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    rtsp_server: Callable[..., RtspServer],
    clip_factory: Callable[..., Clip],
) -> None:
    scene = clip_factory(640, 480, fps=FPS, seconds=8.0, seed=5, synthetic=True)
    source = scene.path
    if codec == "hevc":
        source = tmp_path / "belt-h265.mp4"
        reencode(scene.path, source, codec="libx265")
    server = rtsp_server({"belt": source})
    redis = redis_server()
    clips = tmp_path / "clips"
    (tmp_path / "secret.mp4").write_bytes(b"outside the clip directory")
    config = write_config(
        tmp_path / "b.toml",
        redis_url=redis.url,
        cameras=[{"id": "belt", "url": server.url("belt"), "lines": [LINE]}],
        health={"basic_auth_users": {USER: HASH}},
        extra=f'[clips]\nenabled = true\ndir = "{clips}"\npre_s = {PRE_S}\npost_s = {POST_S}\nmax_s = 20\n',
    )
    first_ms: list[int] = []

    def settled() -> list[tuple[str, int, int]]:
        """(clip, offset, at_ms) of crossings late enough after the first frame for a whole pre-roll."""
        if not first_ms:
            entries = stream(redis, "belt")
            if not entries:
                return []
            first_ms.append(int(entries[0][1]["captured_ms"]))
        horizon = first_ms[0] + (PRE_S + 2) * 1000
        return [
            (e.clip, e.clip_offset_ms, e.at_ms)
            for _i, e in objects(redis, "belt")
            if e.event == "crossed" and e.clip and e.clip_offset_ms is not None and e.at_ms > horizon
        ]

    with InProcessDaemon(config) as d:
        wait_until(lambda: any((clips / c).is_file() for c, _o, _a in settled()), 180, "a settled crossing's clip", d)
        assert d.daemon.health is not None
        port = d.daemon.health.port
        path, offset_ms, at_ms = next(x for x in settled() if (clips / x[0]).is_file())
        written_s = (clips / path).stat().st_mtime
        assert written_s * 1000 <= at_ms + (POST_S + 5) * 1000, "complete within post_s + 5 s of the crossing"
        facts = clip_facts(clips / path)
        assert (facts.codec, facts.width, facts.height) == (codec, 640, 480)
        assert facts.tag == ("hvc1" if codec == "hevc" else "avc1")
        check_contract(
            facts, offset_ms=offset_ms, pre_s=PRE_S, post_s=POST_S, keyframe_interval_ms=KEYFRAME_INTERVAL_MS
        )

        whole = (clips / path).read_bytes()
        status, headers, body = request(port, f"/clips/{path}")
        assert (status, headers["content-type"], body) == (200, "video/mp4", whole)
        assert headers["accept-ranges"] == "bytes"
        status, headers, body = request(port, f"/clips/{path}", {"Range": "bytes=100-299"})
        assert (status, body) == (206, whole[100:300])
        assert headers["content-range"] == f"bytes 100-299/{len(whole)}"
        assert request(port, f"/clips/{path}", {"Range": f"bytes={len(whole) + 10}-"})[0] == 416
        assert request(port, f"/clips/{path}", auth=False)[0] == 401
        for escape in ("/clips/../secret.mp4", "/clips/%2e%2e/secret.mp4", f"/clips/{tmp_path}/secret.mp4"):
            assert request(port, escape)[0] == 404, escape
        d.stop()
        frames = inferred(d, "belt")
        dropped = d.counter("beltsight_clips_dropped_total", reason="queue_full")
    assert_exactly_once_in_order(stream(redis, "belt"), frames)  # clips took no frame
    events = objects(redis, "belt")
    assert_objects_exactly_once(events)  # and no event
    crossed = [e for _i, e in events if e.event == "crossed"]
    assert dropped == 0
    # a crossing before the ring held its first keyframe (the stream joined mid-GOP) can have no clip
    # (counted as no_packets); every crossing with a whole pre-roll behind it must have one
    late = [e for e in crossed if e.at_ms > first_ms[0] + (PRE_S + 2) * 1000]
    assert late and all(e.clip is not None for e in late), "a crossing lost its clip with an idle queue"
    assert {e.clip for e in crossed if e.clip} <= {str(p.relative_to(clips)) for p in clips.rglob("*.mp4")}
