"""Redis under Sentinel (a master, its replica, three sentinels: tests/support/fixtures_redis_sentinel.py):
the sink publishing continuously with `min_replicas = 1` through the SIGKILL of the master, the
sentinels' promotion of the replica and the old master's return as its replica, logged in as the
README's least-privilege users on the master and on the sentinels.

What is checked is what reached Redis: every accepted entry exactly once and in order."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import structlog

from daemon.config.redis import RedisConfig
from daemon.core.metrics import Metrics
from tests.support.fixtures_redis_sentinel import SentinelFactory, ask
from tests.support.metrics import sample
from tests.support.sink_helpers import make_sink, readme_acl, result, running
from tests.support.streams import assert_exactly_once_in_order, stream
from tests.support.waits import async_wait_until

CAMERAS = ("cam1", "cam2")


def test_the_sink_follows_a_sentinel_failover_and_keeps_every_entry_once_in_order(
    redis_sentinel: SentinelFactory, tmp_path: Path
) -> None:
    group = redis_sentinel(sentinel_password="pw-sentinel-admin")
    for sentinel in group.sentinels:
        sentinel.ask(*readme_acl("beltsight-sentinel", "pw-s"))
    for server in group.servers:  # ACLs are per server; the replica is the master to be
        ask(server.port, *readme_acl("beltsight", "pw-w"))
    secret = tmp_path / "sentinel-password"
    secret.write_text("pw-s\n")
    cfg = RedisConfig(
        url="redis://beltsight:pw-w@named-by-the-sentinels/0",
        sentinels=group.addresses,
        sentinel_master=group.name,
        sentinel_username="beltsight-sentinel",
        sentinel_password_file=secret,
        connect_timeout_s=0.5,
        socket_timeout_s=1.5,
        publish_batch=16,
        min_replicas=1,
        wait_timeout_ms=300,
    )
    metrics = Metrics()
    old = group.master
    sent = dict.fromkeys(CAMERAS, 0)

    async def produce(sink: Any, seconds: float) -> None:
        for _ in range(int(seconds * 100)):
            for camera in CAMERAS:
                sink.accept(result(sent[camera], camera))
                sent[camera] += 1
            await asyncio.sleep(0.01)

    async def scenario() -> None:
        async with running(make_sink(cfg, metrics)) as sink:
            await produce(sink, 0.5)
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected, timeout_s=30)
            old.kill()
            await asyncio.gather(produce(sink, 1.0), asyncio.to_thread(group.wait_promoted, old))
            await produce(sink, 1.0)  # the promoted master takes them; no replica confirms them yet
            await asyncio.to_thread(old.restart)  # the sentinels make it the new master's replica
            await asyncio.gather(produce(sink, 0.5), asyncio.to_thread(group.wait_replicated))
            await produce(sink, 0.5)
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected, timeout_s=90)

    with structlog.testing.capture_logs() as logs:
        asyncio.run(scenario())
    assert group.master is not old
    for camera in CAMERAS:
        assert_exactly_once_in_order(stream(group.master, camera), sent[camera])
        assert sample(metrics, "beltsight_entries_published_total", camera=camera) == sent[camera]
    assert sample(metrics, "beltsight_redis_replica_waits_total", outcome="confirmed") > 0
    assert sample(metrics, "beltsight_redis_replica_waits_total", outcome="short") > 0
    assert not [e for e in logs if e["event"] == "redis_auth_failed"]
    assert not [e for e in logs if "pw-s" in str(e) or "pw-w" in str(e)]  # secrets never logged
