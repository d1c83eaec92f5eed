"""The lab's PLC client kit: what the bridge benches, the soak's PLC and the demo's `plc` command do as a
PLC does to the bridge, written once.

- OPC UA (asyncua): `opcua_url(listen)`, `beltsight_ns(client)` and `mv_ns(client)` (the Machine
  Vision companion's), `node(client, ns, path)` (a string node id such as `BeltSight/cam1/L1/CountIn`),
  `event_type(client, ns, name)` (a subtype of BaseEventType, e.g. `CrossingEventType`) and
  `vision_system(client, camera)` (the camera's VisionSystemType object);
- `Arrivals`: a subscription handler noting when each crossing first arrived, by a key taken from the
  event (its track) or the data change (a count: crossing n is count n);
- Modbus (pymodbus): `read_block(client, offset, unit, count)` (a block's holding registers, an error
  reply raised as ConnectionError), `block_counts(registers)` (CountIn, CountOut from the four words)
  and `poll_count_in(port, seen, stop, period_s)`, the benches' poller;
- `crossing_fields(n)`: the `crossed` entry (schema v1) the benches XADD to the objects stream;
- `bench_bridge(redis_port, state_dir, ...)`: the bridge in-process for a measurement, serving cam1's
  line L1 (gate g1) from the redis-server on `redis_port`, with the protocols asked for on free ports;
- `rss_mb()`: this process's resident memory, which the bridge benches report.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from asyncua import ua
from asyncua.client.client import Client
from asyncua.common.node import Node
from pymodbus.client import AsyncModbusTcpClient

from daemon.bridge.seam import Bridge, layout_from_data, words_u32
from daemon.config.seam import BridgeConfig, RedisConfig
from tools.kit.ports import free_port

NAMESPACE = "urn:beltsight"
MV_URI = "http://opcfoundation.org/UA/MachineVision"


def opcua_url(listen: str) -> str:
    """The bridge's endpoint at `listen` (host:port)."""
    return f"opc.tcp://{listen}/beltsight"


async def beltsight_ns(client: Client) -> int:
    return int(await client.get_namespace_index(NAMESPACE))


def node(client: Client, ns: int, path: str) -> Node:
    return client.get_node(ua.NodeId(ua.String(path), ua.Int16(ns)))


async def mv_ns(client: Client) -> int:
    return int(await client.get_namespace_index(MV_URI))


async def event_type(client: Client, ns: int, name: str) -> Node:
    return await client.nodes.base_event_type.get_child([f"{ns}:{name}"])


async def vision_system(client: Client, camera: str) -> Node:
    """The camera's Machine Vision object (VisionSystemType): Objects/BeltSight/MachineVision/<camera>."""
    ns = await beltsight_ns(client)
    return await client.nodes.objects.get_child([f"{ns}:BeltSight", f"{ns}:MachineVision", f"{ns}:{camera}"])


class Arrivals:
    """The first arrival (`clock()`) of each crossing, by `key_of(event)` or `key_of(value)`."""

    def __init__(
        self, key_of: Callable[[Any], Any] = lambda v: v, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.at: dict[int, float] = {}
        self._key_of, self._clock = key_of, clock

    def event_notification(self, event: Any) -> None:
        self.at.setdefault(int(self._key_of(event)), self._clock())

    def datachange_notification(self, node: Any, val: Any, data: Any) -> None:
        self.at.setdefault(int(self._key_of(val)), self._clock())


async def read_block(client: AsyncModbusTcpClient, offset: int, unit: int = 1, count: int = 4) -> list[int]:
    """`count` holding registers from `offset`; an error reply (busy, out of range) raises ConnectionError."""
    reply = await client.read_holding_registers(offset, count=count, device_id=unit)
    if reply.isError():
        raise ConnectionError(f"Modbus read of registers {offset}.. failed: {reply}")
    return list(reply.registers)


def block_counts(registers: Sequence[int]) -> tuple[int, int]:
    """(CountIn, CountOut) from a block's first four registers (two big-endian u32)."""
    return words_u32(registers[0], registers[1]), words_u32(registers[2], registers[3])


async def poll_count_in(port: int, seen: Callable[[int], object], stop: asyncio.Event, period_s: float) -> None:
    """Poll the first block's CountIn on 127.0.0.1:`port` (unit 1) every `period_s` until `stop` is set,
    calling `seen(n)` for each count n that has appeared. Not cancelled: pymodbus can swallow a
    cancellation that lands inside a request and go on polling (a CI hang once)."""
    client = AsyncModbusTcpClient("127.0.0.1", port=port)
    await client.connect()
    last = 0
    try:
        while not stop.is_set():
            try:
                count = block_counts(await read_block(client, 0))[0]
            except ConnectionError:  # busy until the snapshot is loaded
                count = last
            for n in range(last + 1, count + 1):
                seen(n)
            last = max(last, count)
            await asyncio.sleep(period_s)
    finally:
        client.close()


def crossing_fields(n: int, *, snapshot: bool = False) -> dict[str, str]:
    """Crossing `n` of cam1's line L1 (track n, count n, gate g1 due in 4 s), stamped now."""
    now_ms = int(time.time() * 1000)
    fields = {
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
    }
    return fields | ({"snapshot": f"cam1/{n}.jpg"} if snapshot else {})


def _listen(on: bool) -> str:
    return f"127.0.0.1:{free_port()}" if on else ""


def bench_bridge(redis_port: int, state_dir: Path, *, opcua: bool = True, modbus: bool = True, **more: Any) -> Bridge:
    """The bridge for cam1/L1 (not started), OPC UA with security none, `more` its other `[bridge]` keys
    (`sparkplug={"url": ...}`) or `machine_vision=True`; its Redis clients decode replies as the daemon's do."""
    mv = {"machine_vision": more.pop("machine_vision", False)}
    data = {"health_listen": "", "state_dir": str(state_dir), "modbus": {"listen": _listen(modbus)}, **more}
    data["opcua"] = {"listen": _listen(opcua), "security": "none", **mv}
    layout = layout_from_data([{"id": "cam1", "lines": [{"id": "L1", "gates": ["g1"]}]}])
    client = lambda: aioredis.Redis(port=redis_port, decode_responses=True)  # noqa: E731
    return Bridge(BridgeConfig.model_validate(data), layout, client, redis=RedisConfig())


def rss_mb() -> float:
    """This process's resident memory (VmRSS), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0
