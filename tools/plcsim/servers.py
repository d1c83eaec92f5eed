"""The simulated PLC on the network: its counter (`PlcCounter`) served over Modbus TCP and OPC UA.

The scene's clock starts at `PlcSim.start()` (time.monotonic()); `counter.value(t)` is read at each
request, so a client sees the counter as a real PLC's. While `counter.is_down(t)`, or after `hang()`,
a Modbus request is never answered (a PLC gone from the network: the client times out); `stop()`
closes the servers (connection refused).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from asyncua import ua
from asyncua.server.server import Server
from pymodbus.constants import ExcCodes
from pymodbus.server import ModbusTcpServer
from pymodbus.simulator import DataType, SimData, SimDevice

from tools.plcsim.counter import PlcCounter

OPCUA_NS = "urn:plcsim"
OPCUA_UPDATE_S = 0.02
_VARIANTS = {16: ua.VariantType.UInt16, 32: ua.VariantType.UInt32, 64: ua.VariantType.UInt64}


@dataclass(slots=True)
class PlcSim:
    counter: PlcCounter
    unit: int = 1
    register: int = 0
    words: int = 1
    word_order: str = "high_first"
    t0: float = field(default_factory=time.monotonic)
    hung: bool = False
    requests: int = 0

    def start(self) -> None:
        """Scene time 0 is now."""
        self.t0 = time.monotonic()

    def now_s(self) -> float:
        """Seconds of scene time; 0 until `t0` (a sim made with `t0=math.inf` holds its counter at its
        start value until the scene's clock is set)."""
        return max(0.0, time.monotonic() - self.t0)

    def down(self) -> bool:
        return self.hung or self.counter.is_down(self.now_s())

    def words_now(self) -> list[int]:
        value = self.counter.value(self.now_s())
        if self.words == 1:
            return [value & 0xFFFF]
        high, low = (value >> 16) & 0xFFFF, value & 0xFFFF
        return [high, low] if self.word_order == "high_first" else [low, high]


class ModbusPlc:
    """The counter at `register` (holding and input tables alike) of unit `unit`."""

    def __init__(self, sim: PlcSim, host: str = "127.0.0.1", port: int = 0) -> None:
        self.sim = sim
        self.host = host
        self.port = port
        self._server: ModbusTcpServer | None = None

    async def _action(
        self,
        function_code: int,
        start_address: int,
        address: int,
        count: int,
        current_registers: list[int],
        set_values: Sequence[int] | Sequence[bool] | None,
    ) -> ExcCodes | None:
        self.sim.requests += 1
        if set_values is not None:
            return ExcCodes.ILLEGAL_FUNCTION
        while self.sim.down():  # noqa: ASYNC110 (scene time decides: no answer at all while the PLC is gone)
            await asyncio.sleep(0.05)
        regs = self.sim.words_now()
        for i in range(count):
            reg = address + i - self.sim.register
            current_registers[address - start_address + i] = regs[reg] if 0 <= reg < len(regs) else 0
        return None

    async def start(self) -> int:
        logging.getLogger("pymodbus").setLevel(logging.CRITICAL)
        data = SimData(address=0, count=max(16, self.sim.register + 2), values=0, datatype=DataType.REGISTERS)
        device = SimDevice(id=self.sim.unit, simdata=[data], action=self._action)
        self._server = ModbusTcpServer(device, address=(self.host, self.port))
        await self._server.serve_forever(background=True)
        sockets = getattr(self._server.transport, "sockets", None) or ()
        self.port = int(sockets[0].getsockname()[1]) if sockets else self.port
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            await server.shutdown()  # type: ignore[no-untyped-call]


class OpcUaPlc:
    """The counter as `ns=<urn:plcsim>;s=Counter` (UInt16/32/64 after the counter's bits), no security."""

    def __init__(self, sim: PlcSim, host: str = "127.0.0.1", port: int = 0) -> None:
        self.sim = sim
        self.host = host
        self.port = port
        self.ns = 0
        self._server: Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"opc.tcp://{self.host}:{self.port}/plcsim"

    @property
    def node(self) -> str:
        return f"ns={self.ns};s=Counter"

    async def start(self) -> int:
        logging.getLogger("asyncua").setLevel(logging.ERROR)
        if self.port == 0:
            with socket.socket() as s:
                s.bind((self.host, 0))
                self.port = s.getsockname()[1]
        server = Server()
        await server.init()
        server.set_endpoint(self.url)
        server.set_security_policy([ua.SecurityPolicyType.NoSecurity])
        self.ns = await server.register_namespace(OPCUA_NS)
        vtype = _VARIANTS[self.sim.counter.bits]
        var = await server.nodes.objects.add_variable(
            ua.NodeId(ua.String("Counter"), ua.Int16(self.ns)),
            ua.QualifiedName("Counter", self.ns),
            ua.Variant(self.sim.counter.value(self.sim.now_s()), vtype),  # a restarted PLC holds its count
        )
        await server.start()
        self._server = server
        self._task = asyncio.create_task(self._update(server, var, vtype), name="plcsim-opcua")
        return self.port

    async def _update(self, server: Server, var: object, vtype: ua.VariantType) -> None:
        while True:
            await server.write_attribute_value(
                var.nodeid,  # type: ignore[attr-defined]
                ua.DataValue(ua.Variant(self.sim.counter.value(self.sim.now_s()), vtype)),
            )
            await asyncio.sleep(OPCUA_UPDATE_S)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._server is not None:
            server, self._server = self._server, None
            await server.stop()


__all__ = ["ModbusPlc", "OpcUaPlc", "PlcSim"]
