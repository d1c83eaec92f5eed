"""The plant's counter, read as a client: Modbus TCP (pymodbus) or OPC UA (asyncua).

`open_reference(cfg, ...)` picks the reader for a `[[bridge.reconcile]]` entry. `read()` returns the
counter's raw value (0 .. 2**bits - 1) or raises `ReferenceReadError` (unreachable, timeout, an exception
reply, a value that is not a counter); the next `read()` connects again. Readers never write.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any, Protocol

from asyncua.client.client import Client
from asyncua.crypto.security_policies import SecurityPolicyBasic256Sha256
from asyncua.ua.uaerrors import UaError
from pymodbus.client import AsyncModbusTcpClient
from pymodbus.exceptions import ModbusException

from daemon.config.reconcile import ReconcileConfig
from daemon.core.netaddr import parse_host_port
from daemon.core.redaction import SECRETS


class ReferenceReadError(Exception):
    """The counter could not be read; the message says why (no credentials in it)."""


class Reference(Protocol):
    async def read(self) -> int: ...

    async def close(self) -> None: ...


class ModbusReference:
    """A 16-bit counter in one register or a 32-bit one in two (`word_order`), holding or input table."""

    def __init__(self, cfg: ReconcileConfig) -> None:
        assert cfg.modbus is not None
        host, port = parse_host_port(cfg.modbus)
        self.cfg = cfg
        self._client = AsyncModbusTcpClient(host, port=port, timeout=cfg.timeout_s, retries=0, reconnect_delay=0)

    async def read(self) -> int:
        cfg = self.cfg
        try:
            if not self._client.connected and not await self._client.connect():
                raise ReferenceReadError(f"cannot connect to {cfg.modbus}")
            call = self._client.read_holding_registers if cfg.table == "holding" else self._client.read_input_registers
            reply = await asyncio.wait_for(
                call(cfg.register_address, count=cfg.words, device_id=cfg.unit), cfg.timeout_s + 0.5
            )
        except (ModbusException, OSError, TimeoutError) as exc:
            self._client.close()
            raise ReferenceReadError(f"{type(exc).__name__}: {str(exc)[:200]}") from None
        if reply.isError():
            raise ReferenceReadError(f"exception reply {getattr(reply, 'exception_code', '?')}")
        regs = list(reply.registers)
        if len(regs) != cfg.words:
            raise ReferenceReadError(f"{len(regs)} registers in the reply, {cfg.words} asked")
        if cfg.words == 1:
            return int(regs[0])
        high, low = (regs[0], regs[1]) if cfg.word_order == "high_first" else (regs[1], regs[0])
        return (int(high) << 16) | int(low)

    async def close(self) -> None:
        self._client.close()


class OpcUaReference:
    """An unsigned integer variable (`node`), read each poll; the session is kept open between reads."""

    def __init__(self, cfg: ReconcileConfig, certificate: tuple[Path, Path] | None = None) -> None:
        """`certificate`: the bridge's (certificate, private key) for `opcua_security = "basic256sha256"`."""
        assert cfg.opcua is not None and cfg.node is not None
        self.cfg = cfg
        self._certificate = certificate
        self._client: Client | None = None
        self._node: Any = None

    async def _connect(self) -> Any:
        cfg = self.cfg
        assert cfg.opcua is not None and cfg.node is not None
        client = Client(cfg.opcua, timeout=cfg.timeout_s)
        if cfg.opcua_user:
            client.set_user(cfg.opcua_user)
            password = cfg.password()
            if password is not None:
                SECRETS.add(password)  # scrubbed from every log line from now on
                client.set_password(password)
        if cfg.opcua_security == "basic256sha256":
            if self._certificate is None:
                raise ReferenceReadError("opcua_security = basic256sha256 needs the bridge's certificate")
            cert, key = self._certificate
            await client.set_security(SecurityPolicyBasic256Sha256, str(cert), str(key))
        await asyncio.wait_for(client.connect(), cfg.timeout_s + 0.5)
        self._client = client
        return client.get_node(cfg.node)

    async def read(self) -> int:
        try:
            if self._node is None:
                self._node = await self._connect()
            value = await asyncio.wait_for(self._node.read_value(), self.cfg.timeout_s + 0.5)
        except ReferenceReadError:
            await self.close()
            raise
        except (UaError, OSError, TimeoutError, ValueError, ConnectionError) as exc:
            await self.close()
            raise ReferenceReadError(f"{type(exc).__name__}: {str(exc)[:200]}") from None
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << self.cfg.bits:
            raise ReferenceReadError(f"{self.cfg.node} holds {type(value).__name__}, not a {self.cfg.bits}-bit counter")
        return value

    async def close(self) -> None:
        client, self._client, self._node = self._client, None, None
        if client is not None:
            with contextlib.suppress(UaError, OSError, TimeoutError, ConnectionError):  # gone either way
                await asyncio.wait_for(client.disconnect(), self.cfg.timeout_s)


def open_reference(cfg: ReconcileConfig, certificate: tuple[Path, Path] | None = None) -> Reference:
    """The reader for `cfg` (no I/O until the first `read`)."""
    return ModbusReference(cfg) if cfg.modbus is not None else OpcUaReference(cfg, certificate)


__all__ = ["ModbusReference", "OpcUaReference", "Reference", "ReferenceReadError", "open_reference"]
