"""Modbus TCP behind the bridge's protocol seam (daemon.bridge.protocol): the register map
(daemon.bridge.registers, its blocks kept across starts by daemon.bridge.blocks) and its server
(daemon.bridge.modbus)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Self

from daemon.bridge.blocks import Blocks, extend, stable_blocks
from daemon.bridge.layout import BridgeLayout
from daemon.bridge.modbus import ModbusBridgeServer
from daemon.bridge.protocol import Added, Health, PlcProtocol, ProtocolContext
from daemon.bridge.registers import RegisterMap
from daemon.bridge.state import BridgeState, Change, Crossing

SHED = ("refused", "evicted", "idle_closed", "writes_refused", "malformed")
"""The `ModbusStats` counters under `refused.modbus` in `/healthz`."""


class ModbusProtocol(PlcProtocol):
    """`[bridge.modbus]` with a `listen` address."""

    name = "modbus"

    def __init__(self, ctx: ProtocolContext) -> None:
        self.cfg = ctx.config.modbus
        self.state_dir = ctx.config.state_dir
        self.state = ctx.state
        blocks = stable_blocks(
            ctx.layout, self.state_dir, base_register=self.cfg.base_register, block_size=self.cfg.block_size
        )
        self.registers = RegisterMap(
            ctx.layout, base_register=self.cfg.base_register, block_size=self.cfg.block_size, blocks=blocks
        )
        self.server = ModbusBridgeServer(self.cfg, self.registers)
        self._planned: Blocks = {}

    @classmethod
    def build(cls, ctx: ProtocolContext) -> Self | None:
        return cls(ctx) if ctx.config.modbus.listen else None

    async def start(self) -> None:
        await self.server.start()

    def tasks(self) -> dict[str, Callable[[], Coroutine[Any, Any, None]]]:
        return {"bridge-modbus-sweep": self.server.run_sweeps}

    async def serve_all(self, state: BridgeState) -> None:
        for cid, cam in state.cameras.items():
            for lid, line in cam.lines.items():
                self.registers.update_line(cid, lid, line)
        self.registers.loaded = True

    async def serve(self, changes: list[Change]) -> None:
        for change in changes:
            if isinstance(change, Crossing):
                self.registers.update_line(change.camera, change.line, self.state.line(change.camera, change.line))

    async def heartbeat(self, beat: int, unix_ms: int) -> None:
        self.registers.set_heartbeat(beat)

    def plan_growth(self, layout: BridgeLayout, added: Added) -> list[str]:
        """The new lines' blocks, after the highest ever given (`blocks.extend`, the file written)."""
        found = extend(
            layout,
            self.registers.blocks(),
            self.state_dir,
            base_register=self.cfg.base_register,
            block_size=self.cfg.block_size,
        )
        if isinstance(found, str):
            return [f"bridge.modbus: {found}"]
        self._planned = found
        return []

    async def grow(self, layout: BridgeLayout, added: Added) -> None:
        for cid, lines in added.items():
            for line in lines:
                self.registers.add(cid, line.id, self._planned[(cid, line.id)], line.gates[0] if line.gates else None)
                self.registers.update_line(cid, line.id, self.state.line(cid, line.id))

    @classmethod
    def health_off(cls) -> Health:
        return Health(clients=0, refused={})

    def health(self) -> Health:
        stats = self.server.stats
        return Health(clients=stats.connections, refused={k: getattr(stats, k) for k in SHED})

    async def close(self) -> None:
        await self.server.close()


__all__ = ["ModbusProtocol"]
