"""Modbus TCP: the register map (`daemon.bridge.registers`) served read-only with pymodbus.

- One unit (`unit_id`); requests to another unit id get exception 0x0B (gateway target failed).
- Function codes 3 (holding registers) and 4 (input registers, the same map) are served; writes
  (6, 16, 23) are answered exception 0x01 and counted (`writes_refused`); any other function code
  (diagnostics among them) is not decoded at all and gets exception 0x01 as well.
- At most `max_connections` connections: one more evicts the connection idle the longest when it
  has been idle a second or more, else it is closed at once (`refused`). A connection that sends no
  request for `idle_timeout_s` is closed. A frame that overflows pymodbus's receive buffer (264 bytes,
  no PLC sends that) closes its connection (`malformed`); pymodbus answers or skips the rest.
- Until the served state is loaded (the reader's first Redis session reads the snapshot: milliseconds
  after a restart, or as long as Redis is unreachable), reads get exception 0x06 (Server Device Busy)
  and are counted (`busy`): the map would read 0 for every count, and a PLC would see its counts go
  backwards. The server listens anyway, so a PLC sees a bridge that is up but not ready (an exception
  it retries) rather than one that is down (a refused connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from pymodbus.constants import ExcCodes
from pymodbus.exceptions import NoSuchIdException
from pymodbus.pdu import DecodePDU
from pymodbus.server import ModbusTcpServer
from pymodbus.server.requesthandler import ServerRequestHandler
from pymodbus.simulator import DataType, SimData, SimDevice
from pymodbus.simulator.simcore import SimCore

from daemon.bridge.layout import MAX_REGISTER
from daemon.bridge.registers import RegisterMap
from daemon.config.bridge import ModbusConfig
from daemon.core.netaddr import parse_host_port
from daemon.core.ratelimit import RateLimited

log = structlog.get_logger("beltsight.bridge.modbus")

READ_CODES = (3, 4)
DECODED_CODES = (3, 4, 6, 16, 23)
"""Function codes the server decodes: the reads, and the writes it refuses with an answer."""
SHED_LOG_INTERVAL_S = 60.0
SWEEP_INTERVAL_S = 1.0


@dataclass(slots=True)
class ModbusStats:
    connections: int = 0
    requests: int = 0
    refused: int = 0
    evicted: int = 0
    idle_closed: int = 0
    writes_refused: int = 0
    malformed: int = 0
    busy: int = 0


class _Refused(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


class _Handler(ServerRequestHandler):
    """pymodbus's per-connection handler, remembering when the client last sent something."""

    def __init__(self, owner: _BoundedServer, *args: Any) -> None:
        super().__init__(owner, *args)  # type: ignore[no-untyped-call]
        self.owner = owner
        self.last_active = time.monotonic()

    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        if len(self.recv_buffer) + len(data) > self.max_buffer_size:
            self.owner.shed("malformed", self)
            return
        super().data_received(data)


class _OneUnit(SimCore):
    """SimCore answering only `unit`: another unit id raises NoSuchIdException (exception 0x0B)."""

    def __init__(self, device: SimDevice, unit: int) -> None:
        super().__init__(device)
        self._unit = unit

    async def async_getValues(self, device_id: int, func_code: int, address: int, count: int = 1) -> Any:  # noqa: N802
        if device_id != self._unit:
            raise NoSuchIdException(f"unit {device_id}")
        return await super().async_getValues(device_id, func_code, address, count)

    async def async_setValues(self, device_id: int, func_code: int, address: int, values: Any) -> Any:  # noqa: N802
        if device_id != self._unit:
            raise NoSuchIdException(f"unit {device_id}")
        return await super().async_setValues(device_id, func_code, address, values)


