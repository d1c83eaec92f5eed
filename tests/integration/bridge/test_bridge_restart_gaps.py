"""The two gaps a restarted bridge had (issue #43, found by the soak's PLC): Modbus served zeros before the
snapshot was loaded, and the backlog's OPC UA events fired before any PLC could subscribe again.

Real redis-server, the real bridge (`Bridge`), real asyncua and pymodbus clients."""

from __future__ import annotations

import asyncio
from pathlib import Path

import redis
from asyncua import Client, ua
from asyncua.ua.status_codes import StatusCodes
from pymodbus.client import AsyncModbusTcpClient

from daemon.bridge.registers import words_u32
from daemon.bridge.service import Bridge
from daemon.config.bridge import BridgeConfig
from daemon.config.redis import RedisConfig
from daemon.core.netaddr import parse_host_port
from tests.support.bridge_harness import (
    LAYOUT,
    Events,
    crossing,
    factory,
    make_config,
    modbus_server,
    start_bridge,
    subscribe,
    wait_for,
)
from tests.support.fixtures_redis import RedisServer, RedisServerFactory

STREAM = "beltsight:objects:cam1"


def _config(tmp_path: Path, grace_s: float) -> BridgeConfig:
    return make_config(tmp_path).model_copy(update={"resume_grace_s": grace_s})


async def _served_then_stopped(config: BridgeConfig, server: RedisServer, r: redis.Redis, tracks: range) -> None:
    """A first bridge serves `tracks` (cam1/L1 crossings 1..n) and stops: the snapshot holds them."""
    bridge = await start_bridge(config.model_copy(update={"resume_grace_s": 0.0}), server)
    try:
        for n, track in enumerate(tracks, 1):
            r.xadd(STREAM, crossing("cam1", "L1", n, track=track))
        await wait_for(lambda: bridge.reader.stats.served == len(tracks))
        await wait_for(lambda: r.xpending(STREAM, config.group)["pending"] == 0)
    finally:
        await bridge.stop()


def test_modbus_busy_and_opcua_waiting_until_the_snapshot_is_loaded(
    redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    server = redis_server(appendonly=True)
    config = _config(tmp_path, 0.0)
    r = server.client()

    async def scenario() -> None:
        await _served_then_stopped(config, server, r, range(1, 4))
        server.stop()  # a clean shutdown: the snapshot is on disk
        bridge = Bridge(config, LAYOUT, factory(server), redis=RedisConfig())
        await bridge.start()  # listens with Redis down: the snapshot cannot be loaded
        host, port = parse_host_port(config.modbus.listen or "")
        mb = AsyncModbusTcpClient(host, port=port)
        try:
            await mb.connect()
            for _ in range(3):
                reply = await mb.read_holding_registers(0, count=16, device_id=1)
                assert reply.isError() and reply.exception_code == 0x06  # busy, never a 0 count
                reply = await mb.read_input_registers(0, count=2, device_id=1)
                assert reply.isError() and reply.exception_code == 0x06
                await asyncio.sleep(0.1)
            async with Client(f"opc.tcp://{config.opcua.listen}/beltsight") as client:
                ns = await client.get_namespace_index("urn:beltsight")
                for path in ("BeltSight/cam1/L1/CountIn", "BeltSight/cam1/State"):
                    value = await client.get_node(ua.NodeId(path, ns)).read_data_value(raise_on_bad_status=False)
                    assert value.StatusCode is not None
                    assert value.StatusCode.value == StatusCodes.BadWaitingForInitialData
                heartbeat = await client.get_node(ua.NodeId("BeltSight/Heartbeat", ns)).read_data_value()
                assert heartbeat.StatusCode is not None and heartbeat.StatusCode.is_good()
                assert modbus_server(bridge).stats.busy >= 6

                await asyncio.to_thread(server.restart)
                await wait_for(lambda: bridge.reader.stats.connected)
                regs = (await mb.read_holding_registers(0, count=16, device_id=1)).registers
                assert words_u32(regs[0], regs[1]) == 3 and words_u32(regs[4], regs[5]) == 3
                count_in = await client.get_node(ua.NodeId("BeltSight/cam1/L1/CountIn", ns)).read_data_value()
                assert count_in.StatusCode is not None and count_in.StatusCode.is_good()
                assert count_in.Value is not None and count_in.Value.Value == 3
        finally:
            mb.close()
            await bridge.stop()

    asyncio.run(scenario())


def _restart_with_backlog(
    redis_server: RedisServerFactory, tmp_path: Path, grace_s: float, *, wait_served: bool
) -> list[int]:
    """Serve 1..2, stop, write 3 crossings (the backlog), start again with `grace_s`, subscribe (after the
    backlog is served when `wait_served`), then a fence crossing; the tracks of the events received."""
    server = redis_server()
    config = _config(tmp_path, grace_s)
    r = server.client()

    async def scenario() -> list[int]:
        await _served_then_stopped(config, server, r, range(1, 3))
        for n, track in enumerate(range(11, 14), 3):
            r.xadd(STREAM, crossing("cam1", "L1", n, track=track))
        bridge = await start_bridge(config, server)
        try:
            if wait_served:
                await wait_for(lambda: bridge.reader.stats.served == 3)
            handler = Events()
            async with Client(f"opc.tcp://{config.opcua.listen}/beltsight") as client:
                await subscribe(client, handler)
                r.xadd(STREAM, crossing("cam1", "L1", 6, track=99))
                await wait_for(lambda: any(e.Track == 99 for e in handler.events))
                return [e.Track for e in handler.events]
        finally:
            await bridge.stop()

    return asyncio.run(scenario())


def test_a_client_subscribing_within_the_grace_gets_the_backlog_once(
    redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    # a long grace: the client subscribes well within it however loaded the machine
    assert _restart_with_backlog(redis_server, tmp_path, 120.0, wait_served=False) == [11, 12, 13, 99]


def test_without_grace_the_backlog_is_served_at_once(redis_server: RedisServerFactory, tmp_path: Path) -> None:
    # resume_grace_s = 0: the backlog is served (its events fired to no one) before the client subscribes
    assert _restart_with_backlog(redis_server, tmp_path, 0.0, wait_served=True) == [99]
