"""Per-stream holds on the objects and events streams, and a held camera's spool across a restart,
provoked for real on a redis-server (a key recreated as a list: WRONGTYPE).

- cam1's objects stream refused: cam1 is held (its detections too, the camera is the unit), cam2's
  detections and objects keep flowing; after the fix cam1's entries and events arrive once, in order.
- The events stream refused: every camera keeps publishing, the status events wait in their own
  buffer and arrive once, in order, after the fix.
- cam1 held with a spool, the sink stopped and started again (what a daemon restart does): the next
  run finds the hold's spool, keeps cam1 held behind it, and after the fix the stream has every
  entry once, in order.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from daemon.config.redis import RedisConfig
from daemon.core.frames import FrameResult, StatusEvent
from daemon.core.metrics import Metrics
from daemon.core.objects import ObjectEvent
from tests.support.metrics import sample
from tests.support.objects import OBJECTS, objects
from tests.support.sink_helpers import BASE_MS, config, make_sink, result, running
from tests.support.streams import assert_exactly_once_in_order, stream
from tests.support.waits import async_wait_until
from tools.kit.redis_server import RedisServer, find_redis_server

A, B = "cam1", "cam2"
EVENTS = "beltsight:events"


@pytest.fixture
def srv(tmp_path: Path) -> Iterator[RedisServer]:
    binary = find_redis_server()
    if binary is None:
        pytest.skip("redis-server not installed")
    data = tmp_path / "redis"
    data.mkdir()
    server = RedisServer(binary, data).start()
    try:
        yield server
    finally:
        server.close()


def with_object(seq: int, camera: str) -> FrameResult:
    """Frame `seq` carrying one `new` track event (track = seq)."""
    res = result(seq, camera)
    event = ObjectEvent(camera, seq, "bolt", 1, 0.9, "new", res.captured_ms)
    return dataclasses.replace(res, objects=(event,))


def count(srv: RedisServer, key: str) -> int:
    """Entries in `key`; 0 while it holds something else."""
    try:
        return int(srv.client().xlen(key))
    except redis.ResponseError:
        return 0


def object_tracks(srv: RedisServer, camera: str) -> list[int]:
    return [e.track for _id, e in objects(srv, camera)]


@pytest.mark.slow
def test_a_refused_objects_stream_holds_only_its_camera(srv: RedisServer) -> None:
    admin = srv.client()
    admin.rpush(OBJECTS.format(A), "an operator's list")
    metrics = Metrics()

    async def scenario() -> None:
        async with running(make_sink(config(srv.url, publish_batch=8), metrics)) as sink:
            for seq in range(40):
                sink.accept(with_object(seq, A))
                sink.accept(with_object(seq, B))
                await asyncio.sleep(0.005)
            await async_wait_until(lambda: count(srv, OBJECTS.format(B)) == 40, timeout_s=30)
            await async_wait_until(lambda: sample(metrics, "beltsight_sink_held_entries", camera=A) > 0, 30)
            assert object_tracks(srv, B) == list(range(40))
            await asyncio.to_thread(admin.delete, OBJECTS.format(A))
            await async_wait_until(lambda: sink.buffered == 0, timeout_s=60)

    asyncio.run(scenario())
    assert object_tracks(srv, A) == list(range(40))
    assert_exactly_once_in_order(stream(srv, A), 40)
    assert_exactly_once_in_order(stream(srv, B), 40)
    assert sample(metrics, "beltsight_sink_stream_refusals_total", camera=A, code="WRONGTYPE") >= 1
    assert sample(metrics, "beltsight_sink_stream_refusals_total", camera=B, code="WRONGTYPE") == 0
    assert sample(metrics, "beltsight_frames_dropped_total", camera=A, reason="stream_refused") == 0


@pytest.mark.slow
def test_a_refused_events_stream_holds_no_camera_and_its_events_arrive_once_in_order(srv: RedisServer) -> None:
    admin = srv.client()
    admin.rpush(EVENTS, "an operator's list")
    metrics = Metrics()

    async def scenario() -> None:
        async with running(make_sink(config(srv.url, publish_batch=8), metrics)) as sink:
            for seq in range(30):
                sink.accept(result(seq, A))
                sink.accept(result(seq, B))
                sink.accept_event(StatusEvent("camera_down", f"event {seq}", A, at_ms=BASE_MS + seq))
                await asyncio.sleep(0.005)
            await async_wait_until(lambda: len(stream(srv, A)) == 30 and len(stream(srv, B)) == 30, timeout_s=30)
            assert sink.connected
            await asyncio.to_thread(admin.delete, EVENTS)
            await async_wait_until(lambda: count(srv, EVENTS) == 30, timeout_s=60)

    asyncio.run(scenario())
    details = [str(f["detail"]) for _id, f in srv.client(timeout_s=5).xrange(EVENTS)]
    assert details == [f"event {seq}" for seq in range(30)]
    assert_exactly_once_in_order(stream(srv, A), 30)
    assert_exactly_once_in_order(stream(srv, B), 30)


@pytest.mark.slow
def test_a_held_cameras_spool_survives_a_restart_and_is_delivered_once_in_order(
    srv: RedisServer, tmp_path: Path
) -> None:
    admin = srv.client()
    admin.rpush("beltsight:detections:cam1", "an operator's list")
    cfg = config(srv.url, publish_batch=8, spool_dir=tmp_path / "spool", spool_after_s=0.2)

    async def first_run() -> None:
        async with running(make_sink(cfg)) as sink:
            for seq in range(30):
                sink.accept(result(seq, A))
                sink.accept(result(seq, B))
                await asyncio.sleep(0.005)
            await async_wait_until(lambda: len(stream(srv, B)) == 30 and sink.buffered == 30, timeout_s=30)
        # stopped while cam1 is held: its entries are in the hold's spool
        assert any((tmp_path / "spool" / "held").iterdir())

    async def second_run() -> None:
        metrics = Metrics()
        async with running(make_sink(cfg, metrics)) as sink:
            assert sink.buffered == 30  # found again
            for seq in range(30, 50):
                sink.accept(result(seq, A))
                sink.accept(result(seq, B))
                await asyncio.sleep(0.005)
            await async_wait_until(lambda: len(stream(srv, B)) == 50 and sink.buffered == 20 + 30, timeout_s=30)
            assert sample(metrics, "beltsight_sink_held_entries", camera=A) == 50
            await asyncio.to_thread(admin.delete, "beltsight:detections:cam1")
            await async_wait_until(lambda: sink.buffered == 0, timeout_s=60)

    asyncio.run(first_run())
    assert count(srv, "beltsight:detections:cam1") == 0
    asyncio.run(second_run())
    assert [int(f["seq"]) for _id, f in stream(srv, A)] == list(range(50))
    assert_exactly_once_in_order(stream(srv, A), 50)
    assert_exactly_once_in_order(stream(srv, B), 50)
    asyncio.run(third_run_finds_nothing(cfg))


async def third_run_finds_nothing(cfg: RedisConfig) -> None:
    """Delivered once: a later run has nothing held nor spooled to send again."""
    async with running(make_sink(cfg)) as sink:
        assert sink.buffered == 0