class _BoundedServer(ModbusTcpServer):
    def __init__(self, device: SimDevice, cfg: ModbusConfig, stats: ModbusStats, address: tuple[str, int]) -> None:
        super().__init__(device, address=address)
        self.cfg = cfg
        self.stats = stats
        self.context = _OneUnit(device, cfg.unit_id)
        self.decoder.pdu_table = {fc: DecodePDU.pdu_table[fc] for fc in DECODED_CODES}
        self._shed_log = RateLimited(SHED_LOG_INTERVAL_S)
        self._shed_counts: dict[str, int] = {}

    def callback_new_connection(self) -> _Handler:
        return _Handler(self, self.trace_packet, self.trace_pdu, self.trace_connect)

    def handle_new_connection(self) -> Any:
        if len(self.active_connections) >= self.cfg.max_connections:
            now = time.monotonic()
            handlers = [h for h in self.active_connections.values() if isinstance(h, _Handler)]
            idlest = min(handlers, key=lambda h: h.last_active, default=None)
            if idlest is None or now - idlest.last_active < 1.0:
                self.shed("refused", None)
                return _Refused()
            self.shed("evicted", idlest)
        handler = super().handle_new_connection()
        self.stats.connections = len(self.active_connections)
        return handler

    def shed(self, reason: str, handler: _Handler | None) -> None:
        setattr(self.stats, reason, getattr(self.stats, reason) + 1)
        if handler is not None:
            with contextlib.suppress(Exception):  # already closing
                handler.close()
        self.stats.connections = len(self.active_connections)
        self._shed_counts[reason] = self._shed_counts.get(reason, 0) + 1
        if self._shed_log.allow() is not None:  # the counts cover every connection shed since the last line
            log.warning("bridge_modbus_shed", open=len(self.active_connections), **self._shed_counts)
            self._shed_counts = {}

    def sweep(self) -> None:
        """Close connections idle past `idle_timeout_s`."""
        deadline = time.monotonic() - self.cfg.idle_timeout_s
        for handler in list(self.active_connections.values()):
            if isinstance(handler, _Handler) and handler.last_active < deadline:
                self.shed("idle_closed", handler)
        self.stats.connections = len(self.active_connections)


class ModbusBridgeServer:
    """The register map on Modbus TCP at `cfg.listen`."""

    def __init__(self, cfg: ModbusConfig, registers: RegisterMap) -> None:
        self.cfg = cfg
        self.registers = registers
        self.stats = ModbusStats()
        self._server: _BoundedServer | None = None
        self.port = 0

    async def _action(  # noqa: PLR0917 (pymodbus's action signature)
        self,
        function_code: int,
        start_address: int,
        address: int,
        count: int,
        current_registers: list[int],
        set_values: Sequence[int] | Sequence[bool] | None,
    ) -> ExcCodes | None:
        self.stats.requests += 1
        if set_values is not None or function_code not in READ_CODES:
            self.stats.writes_refused += 1
            return ExcCodes.ILLEGAL_FUNCTION
        if not self.registers.loaded:
            self.stats.busy += 1
            return ExcCodes.DEVICE_BUSY
        values = self.registers.read(address, count)
        if values is None:
            return ExcCodes.ILLEGAL_ADDRESS
        offset = address - start_address
        current_registers[offset : offset + count] = values
        return None

    async def start(self) -> None:
        assert self.cfg.listen is not None
        host, port = parse_host_port(self.cfg.listen)
        logging.getLogger("pymodbus").setLevel(logging.CRITICAL)  # refusals are counted and summarised here
        # every address from the base up: blocks added live (daemon.bridge.live) are served by the same
        # server; an address outside the map is refused by `_action` (ILLEGAL_ADDRESS), as pymodbus would
        size = max(1, MAX_REGISTER - self.registers.base)
        data = SimData(address=self.registers.base, count=size, values=0, datatype=DataType.REGISTERS)
        device = SimDevice(id=self.cfg.unit_id, simdata=[data], action=self._action)
        self._server = _BoundedServer(device, self.cfg, self.stats, (host, port))
        await self._server.serve_forever(background=True)
        transport = self._server.transport
        sockets = getattr(transport, "sockets", None) or ()
        self.port = int(sockets[0].getsockname()[1]) if sockets else port
        log.info("bridge_modbus_listening", address=f"{host}:{self.port}", unit_id=self.cfg.unit_id)

    async def run_sweeps(self) -> None:
        """Every `SWEEP_INTERVAL_S` while it serves: close the idle connections, count those gone (a
        long-lived task of its owner's: the bridge's `bridge-modbus-sweep`)."""
        while True:
            await asyncio.sleep(SWEEP_INTERVAL_S)
            if self._server is not None:
                self._server.sweep()

    async def close(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            await server.shutdown()  # type: ignore[no-untyped-call]
