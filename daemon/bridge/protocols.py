"""The PLC protocols the bridge serves: the one table (`PROTOCOLS`, name -> class) it iterates.

Each class implements `daemon.bridge.protocol.PlcProtocol`; its `build` is the factory (the protocol
from `[bridge.<name>]`, or None when it is off there). The table's order is the order of every call:
Sparkplug is served first (its DDATA go out without waiting on the servers' writes), the Modbus
registers are updated before OPC UA writes its variables and fires the crossings' events; the reader
acknowledges a batch only after every protocol served it. Adding a protocol is one module and one line
here (docs/development/extending.md).
"""

from __future__ import annotations

from typing import Any

from daemon.bridge.protocol import PlcProtocol, ProtocolContext
from daemon.bridge.protocol_modbus import ModbusProtocol
from daemon.bridge.protocol_opcua import OpcUaProtocol
from daemon.bridge.protocol_sparkplug import SparkplugProtocol
from daemon.config.bridge import BridgeConfig

PROTOCOLS: dict[str, type[PlcProtocol]] = {
    SparkplugProtocol.name: SparkplugProtocol,
    ModbusProtocol.name: ModbusProtocol,
    OpcUaProtocol.name: OpcUaProtocol,
}


def build_protocols(ctx: ProtocolContext) -> list[PlcProtocol]:
    """The protocols `ctx.config` turns on, in the table's order."""
    return [p for kind in PROTOCOLS.values() if (p := kind.build(ctx)) is not None]


def health_report(running: list[PlcProtocol]) -> dict[str, Any]:
    """The protocols' part of `/healthz`: `clients` and `refused` by protocol name, and each one's own
    section under its name; every protocol of the table is there, a running one's `health`, else its
    `health_off` (the keys monitoring reads stay when a protocol is off)."""
    health = {kind.name: kind.health_off() for kind in PROTOCOLS.values()}
    health |= {p.name: p.health() for p in running}
    kinds = [*PROTOCOLS.values(), *(type(p) for p in running)]
    reports_stats = {kind.name for kind in kinds if kind.reports_stats}
    out: dict[str, Any] = {
        "clients": {name: h.clients for name, h in health.items() if h.clients is not None},
        "refused": {name: h.refused for name, h in health.items() if h.refused is not None},
    }
    return out | {name: h.stats for name, h in health.items() if h.stats is not None or name in reports_stats}


def config_problems(config: BridgeConfig) -> list[str]:
    """Every protocol's `check_config`, whether it is on in `config` or not."""
    return [problem for kind in PROTOCOLS.values() for problem in kind.check_config(config)]


def reloaded(old: BridgeConfig, new: BridgeConfig) -> tuple[BridgeConfig, list[str]]:
    """`old` with what a reload applies of `new` (each protocol's part), and the protocols' keys whose
    change needs a restart."""
    restart: list[str] = []
    for kind in PROTOCOLS.values():
        old, keys = kind.reloaded(old, new)
        restart += keys
    return old, restart


__all__ = ["PROTOCOLS", "build_protocols", "config_problems", "health_report", "reloaded"]
