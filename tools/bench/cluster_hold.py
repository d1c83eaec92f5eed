"""Holds as wide as a Cluster fault, measured: the other shards' cameras' publish latency while one shard is down.

    .venv/bin/python -m tools.bench.cluster_hold [--cameras 4] [--fps 10] [--seconds 30] [--pairs 1] [--batch 256]

Starts a Redis Cluster on loopback (tools/kit/redis_cluster.py: 3 masters + 3 replicas,
`cluster-require-full-coverage no`, AOF on) and runs the real `RedisSink`
in-process (`[redis] cluster = true`, the sink's own backoff), fed synthetic frame results for
one victim camera, whose detection and objects streams both live on shard 0, and `--cameras`
others, none of whose streams live there, at F fps each. Each pair is two runs with the same
script: a baseline (nothing fails), then a fault run in which, after the first fifth of
`--seconds`, the victim shard's replica and master are SIGKILLed (nothing can take its slots
over) and stay down to the end of the run; then they are restarted and the victim's held entries
drain. Latency per entry is the moment a consumer in the same process (a blocking XREAD on each
other camera's stream, on its master) sees it, minus the moment the sink accepted it, both on
`time.perf_counter`. Prints, for the other cameras, p50/p99 of the entries accepted after the first
fifth of the runs (the start-up left out; in the fault runs, while the shard was down), the ratio
fault / baseline of the p99 (goal: within 1.10), the slowest entries of each run and when they were
accepted, and that the victim's stream holds every entry once, in order, after the restart.
A shared machine makes the numbers noisy: use `--pairs` and read several.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import tempfile
from pathlib import Path

import redis.asyncio as aioredis
from redis.crc import key_slot

from daemon.config.seam import RedisConfig
from daemon.core.seam import Metrics, stop_task
from daemon.publish.seam import RedisSink
from tools.kit.redis_cluster import ClusterNodeServer, RedisClusterProcs, start_cluster
from tools.kit.redis_server import find_redis_server
from tools.kit.sink_load import feed, watch
from tools.kit.stats import percentile
from tools.kit.streams import read_stream

STREAM = "beltsight:detections:{}"
OBJECTS = "beltsight:objects:{}"


def slot_owners(cluster: RedisClusterProcs) -> list[tuple[int, int, int]]:
    """(first slot, last slot, master port) for each range of the slot map."""
    reply = cluster.nodes[0].ask("CLUSTER", "SLOTS")
    return [(int(lo), int(hi), int(primary[1])) for lo, hi, primary, *_ in reply]


def pick_cameras(cluster: RedisClusterProcs, others: int) -> tuple[str, list[str], int]:
    """(victim, others, the victim master's port): the victim's two streams on one master, every
    other camera's two streams elsewhere (spread over the other masters)."""
    owners = slot_owners(cluster)

    def port_of(key: str) -> int:
        slot = key_slot(key.encode())
        return next(port for lo, hi, port in owners if lo <= slot <= hi)

    victim_port = port_of(STREAM.format("v0"))
    victim = next(
        f"v{n}"
        for n in itertools.count()
        if {port_of(STREAM.format(f"v{n}")), port_of(OBJECTS.format(f"v{n}"))} == {victim_port}
    )
    picked: list[str] = []
    for n in itertools.count():
        camera = f"c{n}"
        if victim_port not in {port_of(STREAM.format(camera)), port_of(OBJECTS.format(camera))}:
            picked.append(camera)
        if len(picked) == others:
            return victim, picked, victim_port
    raise AssertionError("unreachable")


def shard_of(cluster: RedisClusterProcs, port: int) -> tuple[ClusterNodeServer, ClusterNodeServer]:
    master = next(n for n in cluster.nodes if n.port == port)
    return master, cluster.replica_of(master)


def watch_streams(
    cluster: RedisClusterProcs, cameras: list[str], arrived: dict[tuple[str, int], float]
) -> list[asyncio.Task[None]]:
    """A watcher per camera on its stream's shard, noting in `arrived` when each entry is seen."""
    owners = slot_owners(cluster)
    watchers = []
    for camera in cameras:
        slot = key_slot(STREAM.format(camera).encode())
        port = next(p for lo, hi, p in owners if lo <= slot <= hi)
        watchers.append(
            asyncio.create_task(
                watch(
                    aioredis.Redis(host="127.0.0.1", port=port, decode_responses=True), [STREAM.format(camera)], arrived
                )
            )
        )
    return watchers


def entry_latencies(
    others: list[str],
    frames: int,
    accepted: dict[tuple[str, int], float],
    arrived: dict[tuple[str, int], float],
    fault_at: float,
    *,
    fault: bool,
) -> list[float]:
    """The latencies (ms) of the `others`' entries accepted from `fault_at` on (every entry checked seen);
    the p99 before it (a fault run) and the five slowest printed."""
    latencies: list[float] = []
    before: list[float] = []
    for camera in others:
        keys = [(camera, seq) for seq in range(frames)]
        assert all(k in arrived for k in keys), f"{camera}: {sum(k in arrived for k in keys)} of {frames} seen"
        for k in keys:
            (latencies if accepted[k] >= fault_at else before).append((arrived[k] - accepted[k]) * 1000.0)
    if fault:
        print(f"    (this fault run before the kill: p99 {percentile(before, 99):.2f} ms of {len(before)} entries)")
    slowest = sorted(
        ((arrived[k] - accepted[k]) * 1000.0, accepted[k] - fault_at, k)
        for camera in others
        for k in [(camera, seq) for seq in range(frames)]
        if accepted[k] >= fault_at
    )[-5:]
    where = "after the kill" if fault else "after the window opened"
    print("    slowest: " + ", ".join(f"{ms:.0f} ms at {at:+.1f} s {where} ({c} #{n})" for ms, at, (c, n) in slowest))
    return latencies


async def one_run(cluster: RedisClusterProcs, args: argparse.Namespace, *, fault: bool) -> tuple[list[float], int]:
    """(latencies in ms of the other cameras' entries accepted after the first fifth of the run: while
    the shard was down, or in a baseline the same window; the victim's entries, checked complete and
    in order)."""
    for node in cluster.alive():
        if node.role() == "master":
            node.ask("FLUSHALL")
    victim, others, victim_port = pick_cameras(cluster, args.cameras)
    cfg = RedisConfig(url=cluster.url, cluster=True, publish_batch=args.batch, connect_timeout_s=0.5)
    sink = RedisSink(cfg, Metrics())
    accepted: dict[tuple[str, int], float] = {}
    arrived: dict[tuple[str, int], float] = {}
    watchers = watch_streams(cluster, others, arrived)
    down = asyncio.Event()
    master, replica = shard_of(cluster, victim_port)

    async def kill_on_fault() -> None:
        await down.wait()
        replica.kill()
        master.kill()

    killer = asyncio.create_task(kill_on_fault())
    await sink.open()
    task = asyncio.create_task(sink.run())
    try:
        frames, fault_at = await feed(
            sink, [victim, *others], args.fps, args.seconds, accepted, down if fault else None
        )
        await asyncio.sleep(1.5)  # the other cameras' last entries reach the watchers
        if fault:
            await asyncio.to_thread(master.restart)
            await asyncio.to_thread(replica.restart)
            await asyncio.to_thread(cluster.wait_replicated, 60)
        for _ in range(1200):  # up to 60 s for what is left (the victim's held entries)
            if not sink.buffered:
                break
            await asyncio.sleep(0.05)
    finally:
        for running in (task, killer, *watchers):
            await stop_task(running)
        await sink.close()
    latencies = entry_latencies(others, frames, accepted, arrived, fault_at, fault=fault)
    stored = [int(f["seq"]) for _, f in read_stream(master.client(), STREAM.format(victim))]
    assert stored == list(range(frames)), f"victim: {len(stored)} of {frames}, in order: {stored == sorted(stored)}"
    return latencies, len(stored)


async def main(args: argparse.Namespace) -> None:
    binary = find_redis_server()
    if binary is None:
        raise SystemExit("redis-server not installed")
    with tempfile.TemporaryDirectory() as tmp:
        dirs = [Path(tmp) / f"node{i}" for i in range(6)]
        cluster = await asyncio.to_thread(start_cluster, binary, dirs, full_coverage=False, appendonly=True)
        base: list[float] = []
        faulted: list[float] = []
        victim_entries = 0
        try:
            for _ in range(args.pairs):
                base += (await one_run(cluster, args, fault=False))[0]
                lat, victim_entries = await one_run(cluster, args, fault=True)
                faulted += lat
        finally:
            cluster.close()
    print(
        f"1 victim + {args.cameras} other cameras at {args.fps} fps for {args.seconds} s, {args.pairs} pair(s) of"
        " runs; the victim's shard (master and replica) SIGKILLed after the first fifth of each fault run"
    )
    for name, lat in (("baseline", base), ("shard down", faulted)):
        print(
            f"  {name:>10}: other cameras' accept-to-visible latency p50 {percentile(lat, 50):.2f} ms,"
            f" p99 {percentile(lat, 99):.2f} ms ({len(lat)} entries)"
        )
    ratio = percentile(faulted, 99) / percentile(base, 99)
    print(f"  p99 ratio shard down / baseline: {ratio:.2f} (goal <= 1.10)")
    print(f"  victim: {victim_entries} entries after the restart, exactly once, in order")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cameras", type=int, default=4, help="cameras on the other shards")
    p.add_argument("--fps", type=float, default=10.0)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--pairs", type=int, default=1, help="baseline and fault runs, alternating")
    p.add_argument("--batch", type=int, default=256, help="publish_batch")
    return p.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse()))
