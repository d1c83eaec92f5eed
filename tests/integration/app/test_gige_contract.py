"""The GigE Vision contract, end to end: the whole daemon (in-process) reads `gige://127.0.0.1` from
Aravis' fake camera (`arv-fake-gv-camera-0.8 -i 127.0.0.1`, the real protocol) and publishes to a
real Redis; the camera is killed for 5 s and comes back."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from tests.support.daemon_harness import InProcessDaemon, write_config
from tests.support.fixtures_gige import FakeGigeCamera
from tests.support.fixtures_redis import RedisServer
from tests.support.metrics import drops
from tests.support.streams import entries
from tests.support.waits import wait_until

RATE = 3.0
"""The camera's frame rate (`[cameras.gige] frame_rate`): one the CPU model keeps up with on a shared
2-core box under a load average of 20 (at 5 fps it published 4.1 frames a second there)."""


def events(redis: RedisServer) -> list[dict[str, str]]:
    client = redis.client()
    try:
        raw = client.xrange("beltsight:events")
    finally:
        client.close()
    return [{str(k): str(v) for k, v in fields.items()} for _id, fields in raw]


def kinds_since(redis: RedisServer, ms: int) -> list[str]:
    return [e["kind"] for e in events(redis) if e.get("camera") == "belt" and int(e.get("at_ms", ms)) >= ms]


def test_gige_camera_publishes_at_its_rate_and_survives_a_5_s_outage(
    tmp_path: Path, gige_camera: Callable[..., FakeGigeCamera], redis_server: Callable[..., RedisServer]
) -> None:
    fake = gige_camera()
    redis = redis_server()
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[{"id": "belt", "url": "gige://127.0.0.1", "gige": {"frame_rate": RATE}}],
    )
    with InProcessDaemon(config) as d:
        wait_until(lambda: len(entries(redis, "belt")) >= 40, 180, "40 entries", d)
        published = entries(redis, "belt")[10:]  # past the lane's warm-up
        seqs = [int(e["seq"]) for e in published]
        assert seqs == sorted(set(seqs)), "seq must increase"
        lost = drops(d, "belt", "superseded", "stale", "incomplete", "frame_lost")
        assert len(seqs) + lost >= seqs[-1] - seqs[0] + 1  # each camera frame: published or counted
        captured = [int(e["captured_ms"]) for e in published]
        assert captured == sorted(set(captured))
        # captured_ms is the camera's clock on the host's: never after publishing, and the quickest
        # frame within 200 ms (every frame's wait is the model's on a busy CPU, not the camera's:
        # the source hands frames on within 200 ms of their camera time, tests/integration/ingest/test_gige.py)
        latency_ms = [int(e["published_ms"]) - int(e["captured_ms"]) for e in published]
        assert min(latency_ms) >= 0 and min(latency_ms) <= 200, sorted(latency_ms)
        # the camera's frame rate within 10 %, in both seq (camera frames) and entries per second
        span_s = (captured[-1] - captured[0]) / 1000
        assert RATE * 0.9 <= (seqs[-1] - seqs[0]) / span_s <= RATE * 1.1
        assert RATE * 0.9 <= (len(seqs) - 1) / span_s <= RATE * 1.1

        killed_ms = int(time.time() * 1000)
        fake.kill()
        wait_until(lambda: "camera_down" in kinds_since(redis, killed_ms), 15, "camera_down after the kill", d)
        remaining_s = 5 - (time.time() * 1000 - killed_ms) / 1000
        if remaining_s > 0:
            time.sleep(remaining_s)  # the outage lasts 5 s whatever the daemon does meanwhile
        back_ms = int(time.time() * 1000)
        fake.start()
        # the contract's 10 s: measured at 1-2 s on a shared 2-core box
        wait_until(lambda: "camera_up" in kinds_since(redis, back_ms), 10, "camera_up within 10 s", d)
        wait_until(
            lambda: any(int(e["captured_ms"]) > back_ms for e in entries(redis, "belt")), 10, "entries within 10 s", d
        )
