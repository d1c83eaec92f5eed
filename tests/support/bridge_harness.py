"""Helpers for the bridge's integration tests: configs on free ports, entries as the daemon writes them."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from asyncua import Client

from daemon.bridge.layout import layout_from_data
from daemon.bridge.modbus import ModbusBridgeServer
from daemon.bridge.opcua import OpcUaBridgeServer
from daemon.bridge.protocol_modbus import ModbusProtocol
from daemon.bridge.protocol_opcua import OpcUaProtocol
from daemon.bridge.protocol_sparkplug import SparkplugProtocol
from daemon.bridge.registers import RegisterMap
from daemon.bridge.service import Bridge
from daemon.bridge.sparkplug import SparkplugEdge
from daemon.config.bridge import BridgeConfig
from daemon.config.redis import RedisConfig
from tests.support.fixtures_redis import RedisServer, find_redis_server, free_port
from tests.support.loop_thread import LoopThread
from tools.kit.plc_clients import beltsight_ns, event_type, node

LAYOUT = layout_from_data(
    [
        {"id": "cam1", "lines": [{"id": "L1", "gates": ["g1", "g2"]}, {"id": "L2"}]},
        {"id": "cam2", "lines": [{"id": "L1"}]},
    ]
)


def make_config(state_dir: Path, **opcua: Any) -> BridgeConfig:
    return BridgeConfig.model_validate(
        {
            "health_listen": f"127.0.0.1:{free_port()}",
            "state_dir": str(state_dir),
            "reconnect_max_s": 0.5,
            "resume_grace_s": 0,  # serve at once: tests/integration/bridge/test_bridge_restart_gaps.py tests the grace
            "opcua": {"listen": f"127.0.0.1:{free_port()}", "security": "none", **opcua},
            "modbus": {"listen": f"127.0.0.1:{free_port()}", "unit_id": 1},
        }
    )


def opcua_server(bridge: Bridge) -> OpcUaBridgeServer:
    """The bridge's OPC UA server (AssertionError when OPC UA is off in its config)."""
    protocol = bridge.protocol(OpcUaProtocol)
    assert protocol is not None, "OPC UA is off"
    return protocol.server


def modbus_server(bridge: Bridge) -> ModbusBridgeServer:
    """The bridge's Modbus server (AssertionError when Modbus is off in its config)."""
    protocol = bridge.protocol(ModbusProtocol)
    assert protocol is not None, "Modbus is off"
    return protocol.server


def register_map(bridge: Bridge) -> RegisterMap:
    return modbus_server(bridge).registers


def sparkplug_edge(bridge: Bridge) -> SparkplugEdge:
    """The bridge's Sparkplug edge node (AssertionError when Sparkplug is off in its config)."""
    protocol = bridge.protocol(SparkplugProtocol)
    assert protocol is not None, "Sparkplug is off"
    return protocol.edge


def factory(server: RedisServer) -> Callable[[], aioredis.Redis]:
    def make() -> aioredis.Redis:
        return aioredis.Redis(
            host="127.0.0.1", port=server.port, decode_responses=True, socket_timeout=2, socket_connect_timeout=1
        )

    return make


def crossing(camera: str, line: str, count: int, direction: str = "in", track: int = 1, **extra: str) -> dict[str, str]:
    fields = {
        "v": "1",
        "camera": camera,
        "track": str(track),
        "label": "box",
        "cls": "2",
        "score": "0.91",
        "event": "crossed",
        "at_ms": str(int(time.time() * 1000)),
        "line": line,
        "direction": direction,
        "count": str(count),
        "speed_px_s": "40.0",
    }
    return fields | extra


class Events:
    """asyncua subscription handler collecting crossing events and data changes."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.changes: list[tuple[str, Any]] = []

    def event_notification(self, event: Any) -> None:
        self.events.append(event)

    def datachange_notification(self, node: Any, val: Any, data: Any) -> None:
        self.changes.append((node.nodeid.Identifier, val))


async def subscribe(client: Client, handler: Events, *paths: str) -> Any:
    ns = await beltsight_ns(client)
    sub = await client.create_subscription(10, handler)
    etype = await event_type(client, ns, "CrossingEventType")
    await sub.subscribe_events(node(client, ns, "BeltSight"), etype, queuesize=1000)
    if paths:
        await sub.subscribe_data_change([node(client, ns, p) for p in paths], queuesize=100)
    return sub


async def read(client: Client, path: str) -> Any:
    return await node(client, await beltsight_ns(client), path).read_value()


async def wait_for(check: Callable[[], bool], within_s: float = 60.0) -> None:
    """Until `check()` holds; a generous deadline (a loaded 2-core machine), never a timing claim."""
    deadline = time.monotonic() + within_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.02)


async def start_bridge(config: BridgeConfig, server: RedisServer) -> Bridge:
    bridge = Bridge(config, LAYOUT, factory(server), redis=RedisConfig())
    await bridge.start()
    await wait_for(lambda: bridge.reader.stats.connected)
    return bridge


@contextmanager
def bridge_on_a_thread(config: BridgeConfig) -> Iterator[tuple[RedisServer, Bridge, asyncio.AbstractEventLoop]]:
    """A redis-server (the test skips without one) and a bridge reading it, started on an event loop of a
    thread of its own (for module fixtures called blocking, e.g. from Hypothesis); all stopped on exit."""
    binary = find_redis_server()
    if binary is None:
        pytest.skip("redis-server not installed (Debian: apt-get install redis-server)")
    server = RedisServer(binary, None).start()
    try:
        with LoopThread(name="bridge") as runner:
            bridge = runner.run(start_bridge(config, server))
            try:
                yield server, bridge, runner.loop
            finally:
                runner.run(bridge.stop())
    finally:
        server.stop()


def eta_json(**gates: int) -> str:
    return json.dumps(gates, separators=(",", ":"))
