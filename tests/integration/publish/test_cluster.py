"""Redis Cluster (3 masters + 3 replicas from Debian's redis-server): the sink, the spool replay,
`beltsight tail --group`, and the whole daemon (one or two instances sharing the cameras)
through the SIGKILL of a master and its replica's promotion, with `min_replicas = 1`.

What is checked is what reached the cluster: every entry the daemon accepted is in its
camera's stream exactly once and in order, including the ones captured during the failover.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from redis.crc import key_slot

from daemon.config.redis import RedisConfig
from daemon.config.sharding import InstanceConfig, assignment, runs
from daemon.core.frames import FrameResult
from daemon.core.metrics import Metrics
from daemon.publish.tail import tail
from tests.support.clips import small_clip
from tests.support.cluster_streams import cameras_on_each_master, entries
from tests.support.daemon_harness import InProcessDaemon, write_config
from tests.support.fixtures_redis_cluster import CLUSTER_NODE_TIMEOUT_MS, RedisClusterProcs
from tests.support.fixtures_rtsp import Clip, RtspServer
from tests.support.metrics import drops, inferred, sample, total
from tests.support.sink_helpers import BASE_MS, make_sink, readme_acl, result, running
from tests.support.streams import STREAM, assert_exactly_once_in_order
from tests.support.waits import async_wait_until, wait_until


def cluster_config(url: str, **kw: Any) -> RedisConfig:
    return RedisConfig(url=url, cluster=True, connect_timeout_s=0.5, socket_timeout_s=1.5, **kw)


def test_sink_writes_each_camera_to_its_master_and_keeps_exactly_once_through_a_failover(
    redis_cluster: Callable[[], RedisClusterProcs],
) -> None:
    cluster = redis_cluster()
    cameras = cameras_on_each_master("cam-")
    cfg = cluster_config(cluster.url, publish_batch=16, min_replicas=1, wait_timeout_ms=500)
    metrics = Metrics()
    victim = cluster.master_of(cfg.stream_for(cameras[0]))
    masters = {cluster.master_of(cfg.stream_for(c)).port for c in cameras}
    assert len(masters) == 3
    sent = dict.fromkeys(cameras, 0)

    async def produce(sink: Any, seconds: float) -> None:
        for _ in range(int(seconds * 100)):
            for camera in cameras:
                sink.accept(result(sent[camera], camera, captured_ms=BASE_MS + sent[camera] * 10))
                sent[camera] += 1
            await asyncio.sleep(0.01)

    async def scenario() -> None:
        async with running(make_sink(cfg, metrics)) as sink:
            await produce(sink, 0.5)
            await async_wait_until(lambda: sink.buffered == 0, timeout_s=20)
            victim.kill()
            await asyncio.gather(
                produce(sink, 1.0), asyncio.to_thread(cluster.wait_promoted, victim, cfg.stream_for(cameras[0]))
            )
            await produce(sink, 1.0)
            await asyncio.to_thread(victim.restart)  # rejoins as the new master's replica
            await produce(sink, 0.5)
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected, timeout_s=60)

    asyncio.run(scenario())
    for camera in cameras:
        seqs = [int(f["seq"]) for _i, f in entries(cluster, camera)]
        assert seqs == list(range(sent[camera])), camera
        assert sample(metrics, "beltsight_entries_published_total", camera=camera) == sent[camera]
    assert sample(metrics, "beltsight_redis_replica_waits_total", outcome="confirmed") > 0


def short_waits(metrics: Metrics) -> float:
    """WAITs that counted too few replicas so far."""
    return sample(metrics, "beltsight_redis_replica_waits_total", outcome="short")


def test_writes_the_old_master_took_but_never_replicated_are_written_again_to_the_promoted_one(
    redis_cluster: Callable[[], RedisClusterProcs],
) -> None:
    """The loss `min_replicas` exists for: the master acknowledged entries its replica never got
    (here the replica is frozen and cut off), then the master dies and that replica is promoted."""
    cluster = redis_cluster()
    camera = cameras_on_each_master("lost-")[0]
    cfg = cluster_config(cluster.url, publish_batch=8, min_replicas=1, wait_timeout_ms=200)
    stream = cfg.stream_for(camera)
    master = cluster.master_of(stream)
    replica = cluster.replica_of(master)
    metrics = Metrics()

    async def scenario() -> None:
        async with running(make_sink(cfg, metrics)) as sink:
            for seq in range(10):
                sink.accept(result(seq, camera))
            await async_wait_until(lambda: sink.buffered == 0, timeout_s=20)
            replica.freeze()
            master.ask("CLIENT", "KILL", "TYPE", "replica")  # nothing more reaches the frozen replica
            for seq in range(10, 30):
                sink.accept(result(seq, camera))
            await async_wait_until(lambda: master.client().xlen(stream) == 30, timeout_s=20)
            short = short_waits(metrics)
            await async_wait_until(lambda: short_waits(metrics) > short, timeout_s=30)  # a WAIT after all 30
            assert sink.buffered == 20, "entries only the master holds must stay buffered"
            master.kill()
            replica.thaw()
            await asyncio.to_thread(cluster.wait_promoted, master, stream)  # it lacks 10..29
            await asyncio.to_thread(master.restart)  # back as the new master's replica: WAIT can succeed
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected, timeout_s=60)

    asyncio.run(scenario())
    assert [int(f["seq"]) for _i, f in entries(cluster, camera)] == list(range(30))
    assert sample(metrics, "beltsight_entries_published_total", camera=camera) == 30
    assert sample(metrics, "beltsight_redis_replica_waits_total", outcome="short") > 0


def command_stats(node: Any) -> tuple[int, int]:
    """(XADDs `node` ran, commands it refused: in a cluster, the ones it redirected with ASK or MOVED)."""
    stats = node.client().info("commandstats")
    return stats.get("cmdstat_xadd", {}).get("calls", 0), sum(c.get("rejected_calls", 0) for c in stats.values())


def move_slot(cluster: RedisClusterProcs, key: str, dst: Any) -> None:
    """Migrate `key`'s slot to the master `dst` the way `redis-cli --cluster reshard` does:
    IMPORTING/MIGRATING, MIGRATE the keys (ASK replies meanwhile), then SETSLOT NODE (MOVED).
    Someone must be writing to `key` meanwhile: each step waits for a write to meet it."""
    src = cluster.master_of(key)
    slot = str(key_slot(key.encode()))
    src_id, dst_id = src.ask("CLUSTER", "MYID"), dst.ask("CLUSTER", "MYID")
    dst.ask("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
    src.ask("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
    xadds, _ = command_stats(src)
    wait_until(lambda: command_stats(src)[0] > xadds, 30, "a write to meet the migration in progress")
    keys = src.ask("CLUSTER", "GETKEYSINSLOT", slot, "100")
    src.ask("MIGRATE", "127.0.0.1", str(dst.port), "", "0", "5000", "KEYS", *keys)
    _, refused = command_stats(src)
    wait_until(lambda: command_stats(src)[1] > refused, 30, "a write to meet an ASK reply")
    for node in cluster.alive():
        if node.role() == "master":
            node.ask("CLUSTER", "SETSLOT", slot, "NODE", dst_id)


@pytest.mark.parametrize("min_replicas", [0, 1])
def test_a_stream_whose_slot_moves_to_another_master_keeps_every_entry_once(
    redis_cluster: Callable[[], RedisClusterProcs], min_replicas: int
) -> None:
    cluster = redis_cluster()
    cameras = cameras_on_each_master("move-")
    cfg = cluster_config(cluster.url, publish_batch=4, min_replicas=min_replicas, wait_timeout_ms=300)
    stream = cfg.stream_for(cameras[0])
    dst = cluster.master_of(cfg.stream_for(cameras[1]))
    metrics = Metrics()
    sent = 0

    async def scenario() -> None:
        nonlocal sent
        async with running(make_sink(cfg, metrics)) as sink:

            async def produce(more: Callable[[], bool]) -> None:
                nonlocal sent
                while more():
                    sink.accept(result(sent, cameras[0], captured_ms=BASE_MS + sent))
                    sent += 1
                    await asyncio.sleep(0.01)

            await produce(lambda: sent < 30)
            move = asyncio.create_task(asyncio.to_thread(move_slot, cluster, stream, dst))
            await produce(lambda: not move.done())  # the move waits for writes to meet each step
            await move
            after = sent + 30
            await produce(lambda: sent < after)
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected, timeout_s=30)

    asyncio.run(scenario())
    assert cluster.master_of(stream) is dst
    assert [int(f["seq"]) for _i, f in entries(cluster, cameras[0])] == list(range(sent))
    assert sample(metrics, "beltsight_entries_published_total", camera=cameras[0]) == sent


def test_a_spool_written_while_the_cluster_was_away_is_replayed_into_it_exactly_once(
    redis_cluster: Callable[[], RedisClusterProcs], tmp_path: Path
) -> None:
    cluster = redis_cluster()
    cameras = cameras_on_each_master("spool-")
    spool = tmp_path / "spool"
    away = cluster_config("redis://127.0.0.1:1/0", buffer_max=20, spool_dir=spool)  # nothing listens there

    async def spill() -> None:
        sink = make_sink(away)
        await sink.open()
        for seq in range(40):
            for camera in cameras:
                sink.accept(result(seq, camera, captured_ms=BASE_MS + seq // 3))
        assert sink.spooled > 0
        await sink.close()  # the rest of memory goes to the spool too

    asyncio.run(spill())
    shutil.copytree(spool, tmp_path / "spool-copy")
    for directory in (spool, tmp_path / "spool-copy"):  # the copy: a replay whose commits were lost
        cfg = cluster_config(cluster.url, spool_dir=directory, min_replicas=1)
        metrics = Metrics()

        async def replay(cfg: RedisConfig = cfg, metrics: Metrics = metrics) -> None:
            async with running(make_sink(cfg, metrics)) as sink:
                assert sink.buffered == 40 * len(cameras)
                await async_wait_until(lambda: sink.buffered == 0 and sink.connected, timeout_s=30)

        asyncio.run(replay())
        for camera in cameras:
            assert [int(f["seq"]) for _i, f in entries(cluster, camera)] == list(range(40))
            assert sample(metrics, "beltsight_entries_published_total", camera=camera) == 40
    assert not list(spool.glob("seg-*.log"))


def test_tail_with_a_group_reads_every_camera_from_the_cluster(redis_cluster: Callable[[], RedisClusterProcs]) -> None:
    cluster = redis_cluster()
    cameras = cameras_on_each_master("tail-")
    cfg = cluster_config(cluster.url)

    async def publish(results: list[FrameResult]) -> None:
        async with running(make_sink(cfg)) as sink:
            for res in results:
                sink.accept(res)
            await async_wait_until(lambda: sink.buffered == 0)

    asyncio.run(publish([result(seq, camera) for camera in cameras for seq in range(4)]))
    out = io.StringIO()
    code = asyncio.run(tail(cfg, cameras, group="plc", consumer="c1", count=12, from_start=True, out=out))
    assert code == 0
    printed = sorted((line.split()[1], line.split()[2]) for line in out.getvalue().splitlines())
    assert printed == sorted((camera, f"seq={seq}") for camera in cameras for seq in range(4))
    client = cluster.client()
    for camera in cameras:
        assert client.xpending(cfg.stream_for(camera), "plc")["pending"] == 0
    # the same consumer again: nothing is delivered twice; new entries are
    asyncio.run(publish([result(4, cameras[1])]))
    out2 = io.StringIO()
    asyncio.run(tail(cfg, cameras, group="plc", consumer="c1", count=1, from_start=True, out=out2))
    assert [line.split()[1:3] for line in out2.getvalue().splitlines()] == [[cameras[1], "seq=4"]]


def failover_cameras(instances: int) -> list[str]:
    """One camera per master; with several instances, each gets at least one by the shard rule."""
    for k in itertools.count():
        cameras = cameras_on_each_master(f"belt{k}-")
        if all(assignment(cameras, instances)):
            return cameras
    raise AssertionError("unreachable")


def daemon_configs(tmp_path: Path, url: str, cameras: list[dict[str, Any]], instances: int) -> list[Path]:
    paths = []
    for shard in range(instances):
        path = write_config(
            tmp_path / f"beltsight-{shard}.toml",
            redis_url=url,
            cameras=cameras,
            extra=f"[instance]\nshard = {shard}\nshards = {instances}\n",
        )
        redis = "[redis]\ncluster = true\nmin_replicas = 1\nwait_timeout_ms = 300\nsocket_timeout_s = 1.5\n"
        path.write_text(path.read_text().replace("[redis]\n", redis, 1))
        paths.append(path)
    return paths


@pytest.mark.slow
@pytest.mark.parametrize("instances", [1, 2])
def test_daemons_keep_every_frame_exactly_once_through_a_master_failover(
    instances: int,
    tmp_path: Path,
    redis_cluster: Callable[[], RedisClusterProcs],
    rtsp_server: Callable[..., RtspServer],
    clip_factory: Callable[..., Clip],
) -> None:
    cluster = redis_cluster()
    cameras = failover_cameras(instances)
    srv = rtsp_server({c: small_clip(clip_factory, seconds=3.0, seed=i).path for i, c in enumerate(cameras)})
    configs = daemon_configs(tmp_path, cluster.url, [{"id": c, "url": srv.url(c)} for c in cameras], instances)
    victim_cam = cameras[0]
    victim = cluster.master_of(STREAM.format(victim_cam))
    with contextlib.ExitStack() as stack:
        daemons = [stack.enter_context(InProcessDaemon(path)) for path in configs]
        for camera in cameras:
            wait_until(lambda c=camera: len(entries(cluster, c)) >= 5, 90, f"{camera}'s first entries", daemons[0])
        killed_ms = int(time.time() * 1000)
        victim.kill()  # while frames flow
        cluster.wait_promoted(victim, STREAM.format(victim_cam))
        promoted_ms = int(time.time() * 1000)
        # the new master takes writes before the old one is back; WAIT confirms only once it is
        wait_until(
            lambda: any(int(f["captured_ms"]) > promoted_ms for _i, f in entries(cluster, victim_cam)),
            5.0 + 10.0,  # the sink's backoff cap + slack for these shared cores
            "publishing to resume on the new master",
        )
        victim.restart()  # it rejoins as the new master's replica
        cluster.wait_replicated(timeout_s=60)
        back_ms = int(time.time() * 1000)
        for camera in cameras:
            wait_until(
                lambda c=camera: any(int(f["captured_ms"]) > back_ms + 1000 for _i, f in entries(cluster, c)),
                30,
                f"{camera} to publish after the replica is back",
            )
        for d in daemons:
            d.stop()  # graceful: intake stops, the sink drains (and confirms)
    for camera in cameras:
        owners = [i for i, d in enumerate(daemons) if inferred(d, camera) > 0]
        assert owners == [i for i in range(instances) if runs(camera, InstanceConfig(shard=i, shards=instances))]
        assert len(owners) == 1, f"{camera} published by instances {owners}"
        owner = daemons[owners[0]]
        frames = inferred(owner, camera)
        assert total(owner, "beltsight_entries_published_total", camera=camera) == frames
        assert drops(owner, camera, "buffer_full", "shutdown", "engine_error") == 0
        assert_exactly_once_in_order(entries(cluster, camera), frames)
    late = [
        int(f["published_ms"]) - int(f["captured_ms"])
        for _i, f in entries(cluster, victim_cam)
        if killed_ms < int(f["captured_ms"]) < promoted_ms
    ]
    assert late, "no frame captured during the failover reached the stream"
    assert max(late) >= CLUSTER_NODE_TIMEOUT_MS / 2, "frames captured during the failover were not held and sent late"
    for d in daemons:
        assert total(d, "beltsight_redis_replica_waits_total", outcome="confirmed") > 0


def test_the_documented_acl_users_work_against_the_cluster(redis_cluster: Callable[[], RedisClusterProcs]) -> None:
    cluster = redis_cluster()
    for node in cluster.nodes:  # ACLs are per node
        node.ask(*readme_acl("beltsight", "pw-w"))
        node.ask(*readme_acl("plc", "pw-r"))
    cameras = cameras_on_each_master("acl-")
    port = cluster.nodes[0].port
    cfg = cluster_config(f"redis://beltsight:pw-w@127.0.0.1:{port}", min_replicas=1)
    metrics = Metrics()

    async def scenario() -> None:
        async with running(make_sink(cfg, metrics)) as sink:
            for camera in cameras:
                for seq in range(3):
                    sink.accept(result(seq, camera))
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected, timeout_s=20)

    asyncio.run(scenario())
    out = io.StringIO()
    reader = cluster_config(f"redis://plc:pw-r@127.0.0.1:{port}")
    asyncio.run(tail(reader, cameras, group="plc", consumer="c1", count=9, from_start=True, out=out))
    assert sorted(line.split()[1] for line in out.getvalue().splitlines()) == sorted(cameras * 3)
    assert sample(metrics, "beltsight_redis_replica_waits_total", outcome="confirmed") > 0
