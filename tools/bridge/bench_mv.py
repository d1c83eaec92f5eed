"""Latency and memory bench of Machine Vision (OPC 40100-1) in the bridge: XADD -> ResultReadyEvent.

    python -m tools.bridge.bench_mv [--crossings 10000] [--rate 200]

Starts its own redis-server (tools/kit), the bridge in-process with `machine_vision = true` (OPC UA,
security none, no Modbus), and an asyncua client subscribed, at a 10 ms publishing interval, both to
the camera's ResultReadyEventType events and to the bridge's own CrossingEventType events (the
baseline: the same crossing through the existing OPC UA path, in the same run). XADDs crossings at
`--rate` per second and prints p50/p99/max of both latencies, their ratio, and the process's resident
memory (bridge, client and bench together: VmRSS) after start, at half-way and at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

import redis.asyncio as aioredis
from asyncua.client.client import Client

from tools.kit.plc_clients import (
    Arrivals,
    beltsight_ns,
    bench_bridge,
    crossing_fields,
    event_type,
    mv_ns,
    node,
    opcua_url,
    rss_mb,
    vision_system,
)
from tools.kit.redis_server import temporary_redis
from tools.kit.stats import Summary


async def subscribe(client: Client, mv: Arrivals, base: Arrivals) -> None:
    ns = await beltsight_ns(client)
    mv_sub = await client.create_subscription(10, mv)
    etype = await event_type(client, await mv_ns(client), "ResultReadyEventType")
    await mv_sub.subscribe_events(await vision_system(client, "cam1"), etype, queuesize=10000)
    base_sub = await client.create_subscription(10, base)
    btype = await event_type(client, ns, "CrossingEventType")
    await base_sub.subscribe_events(node(client, ns, "BeltSight"), btype, queuesize=10000)


async def bench(args: argparse.Namespace, redis_port: int, state_dir: Path) -> None:
    bridge = bench_bridge(redis_port, state_dir, modbus=False, machine_vision=True)
    await bridge.start()
    writer = aioredis.Redis(port=redis_port, decode_responses=True)
    sent: dict[int, float] = {}
    mv, base = Arrivals(lambda e: e.PartId.Id), Arrivals(lambda e: e.Track)
    memory: list[tuple[str, float]] = []
    async with Client(opcua_url(bridge.config.opcua.listen or "")) as client:
        await client.load_data_type_definitions()
        await subscribe(client, mv, base)
        await asyncio.sleep(0.5)
        memory.append(("started", rss_mb()))
        for n in range(1, args.crossings + 1):
            sent[n] = time.perf_counter()
            await writer.xadd("beltsight:objects:cam1", crossing_fields(n, snapshot=True))  # type: ignore[arg-type]
            if n == args.crossings // 2:
                memory.append((f"after {n}", rss_mb()))
            await asyncio.sleep(1 / args.rate)
        await asyncio.sleep(2.0)
        memory.append((f"after {args.crossings}", rss_mb()))
    await writer.aclose()
    await bridge.stop()
    report(sent, mv, base, memory)


def report(sent: dict[int, float], mv: Arrivals, base: Arrivals, memory: list[tuple[str, float]]) -> None:
    p99: dict[str, float] = {}
    for name, seen in (("ResultReadyEvent", mv), ("CrossingEvent (baseline)", base)):
        s = Summary.of([(seen.at[n] - sent[n]) * 1000 for n in sent if n in seen.at])
        p99[name] = s.p99
        print(
            f"{name:25s} n={s.n} missed={len(sent) - s.n} p50={s.p50:.1f} ms "
            f"p99={s.p99:.1f} ms max={s.max:.1f} ms mean={s.mean:.1f} ms"
        )
    print(f"p99 ratio ResultReadyEvent / baseline: {p99['ResultReadyEvent'] / p99['CrossingEvent (baseline)']:.2f}")
    print("resident memory (VmRSS): " + ", ".join(f"{label}: {mb:.1f} MB" for label, mb in memory))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--crossings", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=200.0, help="crossings per second")
    args = parser.parse_args()
    with temporary_redis() as (port, tmp):
        asyncio.run(bench(args, port, tmp))


if __name__ == "__main__":
    main()
