"""Latency bench of the bridge: XADD -> OPC UA data change, and XADD -> Modbus register.

    python -m tools.bridge.bench [--crossings 1000] [--rate 100] [--poll-ms 5]

Starts its own redis-server (tools/kit: a free loopback port, a temp dir), the bridge in-process (OPC UA with
security none, Modbus), an asyncua client subscribed to CountIn at a 10 ms publishing interval and a
pymodbus client polling the line's block every `--poll-ms`. XADDs crossings at `--rate` per second
and prints p50/p99/max of both latencies (the Modbus figure includes up to one poll interval).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

import redis.asyncio as aioredis
from asyncua.client.client import Client

from daemon.bridge.seam import ModbusProtocol
from tools.kit.plc_clients import Arrivals, beltsight_ns, bench_bridge, crossing_fields, node, opcua_url, poll_count_in
from tools.kit.redis_server import temporary_redis
from tools.kit.stats import Summary


async def bench(args: argparse.Namespace, redis_port: int, state_dir: Path) -> None:
    bridge = bench_bridge(redis_port, state_dir)
    await bridge.start()
    writer = aioredis.Redis(port=redis_port, decode_responses=True)
    sent: dict[int, float] = {}
    opc, mb = Arrivals(), Arrivals()
    stop = asyncio.Event()
    async with Client(opcua_url(bridge.config.opcua.listen or "")) as client:
        sub = await client.create_subscription(10, opc)
        await sub.subscribe_data_change(
            node(client, await beltsight_ns(client), "BeltSight/cam1/L1/CountIn"), queuesize=100
        )
        modbus = bridge.protocol(ModbusProtocol)
        port = modbus.server.port if modbus is not None else 0
        poller = asyncio.create_task(
            poll_count_in(port, lambda n: mb.at.setdefault(n, time.perf_counter()), stop, args.poll_ms / 1000)
        )
        await asyncio.sleep(0.5)
        for n in range(1, args.crossings + 1):
            sent[n] = time.perf_counter()
            await writer.xadd("beltsight:objects:cam1", crossing_fields(n))  # type: ignore[arg-type]
            await asyncio.sleep(1 / args.rate)
        await asyncio.sleep(1.0)
        stop.set()
        await poller
    await writer.aclose()
    await bridge.stop()
    for name, seen in (("opcua data change", opc.at), ("modbus register", mb.at)):
        s = Summary.of([(seen[n] - sent[n]) * 1000 for n in sent if n in seen])
        print(
            f"{name:18s} n={s.n} missed={len(sent) - s.n} p50={s.p50:.1f} ms p99={s.p99:.1f} ms "
            f"max={s.max:.1f} ms mean={s.mean:.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--crossings", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=100.0, help="crossings per second")
    parser.add_argument("--poll-ms", type=float, default=5.0)
    args = parser.parse_args()
    with temporary_redis() as (port, tmp):
        asyncio.run(bench(args, port, tmp))


if __name__ == "__main__":
    main()
