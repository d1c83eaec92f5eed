"""The bridge on Redis Sentinel (a failover while a PLC reads) and on a Redis Cluster (cameras on
different slots): every crossing served once, counts right, acknowledgements and snapshot kept.

The Sentinel test prints the bridge's failover time: from the master's SIGKILL to the first crossing
written after it that reached the OPC UA subscriber (sentinels here: down after 500 ms, a shared
2-core machine: the number is noisy)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

import redis
from asyncua import Client
from redis.sentinel import Sentinel

from daemon.bridge.layout import layout_from_data
from daemon.bridge.service import Bridge
from daemon.bridge.topology import AckLayout, slot_of
from daemon.config.redis import RedisConfig
from daemon.publish.redis_conn import Connector
from tests.support.bridge_harness import Events, crossing, make_config, read, subscribe, wait_for
from tests.support.fixtures_redis_cluster import RedisClusterProcs
from tests.support.fixtures_redis_sentinel import SentinelFactory
from tools.kit.redis_server import RedisServer

STREAM = "beltsight:objects:cam1"


class TimedEvents(Events):
    def __init__(self) -> None:
        super().__init__()
        self.at: list[float] = []

    def event_notification(self, event: object) -> None:
        super().event_notification(event)
        self.at.append(time.monotonic())


class Writer:
    """The daemon's side: crossings 1, 2, ... on cam1/L1 through the sentinels; a crossing counts as
    written once a replica confirmed it (WAIT 1), else it is written again (the bridge ignores a
    count it already served)."""

    def __init__(self, sentinels: list[str], name: str) -> None:
        nodes = [(h, int(p)) for h, p in (a.split(":") for a in sentinels)]
        self.sentinel = Sentinel(nodes, socket_timeout=1, socket_connect_timeout=1)
        self.name = name
        self.count = 0
        self.written_at: dict[int, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        master = self.sentinel.master_for(self.name, socket_timeout=1, decode_responses=True)
        while not self.stop.is_set():
            n = self.count + 1
            try:
                with master.pipeline(transaction=False) as pipe:
                    pipe.xadd(STREAM, crossing("cam1", "L1", n, track=n))
                    pipe.execute_command("WAIT", 1, 1000)
                    if int(pipe.execute()[-1]) < 1:
                        continue
            except (redis.RedisError, OSError):
                time.sleep(0.05)
                continue
            self.written_at[n] = time.monotonic()
            self.count = n
            time.sleep(0.02)


def _xadd(server: RedisServer, fields: dict[str, str]) -> None:
    client = server.client()
    try:
        client.xadd(STREAM, fields)
    finally:
        client.close()


async def _reconnected_at(bridge: Bridge, reconnects: int) -> float:
    stats = bridge.reader.stats
    await wait_for(lambda: stats.reconnects > reconnects and stats.connected)
    return time.monotonic()


def test_a_sentinel_failover_under_a_reading_plc_loses_and_repeats_nothing(
    redis_sentinel: SentinelFactory, tmp_path: Path
) -> None:
    group = redis_sentinel()
    redis_cfg = RedisConfig(
        url="redis://named-by-the-sentinels/0",
        sentinels=group.addresses,
        sentinel_master=group.name,
        min_replicas=1,
        socket_timeout_s=2.0,
        connect_timeout_s=1.0,
    )
    layout = layout_from_data([{"id": "cam1", "lines": [{"id": "L1"}]}])
    config = make_config(tmp_path)
    writer = Writer(group.addresses, group.name)

    async def scenario() -> None:
        bridge = Bridge(config, layout, Connector(redis_cfg), redis=redis_cfg)
        await bridge.start()
        thread = threading.Thread(target=writer.run, daemon=True)
        try:
            await wait_for(lambda: bridge.reader.stats.connected)
            handler = TimedEvents()
            async with Client(f"opc.tcp://{config.opcua.listen}/beltsight") as client:
                await subscribe(client, handler)
                thread.start()
                await wait_for(lambda: writer.count >= 30)
                old, killed_at = group.master, time.monotonic()
                last_before, reconnects = writer.count, bridge.reader.stats.reconnects
                await asyncio.to_thread(old.kill)
                back = asyncio.create_task(_reconnected_at(bridge, reconnects))
                await asyncio.to_thread(group.wait_promoted, old)
                await asyncio.to_thread(old.restart)  # the writer's WAIT 1 needs a replica again
                await asyncio.to_thread(group.wait_replicated)
                await wait_for(lambda: writer.count >= last_before + 30)
                writer.stop.set()
                await asyncio.to_thread(thread.join, 10)
                final = writer.count
                await wait_for(lambda: bool(handler.events) and handler.events[-1].Track == final)
                counts = [int(e.Track) for e in handler.events]
                assert counts == list(range(1, final + 1))  # each crossing once, in order, none lost
                assert await read(client, "BeltSight/cam1/L1/CountIn") == final
            first_new = min(n for n, at in writer.written_at.items() if at > killed_at)
            served_at = handler.at[counts.index(first_new)]
            reconnected_s = await back - killed_at
            print(f"\nbridge failover (Sentinel): master SIGKILL -> reader on the new master {reconnected_s:.2f} s")
            print(
                f"bridge failover (Sentinel): master SIGKILL -> first crossing written since (#{first_new}) served"
                f" {served_at - killed_at:.2f} s (the writer's WAIT 1 waits for the old master back as a replica)"
            )
        finally:
            writer.stop.set()
            await bridge.stop()
        # the acknowledgements and the snapshot reached the new master (WAIT): a fresh bridge serves nothing again
        bridge = Bridge(config, layout, Connector(redis_cfg), redis=redis_cfg)
        await bridge.start()
        try:
            await wait_for(lambda: bridge.reader.stats.connected)
            await wait_for(lambda: bridge.state.line("cam1", "L1").count_in == writer.count)
            # a crossing written now is the first it serves: it read past every acknowledged one
            nxt = writer.count + 1
            await asyncio.to_thread(_xadd, group.master, crossing("cam1", "L1", nxt, track=nxt))
            await wait_for(lambda: bridge.state.line("cam1", "L1").count_in == nxt)
            assert bridge.reader.stats.served == 1
        finally:
            await bridge.stop()

    asyncio.run(scenario())


def test_on_a_cluster_each_camera_s_acks_and_snapshot_stay_in_its_stream_s_slot(
    redis_cluster: Callable[[], RedisClusterProcs], tmp_path: Path
) -> None:
    cluster = redis_cluster()
    cameras = ("cam1", "cam2", "cam3", "cam4")
    layout = layout_from_data([{"id": c, "lines": [{"id": "L1"}]} for c in cameras])
    streams = [f"beltsight:objects:{c}" for c in cameras]
    masters = {cluster.master_of(s).port for s in streams}
    assert len({slot_of(s) for s in streams}) == len(streams) and len(masters) >= 2  # spread over the cluster
    redis_cfg = RedisConfig(url=cluster.url, cluster=True, min_replicas=1)
    config = make_config(tmp_path)
    acks = AckLayout.of(config, redis_cfg, {s: c for s, c in zip(streams, cameras, strict=True)})
    r = cluster.client()
    per_camera = 15

    async def scenario() -> None:
        bridge = Bridge(config, layout, Connector(redis_cfg), redis=redis_cfg)
        await bridge.start()
        try:
            await wait_for(lambda: bridge.reader.stats.connected)
            handler = Events()
            async with Client(f"opc.tcp://{config.opcua.listen}/beltsight") as client:
                await subscribe(client, handler)
                for n in range(1, per_camera + 1):
                    for cam, stream in zip(cameras, streams, strict=True):
                        r.xadd(stream, crossing(cam, "L1", n, track=n))
                await wait_for(lambda: len(handler.events) >= per_camera * len(cameras))
                await asyncio.sleep(0.5)
                got = sorted((str(e.Camera), int(e.Track)) for e in handler.events)
                assert got == sorted((c, n) for c in cameras for n in range(1, per_camera + 1))
                for cam in cameras:
                    assert await read(client, f"BeltSight/{cam}/L1/CountIn") == per_camera
            await wait_for(lambda: all(r.xpending(s, config.group)["pending"] == 0 for s in streams))
            assert bridge.reader.stats.replicas_short == 0
        finally:
            await bridge.stop()
        for stream in streams:  # each stream's part of the snapshot, in the stream's slot
            assert slot_of(acks.part_key(stream)) == slot_of(stream)
            assert f'"count_in":{per_camera}' in r.get(acks.part_key(stream))
        # a restarted bridge restores every part and serves nothing again
        bridge = Bridge(config, layout, Connector(redis_cfg), redis=redis_cfg)
        await bridge.start()
        try:
            await wait_for(lambda: bridge.reader.stats.connected)
            assert all(bridge.state.line(c, "L1").count_in == per_camera for c in cameras)
            r.xadd(streams[2], crossing("cam3", "L1", per_camera + 1, track=99))
            await wait_for(lambda: bridge.state.line("cam3", "L1").count_in == per_camera + 1)
            assert bridge.reader.stats.served == 1
        finally:
            await bridge.stop()

    asyncio.run(scenario())
