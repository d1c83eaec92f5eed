"""Latency and memory bench of the bridge's Sparkplug edge: XADD -> DDATA received, RSS over many crossings.

    python -m tools.bridge.sparkplug_bench [--crossings 1000] [--rate 100] [--memory 10000]

Starts its own redis-server and mosquitto (tools/kit: free loopback ports, a temp dir), the bridge
in-process (OPC UA and Modbus off) and a paho subscriber on `spBv1.0/#` on its own thread. XADDs
crossings at `--rate` per second and prints p50/p99/max of XADD -> DDATA received, then XADDs
`--memory` more as fast as it can and prints the process's RSS before and after (the bridge runs in
this process). A shared machine makes both noisy: read them as orders of magnitude.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import threading
import time
from pathlib import Path

import paho.mqtt.client as paho
import redis.asyncio as aioredis
from pysparkplug import DData

from daemon.bridge.seam import SparkplugProtocol
from tools.kit.mosquitto import Mosquitto
from tools.kit.plc_clients import bench_bridge, crossing_fields, rss_mb
from tools.kit.redis_server import RedisServer, find_redis_server
from tools.kit.stats import Summary

STREAM = "beltsight:objects:cam1"


class Receiver:
    """DDATA arrival times by CountIn value (paho on its own thread)."""

    def __init__(self, port: int) -> None:
        self.arrived: dict[int, float] = {}
        self.ready = threading.Event()
        self.client = paho.Client(client_id="bench-host")
        self.client.on_connect = self._connected
        self.client.on_message = self._message
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()

    def _connected(self, client: paho.Client, *_: object) -> None:
        client.subscribe("spBv1.0/#", 0)
        self.ready.set()

    def _message(self, _c: object, _u: object, msg: paho.MQTTMessage) -> None:
        if "/DDATA/" in msg.topic:
            now = time.perf_counter()
            for m in DData.decode(msg.payload).metrics:
                if m.name == "L1/CountIn" and isinstance(m.value, int):
                    self.arrived[m.value] = now


async def run(crossings: int, rate: float, memory: int, tmp: Path) -> None:
    redis_server = RedisServer(find_redis_server() or "redis-server", tmp).start()
    broker = Mosquitto(tmp).start()
    receiver = Receiver(broker.port)
    receiver.ready.wait(10)
    bridge = bench_bridge(redis_server.port, tmp, opcua=False, modbus=False, sparkplug={"url": broker.url})
    r = aioredis.Redis(port=redis_server.port)
    await bridge.start()
    try:
        while (edge := bridge.protocol(SparkplugProtocol)) is None or not edge.edge.stats.connected:  # noqa: ASYNC110 (a bench: polling is fine)
            await asyncio.sleep(0.05)
        sent: dict[int, float] = {}
        for n in range(1, crossings + 1):
            sent[n] = time.perf_counter()
            await r.xadd(STREAM, crossing_fields(n))  # type: ignore[arg-type]
            await asyncio.sleep(1 / rate)
        while len(receiver.arrived) < crossings:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        s = Summary.of([(receiver.arrived[n] - sent[n]) * 1000 for n in sent])
        print(
            f"XADD -> DDATA, {crossings} crossings at {rate:g}/s: "
            f"p50 {s.p50:.1f} ms, p99 {s.p99:.1f} ms, max {s.max:.1f} ms"
        )
        before = rss_mb()
        for n in range(crossings + 1, crossings + memory + 1):
            await r.xadd(STREAM, crossing_fields(n))  # type: ignore[arg-type]
        while len(receiver.arrived) < crossings + memory:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        print(f"RSS over {memory} more crossings: {before:.1f} MB -> {rss_mb():.1f} MB (this process: bridge + bench)")
    finally:
        await bridge.stop()
        await r.aclose()
        receiver.client.loop_stop()
        broker.close()
        redis_server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crossings", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--memory", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(args.crossings, args.rate, args.memory, Path(tmp)))


if __name__ == "__main__":
    main()
