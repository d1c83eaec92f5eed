"""A camera added to (and removed from) the config of a running bridge is served live: its lines get new
OPC UA nodes (and its Machine Vision object) and new Modbus blocks while the PLC's OPC UA session and
Modbus connection stay open, and nothing of the camera already served moves (its node ids, its register
addresses) or stops counting. The real parts: redis-server, the bridge in-process with the loader
`beltsight bridge` starts with (`cli.load`, which applies the `cameras_dir` drop-ins), asyncua and
pymodbus clients."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import structlog
from asyncua import Client, ua
from pymodbus.client import AsyncModbusTcpClient

from daemon.bridge import cli
from daemon.bridge.blocks import FILE
from daemon.bridge.live import RETIRED
from daemon.bridge.registers import words_u32
from daemon.bridge.service import Bridge
from daemon.core.netaddr import parse_host_port
from tests.support.bridge_harness import (
    Events,
    crossing,
    factory,
    modbus_server,
    opcua_server,
    read,
    register_map,
    subscribe,
    wait_for,
)
from tests.support.fixtures_redis import RedisServerFactory, free_port

HEAD = """
[redis]
url = "redis://127.0.0.1:{redis_port}/0"

[models]
640 = "m640.onnx"

[engine]
providers = ["cpu"]

[bridge]
health_listen = ""
state_dir = "{state_dir}"
reconnect_max_s = 0.5
resume_grace_s = 0
[bridge.opcua]
listen = "127.0.0.1:{opcua_port}"
security = "none"
machine_vision = {machine_vision}
[bridge.modbus]
listen = "127.0.0.1:{modbus_port}"
unit_id = 1
"""


def camera(cid: str, *lines: str) -> str:
    text = f'\n[[cameras]]\nid = "{cid}"\nurl = "rtsp://127.0.0.1:1/{cid}"\n'
    for line in lines:
        text += f'[[cameras.lines]]\nid = "{line}"\nstart = [0.5, 0.0]\nend = [0.5, 1.0]\n'
    return text


async def count_in(mb: AsyncModbusTcpClient, address: int) -> int:
    regs = (await mb.read_holding_registers(address, count=2, device_id=1)).registers
    return words_u32(regs[0], regs[1])


def test_a_camera_added_and_removed_live_moves_nothing_served(redis_server: RedisServerFactory, tmp_path: Path) -> None:
    server = redis_server()
    r = server.client()
    path = tmp_path / "beltsight.toml"
    head = HEAD.format(
        redis_port=server.port,
        state_dir=tmp_path / "state",
        opcua_port=free_port(),
        modbus_port=free_port(),
        machine_vision="true",
    )
    path.write_text(head + camera("cam1", "L1"))
    settings, layout = cli.load(path)
    modbus_host, modbus_port = parse_host_port(settings.bridge.modbus.listen or "")

    async def scenario() -> None:
        bridge = Bridge(
            settings.bridge, layout, factory(server), redis=settings.redis, layouts=lambda: cli.load(path)[1]
        )
        await bridge.start()
        try:
            handler = Events()
            mb = AsyncModbusTcpClient(modbus_host, port=modbus_port)
            async with Client(f"opc.tcp://{settings.bridge.opcua.listen}/beltsight") as client:
                assert await mb.connect()
                await subscribe(client, handler, "BeltSight/cam1/L1/CountIn")
                for n in (1, 2, 3):
                    r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", n, track=n))
                await wait_for(lambda: ("BeltSight/cam1/L1/CountIn", 3) in handler.changes)
                assert await count_in(mb, 0) == 3
                # cam2 already writes (before the bridge knows it): its stream is read from its start
                r.xadd("beltsight:objects:cam2", crossing("cam2", "A", 1, track=21))
                r.xadd("beltsight:objects:cam2", crossing("cam2", "B", 1, track=22))

                path.write_text(head + camera("cam2", "A", "B") + camera("cam1", "L1"))  # before cam1 in the file
                r.xadd("beltsight:events", {"kind": "camera_added", "camera": "cam2", "detail": "", "at_ms": "1"})
                await wait_for(lambda: bridge.live is not None and bridge.live.applied == 1)
                r.xadd("beltsight:objects:cam2", crossing("cam2", "A", 2, track=23))
                r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", 4, track=4))
                await wait_for(lambda: ("BeltSight/cam1/L1/CountIn", 4) in handler.changes)
                await wait_for(lambda: bridge.state.line("cam2", "A").count_in == 2)
                # the existing camera: same node ids, same registers, still counting, same connections
                assert await read(client, "BeltSight/cam1/L1/CountIn") == 4
                assert await count_in(mb, 0) == 4
                assert register_map(bridge).offset("cam1", "L1") == 0
                # the new camera: new nodes, new blocks after cam1's (not in the file's order)
                assert await read(client, "BeltSight/cam2/A/CountIn") == 2
                assert await read(client, "BeltSight/cam2/B/CountIn") == 1
                mv = await read(client, "BeltSight/MachineVision/cam2.SystemState")  # its Machine Vision object
                assert mv.StateDescription == "unknown"
                assert (register_map(bridge).offset("cam2", "A"), register_map(bridge).offset("cam2", "B")) == (16, 32)
                assert (await count_in(mb, 16), await count_in(mb, 32)) == (2, 1)
                kept = json.loads((tmp_path / "state" / FILE).read_text())["blocks"]
                assert kept == {"cam1/L1": 0, "cam2/A": 1, "cam2/B": 2}

                # cam2 removed: its nodes and registers stay, frozen; a camera added after takes new blocks
                path.write_text(head + camera("cam1", "L1") + camera("cam3", "X"))
                r.xadd("beltsight:events", {"kind": "camera_removed", "camera": "cam2", "detail": "", "at_ms": "2"})
                await wait_for(lambda: bridge.live is not None and bridge.live.applied == 2)
                r.xadd("beltsight:objects:cam3", crossing("cam3", "X", 7, track=31))
                r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", 5, track=5))
                await wait_for(lambda: ("BeltSight/cam1/L1/CountIn", 5) in handler.changes)
                await wait_for(lambda: bridge.state.line("cam3", "X").count_in == 7)
                assert await read(client, "BeltSight/cam2/State") == RETIRED
                assert await read(client, "BeltSight/cam2/A/CountIn") == 2
                assert await read(client, "BeltSight/cam3/X/CountIn") == 7
                assert register_map(bridge).offset("cam3", "X") == 48
                assert (await count_in(mb, 0), await count_in(mb, 16), await count_in(mb, 48)) == (5, 2, 7)

                assert mb.connected and opcua_server(bridge).clients == 1
                assert modbus_server(bridge).stats.connections == 1
                mb.close()
        finally:
            await bridge.stop()

    asyncio.run(scenario())


def test_sighup_serves_a_camera_added_to_the_file_and_refuses_changed_gates_whole(
    redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    """`beltsight bridge`'s own path (`cli._serve`, its signal handlers, a real SIGHUP): a camera added to the
    file is served; a change that also alters a served line's gates is logged and nothing of it applied."""
    server = redis_server()
    r = server.client()
    path = tmp_path / "beltsight.toml"
    head = HEAD.format(
        redis_port=server.port,
        state_dir=tmp_path / "state",
        opcua_port=free_port(),
        modbus_port=free_port(),
        machine_vision="false",
    )
    path.write_text(head + camera("cam1", "L1"))
    gated = camera("cam1", "L1").replace("url =", "mm_per_px = 0.5\nurl =")
    gated += '[[cameras.lines.gates]]\nid = "g1"\ndistance_mm = 300\n'

    async def scenario(logs: list[MutableMapping[str, Any]]) -> None:
        settings, layout = cli.load(path)
        serving = asyncio.create_task(cli._serve(path, settings, layout))
        try:
            await listening(settings.bridge.opcua.listen or "")
            async with Client(f"opc.tcp://{settings.bridge.opcua.listen}/beltsight") as client:
                r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", 1, track=1))
                await until(lambda: read(client, "BeltSight/cam1/L1/CountIn"), 1)
                path.write_text(head + camera("cam1", "L1") + camera("cam2", "A"))
                os.kill(os.getpid(), signal.SIGHUP)
                r.xadd("beltsight:objects:cam2", crossing("cam2", "A", 5, track=2))
                await until(lambda: read(client, "BeltSight/cam2/A/CountIn"), 5)

                path.write_text(head + gated + camera("cam2", "A") + camera("cam3", "Z"))
                os.kill(os.getpid(), signal.SIGHUP)
                await wait_for(lambda: any(e["event"] == "bridge_layout_restart_needed" for e in logs))
                r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", 2, track=3))
                await until(lambda: read(client, "BeltSight/cam1/L1/CountIn"), 2)
                ns = await client.get_namespace_index("urn:beltsight")
                assert [
                    n.nodeid.Identifier for n in await client.get_node(ua.NodeId("BeltSight", ns)).get_children()
                ] == [
                    "BeltSight/Heartbeat",
                    "BeltSight/cam1",
                    "BeltSight/cam2",
                ]  # cam3 not served: the change was refused whole
        finally:
            os.kill(os.getpid(), signal.SIGTERM)
            await serving
        applied = [e for e in logs if e["event"] == "bridge_layout_applied"]
        assert [e["added"] for e in applied] == [["cam2/A"]]

    with structlog.testing.capture_logs() as logs:
        asyncio.run(scenario(logs))


async def until(value: Callable[[], Awaitable[Any]], expected: Any) -> None:
    """Until `value()` (an OPC UA read) returns `expected`; a generous deadline, never a timing claim."""
    for _ in range(3000):
        if await value() == expected:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"never read {expected!r}")


async def listening(address: str) -> None:
    """Until `address` accepts a TCP connection (the bridge started); a generous deadline."""
    host, port = parse_host_port(address)
    for _ in range(3000):
        try:
            _reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            await asyncio.sleep(0.02)
            continue
        writer.close()
        await writer.wait_closed()
        return
    raise AssertionError(f"{address} never listened")
