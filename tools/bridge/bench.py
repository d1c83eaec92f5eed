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
from typing import Any

import redis.asyncio as aioredis
from asyncua import ua
from asyncua.client.client import Client
from pymodbus.client import AsyncModbusTcpClient
from redis.typing import EncodableT, FieldT

from daemon.bridge.seam import Bridge, ModbusProtocol, layout_from_data, words_u32
from daemon.config.seam import BridgeConfig, RedisConfig
from tools.kit.ports import free_port
from tools.kit.redis_server import temporary_redis
from tools.kit.stats import Summary


class Changes:
    def __init__(self, seen: dict[int, float]) -> None:
        self.seen = seen

    def datachange_notification(self, node: Any, val: Any, data: Any) -> None:
        self.seen.setdefault(int(val), time.perf_counter())


async def poll_modbus(port: int, seen: dict[int, float], stop: asyncio.Event, poll_s: float) -> None:
    client = AsyncModbusTcpClient("127.0.0.1", port=port)
    await client.connect()
    last = 0
    while not stop.is_set():
        regs = (await client.read_holding_registers(0, count=16, device_id=1)).registers
        count = words_u32(regs[0], regs[1])
        now = time.perf_counter()
        for n in range(last + 1, count + 1):
            seen.setdefault(n, now)
        last = max(last, count)
        await asyncio.sleep(poll_s)
    client.close()


async def bench(args: argparse.Namespace, redis_port: int, state_dir: Path) -> None:
    layout = layout_from_data([{"id": "cam1", "lines": [{"id": "L1", "gates": ["g1"]}]}])
    config = BridgeConfig.model_validate(
        {
            "health_listen": "",
            "state_dir": str(state_dir),
            "opcua": {"listen": f"127.0.0.1:{free_port()}", "security": "none"},
            "modbus": {"listen": f"127.0.0.1:{free_port()}"},
        }
    )
    bridge = Bridge(config, layout, lambda: aioredis.Redis(port=redis_port, decode_responses=True), redis=RedisConfig())
    await bridge.start()
    writer = aioredis.Redis(port=redis_port, decode_responses=True)
    sent: dict[int, float] = {}
    opc_seen: dict[int, float] = {}
    mb_seen: dict[int, float] = {}
    stop = asyncio.Event()
    async with Client(f"opc.tcp://{config.opcua.listen}/beltsight") as client:
        ns = await client.get_namespace_index("urn:beltsight")
        sub = await client.create_subscription(10, Changes(opc_seen))
        await sub.subscribe_data_change(
            client.get_node(ua.NodeId(ua.String("BeltSight/cam1/L1/CountIn"), ua.Int16(ns))), queuesize=100
        )
        modbus = bridge.protocol(ModbusProtocol)
        port = modbus.server.port if modbus is not None else 0
        poller = asyncio.create_task(poll_modbus(port, mb_seen, stop, args.poll_ms / 1000))
        await asyncio.sleep(0.5)
        for n in range(1, args.crossings + 1):
            fields: dict[FieldT, EncodableT] = {
                "v": "1",
                "camera": "cam1",
                "track": str(n),
                "label": "box",
                "cls": "0",
                "score": "0.9",
                "event": "crossed",
                "at_ms": str(int(time.time() * 1000)),
                "line": "L1",
                "direction": "in",
                "count": str(n),
                "speed_px_s": "50",
                "eta": f'{{"g1":{int(time.time() * 1000) + 4000}}}',
            }
            sent[n] = time.perf_counter()
            await writer.xadd("beltsight:objects:cam1", fields)
            await asyncio.sleep(1 / args.rate)
        await asyncio.sleep(1.0)
        stop.set()
        await poller
    await writer.aclose()
    await bridge.stop()
    for name, seen in (("opcua data change", opc_seen), ("modbus register", mb_seen)):
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
