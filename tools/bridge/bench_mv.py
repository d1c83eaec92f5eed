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
from typing import Any

import redis.asyncio as aioredis
from asyncua import ua
from asyncua.client.client import Client
from redis.typing import EncodableT, FieldT

from daemon.bridge.seam import Bridge, layout_from_data
from daemon.config.seam import BridgeConfig, RedisConfig
from tools.kit.ports import free_port
from tools.kit.redis_server import temporary_redis
from tools.kit.stats import Summary

MV_URI = "http://opcfoundation.org/UA/MachineVision"


class Seen:
    """Arrival time of each crossing (by track) in events of one kind."""

    def __init__(self, track_of: Any) -> None:
        self.at: dict[int, float] = {}
        self._track_of = track_of

    def event_notification(self, event: Any) -> None:
        self.at.setdefault(int(self._track_of(event)), time.perf_counter())


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def crossing_fields(n: int) -> dict[FieldT, EncodableT]:
    now_ms = int(time.time() * 1000)
    return {
        "v": "1",
        "camera": "cam1",
        "track": str(n),
        "label": "box",
        "cls": "0",
        "score": "0.9",
        "event": "crossed",
        "at_ms": str(now_ms),
        "line": "L1",
        "direction": "in",
        "count": str(n),
        "speed_px_s": "50",
        "eta": f'{{"g1":{now_ms + 4000}}}',
        "snapshot": f"cam1/{n}.jpg",
    }


async def subscribe(client: Client, mv: Seen, base: Seen) -> None:
    ns = await client.get_namespace_index("urn:beltsight")
    mv_ns = await client.get_namespace_index(MV_URI)
    camera = await client.nodes.objects.get_child([f"{ns}:BeltSight", f"{ns}:MachineVision", f"{ns}:cam1"])
    mv_sub = await client.create_subscription(10, mv)
    etype = await client.nodes.base_event_type.get_child([f"{mv_ns}:ResultReadyEventType"])
    await mv_sub.subscribe_events(camera, etype, queuesize=10000)
    base_sub = await client.create_subscription(10, base)
    btype = await client.nodes.base_event_type.get_child([f"{ns}:CrossingEventType"])
    await base_sub.subscribe_events(
        client.get_node(ua.NodeId(ua.String("BeltSight"), ua.Int16(ns))), btype, queuesize=10000
    )


async def bench(args: argparse.Namespace, redis_port: int, state_dir: Path) -> None:
    layout = layout_from_data([{"id": "cam1", "lines": [{"id": "L1", "gates": ["g1"]}]}])
    config = BridgeConfig.model_validate(
        {
            "health_listen": "",
            "state_dir": str(state_dir),
            "opcua": {"listen": f"127.0.0.1:{free_port()}", "security": "none", "machine_vision": True},
            "modbus": {"listen": ""},
        }
    )
    bridge = Bridge(config, layout, lambda: aioredis.Redis(port=redis_port, decode_responses=True), redis=RedisConfig())
    await bridge.start()
    writer = aioredis.Redis(port=redis_port, decode_responses=True)
    sent: dict[int, float] = {}
    mv, base = Seen(lambda e: e.PartId.Id), Seen(lambda e: e.Track)
    memory: list[tuple[str, float]] = []
    async with Client(f"opc.tcp://{config.opcua.listen}/beltsight") as client:
        await client.load_data_type_definitions()
        await subscribe(client, mv, base)
        await asyncio.sleep(0.5)
        memory.append(("started", rss_mb()))
        for n in range(1, args.crossings + 1):
            sent[n] = time.perf_counter()
            await writer.xadd("beltsight:objects:cam1", crossing_fields(n))
            if n == args.crossings // 2:
                memory.append((f"after {n}", rss_mb()))
            await asyncio.sleep(1 / args.rate)
        await asyncio.sleep(2.0)
        memory.append((f"after {args.crossings}", rss_mb()))
    await writer.aclose()
    await bridge.stop()
    report(sent, mv, base, memory)


def report(sent: dict[int, float], mv: Seen, base: Seen, memory: list[tuple[str, float]]) -> None:
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
