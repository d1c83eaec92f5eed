"""PLC-side clients that connect and then never read: the bridge keeps serving everyone else.

Silent raw TCP connections on the OPC UA port (one that never says Hello, one that stops after
Hello), an OPC UA client whose subscription is never polled, and idle Modbus connections: a
second, well-behaved OPC UA client still gets every crossing event, and Modbus still answers.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from pathlib import Path

from asyncua import Client
from pymodbus.client import AsyncModbusTcpClient

from daemon.core.netaddr import parse_host_port
from tests.support.bridge_harness import Events, crossing, make_config, read, start_bridge, subscribe, wait_for
from tests.support.fixtures_redis import RedisServerFactory


def hello(url: str) -> bytes:
    """An OPC UA TCP Hello message (the client's first message), for a client that then goes quiet."""
    body = struct.pack("<IIIII", 0, 65536, 65536, 0, 0) + struct.pack("<i", len(url)) + url.encode()
    return b"HELF" + struct.pack("<I", 8 + len(body)) + body


def test_clients_that_connect_and_never_read_do_not_hold_up_the_others(
    redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    server = redis_server()
    config = make_config(tmp_path)
    r = server.client()
    url = f"opc.tcp://{config.opcua.listen}/beltsight"
    opcua_addr = parse_host_port(config.opcua.listen or "")
    modbus_addr = parse_host_port(config.modbus.listen or "")

    async def scenario() -> None:
        bridge = await start_bridge(config, server)
        silent: list[socket.socket] = []
        try:
            for _ in range(4):
                silent.append(socket.create_connection(opcua_addr, timeout=5))  # never says Hello
            after_hello = socket.create_connection(opcua_addr, timeout=5)
            after_hello.sendall(hello(url))  # then reads nothing, ever
            silent.append(after_hello)
            silent += [socket.create_connection(modbus_addr, timeout=5) for _ in range(4)]
            stalled = Client(url)
            await stalled.connect()  # a session whose subscription nobody polls
            await subscribe(stalled, Events())
            good = Events()
            async with Client(url) as client:
                await subscribe(client, good)
                for n in range(1, 21):
                    r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", n, track=n))
                await wait_for(lambda: len(good.events) == 20)
                assert [e.Track for e in good.events] == list(range(1, 21))
                assert await read(client, "BeltSight/cam1/L1/CountIn") == 20
            modbus = AsyncModbusTcpClient(modbus_addr[0], port=modbus_addr[1])
            await modbus.connect()
            try:
                regs = await modbus.read_holding_registers(0, count=4, device_id=config.modbus.unit_id)
                assert not regs.isError() and regs.registers[:2] == [0, 20]
            finally:
                modbus.close()
            await stalled.disconnect()
        finally:
            for sock in silent:
                sock.close()
            await bridge.stop()

    asyncio.run(scenario())
