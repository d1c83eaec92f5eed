"""The bridge against a real redis-server, a real asyncua client and a real pymodbus client."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from pathlib import Path

from asyncua import Client
from pymodbus.client import AsyncModbusTcpClient

from daemon.bridge.registers import words_u32
from daemon.core.netaddr import parse_host_port
from tests.support.bridge_harness import (
    Events,
    crossing,
    eta_json,
    make_config,
    read,
    start_bridge,
    subscribe,
    wait_for,
)
from tests.support.fixtures_redis import RedisServerFactory

FENCE = 5000
"""The track of a last crossing sent after the others: once it arrived, everything before it has."""


def test_crossings_reach_opcua_events_variables_and_modbus(redis_server: RedisServerFactory, tmp_path: Path) -> None:
    server = redis_server()
    config = make_config(tmp_path)
    r = server.client()

    async def scenario() -> None:
        started_ms = time.time() * 1000
        bridge = await start_bridge(config, server)
        try:
            handler = Events()
            async with Client(f"opc.tcp://{config.opcua.listen}/beltsight") as client:
                await subscribe(client, handler, "BeltSight/cam1/L1/CountIn")
                assert await read(client, "BeltSight/cam1/State") == "unknown"
                r.xadd("beltsight:events", {"kind": "camera_up", "camera": "cam1", "detail": "", "at_ms": "1"})
                eta = eta_json(g1=1_700_000_001_250, g2=1_700_000_002_000)
                for n in range(1, 31):
                    r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", n, track=100 + n, eta=eta))
                r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", 4, "out", track=999))
                # a fence on another line: the stream is read in order, so a crossing sent twice
                # would reach the client before it, however slow the machine
                r.xadd("beltsight:objects:cam1", crossing("cam1", "L2", 1, track=FENCE))
                await wait_for(lambda: any(e.Track == FENCE for e in handler.events))
                assert [e.Track for e in handler.events] == [*range(101, 131), 999, FENCE]  # each crossing once
                last = handler.events[30]
                assert (last.Camera, last.Line, last.Direction, last.Label, last.Eta) == (
                    "cam1",
                    "L1",
                    "out",
                    "box",
                    "",
                )
                assert json.loads(handler.events[0].Eta) == {"g1": 1_700_000_001_250, "g2": 1_700_000_002_000}
                assert await read(client, "BeltSight/cam1/L1/CountIn") == 30
                assert await read(client, "BeltSight/cam1/L1/CountOut") == 4
                assert await read(client, "BeltSight/cam1/L1/LastTrack") == 999
                assert await read(client, "BeltSight/cam1/L1/g1EtaMs") == 0  # the last crossing had no ETA
                assert await read(client, "BeltSight/cam1/State") == "up"
                assert handler.changes[-1] == ("BeltSight/cam1/L1/CountIn", 30)
                # the bridge's own clock, read after it started: a time of this run, not a stale one
                assert started_ms <= await read(client, "BeltSight/Heartbeat") <= time.time() * 1000

            host, port = parse_host_port(config.modbus.listen or "")
            mb = AsyncModbusTcpClient(host, port=port)
            await mb.connect()
            regs = (await mb.read_holding_registers(0, count=16, device_id=1)).registers
            assert words_u32(regs[0], regs[1]) == 30 and words_u32(regs[2], regs[3]) == 4
            assert words_u32(regs[4], regs[5]) == 999 and regs[6] == 2
            assert regs[10:13] == [0, 0, 0]
            await heartbeat_advances(mb, regs[13])
            assert (await mb.write_register(0, 1, device_id=1)).isError()
            assert (await mb.read_holding_registers(48, count=1, device_id=1)).isError()  # past the 3 blocks
            mb.close()

            r.xadd("beltsight:objects:cam2", crossing("cam2", "L1", 1) | {"count": "many"})
            r.xadd("beltsight:objects:cam2", {"v": "1", "camera": "cam2"})
            await wait_for(lambda: bridge.reader.stats.malformed == 2)
            await wait_for(lambda: r.xpending("beltsight:objects:cam2", config.group)["pending"] == 0)
            report = json.loads(await asyncio.to_thread(_get, f"http://{config.health_listen}/healthz"))
            assert report["redis_connected"] and report["malformed"] == 2
            assert report["last_ids"]["beltsight:objects:cam2"]
        finally:
            await bridge.stop()

    asyncio.run(scenario())


async def heartbeat_advances(mb: AsyncModbusTcpClient, before: int, within_s: float = 60.0) -> None:
    """Until the heartbeat register (13, an input register too) reads other than `before`: it
    counts the bridge's seconds, so it moves on however loaded the machine; a generous deadline."""
    deadline = time.monotonic() + within_s
    while (await mb.read_input_registers(13, count=1, device_id=1)).registers[0] == before:
        assert time.monotonic() < deadline, f"the heartbeat register stayed at {before}"
        await asyncio.sleep(0.1)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return str(resp.read().decode())
