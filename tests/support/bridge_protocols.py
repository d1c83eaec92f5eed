"""`Idle`: a test-only PLC protocol that serves nothing; the lifecycle tests' protocols (a task that
raises, a close that stalls, a batch held in flight) derive from it and override the one step they test."""

from __future__ import annotations

from typing import Self

from daemon.bridge.layout import BridgeLayout
from daemon.bridge.protocol import Added, PlcProtocol, ProtocolContext
from daemon.bridge.state import BridgeState, Change


class Idle(PlcProtocol):
    """Built from any context, starts, serves and grows doing nothing."""

    name = "idle"

    @classmethod
    def build(cls, ctx: ProtocolContext) -> Self | None:
        return cls()

    async def start(self) -> None:
        pass

    async def serve_all(self, state: BridgeState) -> None:
        pass

    async def serve(self, changes: list[Change]) -> None:
        pass

    async def grow(self, layout: BridgeLayout, added: Added) -> None:
        pass
