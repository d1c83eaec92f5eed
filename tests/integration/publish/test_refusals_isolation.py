"""One refused stream key holds nobody else: provoked for real on a redis-server (camera cam1's key
recreated as a list: WRONGTYPE; an ACL user without cam1's key: NOPERM). cam2 keeps publishing while
cam1 is refused; cam1's entries are held in order (memory or spool), counted, bounded, and arrive
exactly once, in order, after the fix. A refusal of the whole server (OOM) still holds everyone."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import structlog

from daemon.core.metrics import Metrics
from tests.support.metrics import sample
from tests.support.sink_helpers import config, make_sink, result, running
from tests.support.streams import assert_exactly_once_in_order, stream
from tests.support.waits import async_wait_until
from tools.kit.redis_server import RedisServer, find_redis_server

A, B = "cam1", "cam2"
A_KEY = "beltsight:detections:cam1"


@contextlib.contextmanager
def server(tmp_path: Path, *extra: str) -> Iterator[RedisServer]:
    binary = find_redis_server()
    if binary is None:
        pytest.skip("redis-server not installed")
    data = tmp_path / "redis"
    data.mkdir()
    srv = RedisServer(binary, data, extra_args=extra).start()
    try:
        yield srv
    finally:
        srv.close()


def refuse(code: str, srv: RedisServer) -> tuple[str, Any]:
    """Make Redis refuse cam1's key with `code`: (the URL the sink uses, the fix)."""
    admin = srv.client()
    if code == "WRONGTYPE":
        admin.rpush(A_KEY, "an operator's list")
        return srv.url, lambda: admin.delete(A_KEY)
    assert code == "NOPERM"  # every key but cam1's
    admin.execute_command(
        "ACL", "SETUSER", "writer", "on", ">pw", "+@all", "~beltsight:detections:cam2", "~*:objects:*"
    )
    return f"redis://writer:pw@127.0.0.1:{srv.port}/0", lambda: admin.execute_command("ACL", "SETUSER", "writer", "~*")


def oom_refusals(srv: RedisServer) -> int:
    """Commands the server has refused with OOM so far (INFO errorstats)."""
    client = srv.client()
    try:
        stats = client.info("errorstats")
    finally:
        client.close()
    return int(stats.get("errorstat_OOM", {}).get("count", 0))


def count(srv: RedisServer, camera: str) -> int:
    """Entries in the camera's stream; 0 while its key holds something else."""
    try:
        return len(stream(srv, camera))
    except redis.ResponseError:
        return 0


async def interleaved(sink: Any, seqs: range, pause_s: float = 0.005) -> None:
    for seq in seqs:
        sink.accept(result(seq, A))
        sink.accept(result(seq, B))
        await asyncio.sleep(pause_s)


