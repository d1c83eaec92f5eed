"""MQTT Sparkplug B behind the bridge's protocol seam (daemon.bridge.protocol): the edge node
(daemon.bridge.sparkplug), with the reconciled lines' metrics (daemon.bridge.reconcile_sparkplug)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import asdict
from typing import Any, Self

from daemon.bridge import reconcile_sparkplug
from daemon.bridge.layout import BridgeLayout
from daemon.bridge.protocol import Added, Health, PlcProtocol, ProtocolContext
from daemon.bridge.sparkplug import SparkplugEdge
from daemon.bridge.sparkplug_mqtt import read_password
from daemon.bridge.state import BridgeState, Change
from daemon.config.bridge import BridgeConfig


class SparkplugProtocol(PlcProtocol):
    """`[bridge.sparkplug]` with `enabled`."""

    name = "sparkplug"
    reports_stats = True  # "sparkplug": null while it is off

    def __init__(self, ctx: ProtocolContext) -> None:
        self.edge = SparkplugEdge(ctx.config.sparkplug, ctx.layout, ctx.state, ctx.config.state_dir)
        if ctx.reconcile is not None:
            reconcile_sparkplug.attach(self.edge, ctx.reconcile)

    @classmethod
    def build(cls, ctx: ProtocolContext) -> Self | None:
        return cls(ctx) if ctx.config.sparkplug.enabled else None

    @classmethod
    def check_config(cls, config: BridgeConfig) -> list[str]:
        try:
            read_password(config.sparkplug)
        except ValueError as exc:
            return [str(exc)]
        return []

    async def start(self) -> None:
        self.edge.start()

    def tasks(self) -> dict[str, Callable[[], Coroutine[Any, Any, None]]]:
        return {"bridge-sparkplug": self.edge.run}

    async def serve_all(self, state: BridgeState) -> None:
        self.edge.serve_all(state)

    async def serve(self, changes: list[Change]) -> None:
        self.edge.serve(changes)

    async def grow(self, layout: BridgeLayout, added: Added) -> None:
        self.edge.grow(layout, {c: tuple(line.id for line in lines) for c, lines in added.items()})

    def health(self) -> Health:
        return Health(stats=asdict(self.edge.stats))


__all__ = ["SparkplugProtocol"]
