"""Holds as wide as a Redis Cluster fault (3 masters + 3 replicas, `cluster-require-full-coverage no`):
one shard whose master and replica are both killed (NODE_DOWN), or one hash slot that no node serves
(CLUSTERDOWN Hash slot not served), holds only the camera whose streams live there; the cameras on
the other shards publish everything meanwhile; once the shard or slot is back, the held camera's
entries arrive exactly once, in order.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from redis.crc import key_slot

from daemon.config.redis import RedisConfig
from daemon.core.metrics import Metrics
from tests.support.cluster_streams import SLOT_RANGES, entries
from tests.support.fixtures_redis_cluster import RedisClusterProcs
from tests.support.metrics import sample
from tests.support.sink_helpers import BASE_MS, make_sink, result, running
from tests.support.waits import async_wait_until


def cluster_config(url: str, **kw: Any) -> RedisConfig:
    return RedisConfig(url=url, cluster=True, connect_timeout_s=0.5, socket_timeout_s=1.5, **kw)


def shard_of(key: str) -> int:
    slot = key_slot(key.encode())
    return next(i for i, (lo, hi) in enumerate(SLOT_RANGES) if lo <= slot <= hi)


def victim_and_others(prefix: str, cfg: RedisConfig) -> tuple[str, list[str]]:
    """A camera both of whose streams live on shard 0, and one camera on each other shard with
    neither stream on shard 0."""
    victim = ""
    others: dict[int, str] = {}
    for n in itertools.count():
        camera = f"{prefix}{n}"
        shards = {shard_of(cfg.stream_for(camera)), shard_of(cfg.objects_stream_for(camera))}
        if shards == {0} and not victim:
            victim = camera
        elif 0 not in shards and len(shards) == 1:
            others.setdefault(shards.pop(), camera)
        if victim and len(others) == 2:
            return victim, list(others.values())
    raise AssertionError("unreachable")


class Producer:
    """Frames for every camera, 100 per second each, numbered per camera."""

    def __init__(self, cameras: list[str]) -> None:
        self.sent = dict.fromkeys(cameras, 0)

    async def run(self, sink: Any, seconds: float) -> None:
        for _ in range(int(seconds * 100)):
            for camera, seq in self.sent.items():
                sink.accept(result(seq, camera, captured_ms=BASE_MS + seq * 10))
                self.sent[camera] = seq + 1
            await asyncio.sleep(0.01)


def seqs(cluster: RedisClusterProcs, camera: str) -> list[int]:
    return [int(f["seq"]) for _i, f in entries(cluster, camera)]


def held_only_while(
    cluster: RedisClusterProcs,
    cfg: RedisConfig,
    victim: str,
    others: list[str],
    fault: Callable[[], Awaitable[None]],
    heal: Callable[[], Awaitable[None]],
    code: str,
) -> None:
    """Publish, `fault`, publish (the others' entries all arrive, the victim's are held), `heal`, publish;
    then every camera's entries are there exactly once, in order, and only the victim was refused `code`."""
    producer = Producer([victim, *others])
    metrics = Metrics()

    async def scenario() -> None:
        async with running(make_sink(cfg, metrics)) as sink:
            await producer.run(sink, 0.3)
            await async_wait_until(lambda: sink.buffered == 0, timeout_s=20)
            await fault()
            await producer.run(sink, 1.0)
            for camera in others:  # everything, while the victim's streams are still not served
                await async_wait_until(lambda c=camera: len(seqs(cluster, c)) == producer.sent[c], timeout_s=30)
            assert sample(metrics, "beltsight_sink_held_entries", camera=victim) > 0
            assert sink.connected
            await heal()
            await producer.run(sink, 0.3)
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected, timeout_s=60)

    asyncio.run(scenario())
    for camera, sent in producer.sent.items():
        assert seqs(cluster, camera) == list(range(sent)), camera
        assert sample(metrics, "beltsight_entries_published_total", camera=camera) == sent
    assert sample(metrics, "beltsight_sink_stream_refusals_total", camera=victim, code=code) >= 1
    for camera in others:
        assert sample(metrics, "beltsight_sink_stream_refusals_total", camera=camera, code=code) == 0


@pytest.mark.slow
def test_a_shard_down_holds_only_its_camera_and_the_rest_publish_everything(
    redis_cluster: Callable[..., RedisClusterProcs],
) -> None:
    cluster = redis_cluster(full_coverage=False, appendonly=True)
    cfg = cluster_config(cluster.url, publish_batch=16)
    victim, others = victim_and_others("down-", cfg)
    master = cluster.master_of(cfg.stream_for(victim))
    replica = cluster.replica_of(master)

    async def kill_shard() -> None:
        replica.kill()
        master.kill()  # the shard has no node left: nothing can take its slots over

    async def restart_shard() -> None:
        await asyncio.to_thread(master.restart)
        await asyncio.to_thread(replica.restart)
        await asyncio.to_thread(cluster.wait_replicated, 60)

    held_only_while(cluster, cfg, victim, others, kill_shard, restart_shard, "NODE_DOWN")


@pytest.mark.slow
@pytest.mark.parametrize("min_replicas", [0, 1])
def test_a_slot_not_served_holds_only_its_camera_until_it_is_served_again(
    redis_cluster: Callable[..., RedisClusterProcs], min_replicas: int
) -> None:
    cluster = redis_cluster(full_coverage=False)
    cfg = cluster_config(cluster.url, publish_batch=16, min_replicas=min_replicas, wait_timeout_ms=500)
    victim, others = victim_and_others("slot-", cfg)
    slot = str(key_slot(cfg.stream_for(victim).encode()))
    owner = cluster.master_of(cfg.stream_for(victim))

    async def forget_slot() -> None:
        for node in cluster.alive():  # every node forgets the slot: "CLUSTERDOWN Hash slot not served"
            await asyncio.to_thread(node.ask, "CLUSTER", "DELSLOTS", slot)

    async def serve_slot() -> None:
        await asyncio.to_thread(owner.ask, "CLUSTER", "ADDSLOTS", slot)

    held_only_while(cluster, cfg, victim, others, forget_slot, serve_slot, "CLUSTERDOWN")
