"""Modbus faults: a flood of connections, idle and malformed clients; the map stays served."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pymodbus.client import AsyncModbusTcpClient

from daemon.bridge.modbus import ModbusBridgeServer
from daemon.bridge.registers import RegisterMap
from daemon.bridge.state import LineState
from daemon.config.bridge import ModbusConfig
from daemon.core.netaddr import parse_host_port
from tests.support.bridge_harness import LAYOUT, wait_for


def shed(server: ModbusBridgeServer) -> int:
    """Connections the server closed or never took: every one of a flood past its slots is one."""
    st = server.stats
    return st.refused + st.evicted + st.idle_closed + st.malformed


def test_flood_idle_and_malformed_clients_do_not_block_a_plc(tmp_path: Path) -> None:
    cfg = ModbusConfig(listen="127.0.0.1:0", max_connections=8, idle_timeout_s=1.0)  # the server's pick
    regs = RegisterMap(LAYOUT)
    regs.update_line("cam1", "L1", LineState(count_in=42))
    regs.loaded = True  # the state the bridge serves once its snapshot is loaded
    server = ModbusBridgeServer(cfg, regs)

    async def scenario() -> None:
        await server.start()
        try:
            async with asyncio.TaskGroup() as group:
                sweeps = group.create_task(server.run_sweeps())  # the bridge runs it in its task group
                await clients(server, cfg)
                sweeps.cancel()
        finally:
            await server.close()

    asyncio.run(scenario())


async def clients(server: ModbusBridgeServer, cfg: ModbusConfig) -> None:
    """A flood, idle and malformed clients, then a PLC: served all along."""
    host, port = parse_host_port(cfg.listen or "")[0], server.port
    idle = [await asyncio.open_connection(host, port) for _ in range(40)]  # never read or write
    _garbage_r, garbage_w = await asyncio.open_connection(host, port)
    garbage_w.write(b"\x00\x01\x00\x00\xff\xff\x01\x03" + b"\xaa" * 600)  # overlong frame
    await garbage_w.drain()
    # all 41 reached the server: past its 8 slots each was refused, or shed an older one
    await wait_for(lambda: shed(server) >= 41 - cfg.max_connections)
    # the idle ones become evictable: the server itself closed one for idling (idle_timeout_s
    # is the second after which an idle connection may also be evicted)
    await wait_for(lambda: server.stats.idle_closed >= 1)
    plc = AsyncModbusTcpClient(host, port=port, timeout=30)  # a deadline for a loaded machine
    assert await plc.connect()
    reply = await plc.read_holding_registers(0, count=2, device_id=1)
    assert reply.registers == [0, 42]
    plc.close()
    assert server.stats.connections <= cfg.max_connections
    writers = [w for _, w in idle] + [garbage_w]
    for w in writers:
        w.close()
    # the server saw every one go (its sweep, once a second, counts what is still open)
    await wait_for(lambda: server.stats.connections == 0)
    reader, writer = await asyncio.open_connection(host, port)  # still accepting, raw MBAP
    writer.write(b"\x00\x02\x00\x00\x00\x06\x01\x03\x00\x00\x00\x02")
    answer = await asyncio.wait_for(reader.read(64), 30)
    assert answer[7] == 3 and answer[-2:] == b"\x00\x2a"
    writer.close()