@pytest.mark.slow
@pytest.mark.parametrize("spooled", [False, True], ids=["memory", "spool"])
@pytest.mark.parametrize("code", ["WRONGTYPE", "NOPERM"])
def test_a_refused_key_holds_only_its_camera_and_resumes_once_in_order(
    code: str, spooled: bool, tmp_path: Path
) -> None:
    with server(tmp_path) as srv, structlog.testing.capture_logs() as logs:
        url, fix = refuse(code, srv)
        spool = {"spool_dir": tmp_path / "spool", "spool_after_s": 0.2} if spooled else {}
        cfg = config(url, publish_batch=16, **spool)
        metrics = Metrics()

        async def scenario() -> None:
            async with running(make_sink(cfg, metrics)) as sink:
                await interleaved(sink, range(60))
                # B is written while A is refused: not behind A's entries
                await async_wait_until(lambda: count(srv, B) == 60, timeout_s=30)
                assert count(srv, A) == 0
                await async_wait_until(lambda: sample(metrics, "beltsight_sink_held_entries", camera=A) == 60, 30)
                if spooled:  # held on disk, in the hold's own spool
                    await async_wait_until(lambda: sink.spooled == 60, timeout_s=30)
                    assert any((tmp_path / "spool" / "held").iterdir())
                await asyncio.to_thread(fix)
                await interleaved(sink, range(60, 80))
                await async_wait_until(lambda: sink.buffered == 0 and count(srv, A) == 80, timeout_s=60)
                assert sample(metrics, "beltsight_sink_held_entries", camera=A) == 0

        asyncio.run(scenario())
        assert_exactly_once_in_order(stream(srv, A), 80)
        assert_exactly_once_in_order(stream(srv, B), 80)
        assert [int(f["seq"]) for _, f in stream(srv, A)] == list(range(80))
    assert sample(metrics, "beltsight_sink_stream_refusals_total", camera=A, code=code) >= 1
    assert sample(metrics, "beltsight_sink_stream_refusals_total", camera=B, code=code) == 0
    held = [e for e in logs if e["event"] == "sink_stream_held"]
    assert len(held) == 1 and held[0]["code"] == code and held[0]["stream"] == A_KEY and held[0]["hint"]
    assert [e for e in logs if e["event"] == "sink_stream_released"]
    assert not [e for e in logs if e["event"] in ("redis_write_failed", "redis_auth_failed", "redis_down")]
    for reason in ("buffer_full", "spool_full", "stream_refused"):
        assert sample(metrics, "beltsight_frames_dropped_total", camera=A, reason=reason) == 0


@pytest.mark.slow
def test_a_long_refusal_drops_the_oldest_of_that_camera_only(tmp_path: Path) -> None:
    with server(tmp_path) as srv:
        url, fix = refuse("WRONGTYPE", srv)
        cfg = config(url, publish_batch=16, buffer_max=20)
        metrics = Metrics()

        async def scenario() -> None:
            async with running(make_sink(cfg, metrics)) as sink:
                await interleaved(sink, range(50))
                await async_wait_until(lambda: count(srv, B) == 50, timeout_s=30)
                await async_wait_until(lambda: sink.buffered == 20, timeout_s=30)
                await asyncio.to_thread(fix)
                await async_wait_until(lambda: sink.buffered == 0 and count(srv, A) == 20, timeout_s=60)

        asyncio.run(scenario())
        assert [int(f["seq"]) for _, f in stream(srv, A)] == list(range(30, 50))  # the newest 20, in order
        assert_exactly_once_in_order(stream(srv, B), 50)
    assert sample(metrics, "beltsight_frames_dropped_total", camera=A, reason="stream_refused") == 30
    for reason in ("buffer_full", "spool_full", "stream_refused"):
        assert sample(metrics, "beltsight_frames_dropped_total", camera=B, reason=reason) == 0


@pytest.mark.slow
def test_a_refusal_of_the_whole_server_still_holds_every_camera(tmp_path: Path) -> None:
    with server(tmp_path, "--maxmemory-policy", "noeviction") as srv:
        srv.client().config_set("maxmemory", "1")
        cfg = config(srv.url, publish_batch=16)
        metrics = Metrics()

        async def scenario() -> None:
            async with running(make_sink(cfg, metrics)) as sink:
                await interleaved(sink, range(20))
                await async_wait_until(lambda: not sink.connected and sink.buffered == 40, timeout_s=30)
                refused = oom_refusals(srv)
                await async_wait_until(lambda: oom_refusals(srv) >= refused + 2, timeout_s=60)  # tried again
                assert count(srv, A) == count(srv, B) == 0  # nobody goes ahead
                await asyncio.to_thread(srv.client().config_set, "maxmemory", "0")
                await async_wait_until(lambda: sink.buffered == 0, timeout_s=60)

        asyncio.run(scenario())
        assert_exactly_once_in_order(stream(srv, A), 20)
        assert_exactly_once_in_order(stream(srv, B), 20)
    assert sample(metrics, "beltsight_sink_held_entries", camera=A) == 0
