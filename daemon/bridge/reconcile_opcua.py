"""The reconciliation on OPC UA: each reconciled line's state, drift and last shift's totals.

Under the line's object (`Objects/BeltSight/<camera>/<line>`, node ids `BeltSight/<camera>/<line>/<name>`),
for the reconciled direction `Dir` (`In` or `Out`):

| variable | type | value |
|---|---|---|
| `Count<Dir>State` | String | `unknown`, `agrees`, `count_mismatch` or `reference_down` |
| `Count<Dir>Drift` | Int64 | camera minus plant counter over the last judged window (parts) |
| `Count<Dir>ReferenceRaw` | UInt64 | the plant counter's last raw reading |
| `Count<Dir>LastShiftVision`, `...LastShiftReference` | UInt64 | the last complete shift's totals |
| `Count<Dir>LastShiftStartMs` | Int64 | that shift's start (Unix ms; 0: none yet) |

Written every `REFRESH_S` (a PLC subscribes to data changes; unchanged values send nothing).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from asyncua import ua

from daemon.bridge.opcua import OpcUaBridgeServer
from daemon.bridge.reconcile_service import ReconcileService
from daemon.config.reconcile import ReconcileConfig

REFRESH_S = 1.0
_VARIABLES: tuple[tuple[str, ua.VariantType, Any], ...] = (
    ("State", ua.VariantType.String, "unknown"),
    ("Drift", ua.VariantType.Int64, 0),
    ("ReferenceRaw", ua.VariantType.UInt64, 0),
    ("LastShiftVision", ua.VariantType.UInt64, 0),
    ("LastShiftReference", ua.VariantType.UInt64, 0),
    ("LastShiftStartMs", ua.VariantType.Int64, 0),
)


def _name(cfg: ReconcileConfig, variable: str) -> str:
    return f"Count{cfg.direction.capitalize()}{variable}"


class ReconcileNodes:
    def __init__(self, opcua: OpcUaBridgeServer, service: ReconcileService) -> None:
        self.opcua = opcua
        self.service = service

    async def build(self) -> None:
        """Add the variables (after the OPC UA server started)."""
        server = self.opcua.server
        assert server is not None
        for cfg in self.service.entries:
            parent = server.get_node(self.opcua.node_id(cfg.camera, cfg.line))
            for variable, vtype, value in _VARIABLES:
                name = _name(cfg, variable)
                await parent.add_variable(
                    self.opcua.node_id(cfg.camera, cfg.line, name),
                    ua.QualifiedName(name, self.opcua.ns),
                    ua.Variant(value, vtype),
                )

    async def _write(self, cfg: ReconcileConfig, variable: str, value: Any, vtype: ua.VariantType) -> None:
        server = self.opcua.server
        assert server is not None
        nodeid = self.opcua.node_id(cfg.camera, cfg.line, _name(cfg, variable))
        await server.write_attribute_value(nodeid, ua.DataValue(ua.Variant(value, vtype)))

    async def run(self) -> None:
        """Keep the variables current until cancelled."""
        store = self.service.store
        while True:
            now = int(time.time() * 1000)
            for cfg in self.service.entries:
                rec = self.service.reconcilers[cfg.key]
                await self._write(cfg, "State", rec.state, ua.VariantType.String)
                await self._write(cfg, "Drift", rec.last.drift if rec.last else 0, ua.VariantType.Int64)
                await self._write(cfg, "ReferenceRaw", rec.counter.raw or 0, ua.VariantType.UInt64)
                last = await asyncio.to_thread(store.last_shift, cfg.key, now)
                if last is not None:
                    await self._write(cfg, "LastShiftVision", last["vision"], ua.VariantType.UInt64)
                    await self._write(cfg, "LastShiftReference", last["reference"], ua.VariantType.UInt64)
                    await self._write(cfg, "LastShiftStartMs", last["start_ms"], ua.VariantType.Int64)
            await asyncio.sleep(REFRESH_S)


__all__ = ["ReconcileNodes"]
