"""OPC UA behind the bridge's protocol seam (daemon.bridge.protocol): the server (daemon.bridge.opcua), its
Machine Vision objects, the reconciled lines' nodes and condition, and the resume grace.

A crossing's variables are written before its event fires. At the first `serve` of this process with
no OPC UA event subscriber, the events (only: the variables are written at once) are held until one
subscribes or `[bridge] resume_grace_s` has passed since OPC UA listens
(`OpcUaBridgeServer.await_event_subscriber`), then fired in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Self

import structlog

from daemon.bridge.layout import BridgeLayout
from daemon.bridge.machine_vision import MachineVision
from daemon.bridge.opcua import OpcUaBridgeServer
from daemon.bridge.protocol import Added, Health, PlcProtocol, ProtocolContext
from daemon.bridge.reconcile_mv import MismatchCondition
from daemon.bridge.reconcile_opcua import ReconcileNodes
from daemon.bridge.reconcile_service import ReconcileService
from daemon.bridge.state import BridgeState, Change, Crossing
from daemon.config.bridge import BridgeConfig
from daemon.core.redaction import SECRETS

log = structlog.get_logger("beltsight.bridge")

RELOADABLE = ("users", "cert_file", "key_file")
"""The `[bridge.opcua]` keys a reload applies (with the files they name, and the trusted directory's contents)."""


def read_users(config: BridgeConfig) -> dict[str, str]:
    """The OPC UA users' passwords (files read now); each is scrubbed from every log line from now
    on. ValueError naming the key path when a file cannot be read or a password is empty."""
    users: dict[str, str] = {}
    for name, user in config.opcua.users.items():
        try:
            secret = user.secret()
        except ValueError as exc:
            raise ValueError(f"bridge.opcua.users.{name}.password_file: {exc}") from None
        if not secret:
            raise ValueError(f"bridge.opcua.users.{name}: the password is empty")
        SECRETS.add(secret)
        users[name] = secret
    return users


class OpcUaProtocol(PlcProtocol):
    """`[bridge.opcua]` with a `listen` address."""

    name = "opcua"

    def __init__(self, ctx: ProtocolContext) -> None:
        config = ctx.config
        mv = MachineVision(ctx.layout, ctx.redis, ctx.redis_client_factory) if config.opcua.machine_vision else None
        self.server = OpcUaBridgeServer(config.opcua, ctx.layout, config.state_dir, mv, config.event_history_s)
        self.config = config
        self.state = ctx.state
        self.reconcile: ReconcileService | None = ctx.reconcile
        self.reconcile_nodes: ReconcileNodes | None = None
        self.mismatch_condition: MismatchCondition | None = None
        self._grace_s = config.resume_grace_s
        self._first = True
        self._held: list[Crossing] | None = None
        """The events held back at start (`bridge-grace`), in order; None: they fire as they come."""
        self._holding = asyncio.Event()

    @classmethod
    def build(cls, ctx: ProtocolContext) -> Self | None:
        return cls(ctx) if ctx.config.opcua.listen else None

    @classmethod
    def check_config(cls, config: BridgeConfig) -> list[str]:
        try:
            read_users(config)
        except ValueError as exc:
            return [str(exc)]
        return []

    @classmethod
    def reloaded(cls, old: BridgeConfig, new: BridgeConfig) -> tuple[BridgeConfig, list[str]]:
        before = old.opcua.model_dump(exclude=set(RELOADABLE))
        after = new.opcua.model_dump(exclude=set(RELOADABLE))
        restart = [f"bridge.opcua.{k}" for k in before if before[k] != after[k]]
        if bool(new.opcua.users) != bool(old.opcua.users):
            restart.append("bridge.opcua.users (anonymous <-> users)")
        kept = {k: getattr(old.opcua, k) for k in before}
        return old.model_copy(update={"opcua": new.opcua.model_copy(update=kept)}), restart

    async def start(self) -> None:
        await self.server.start(read_users(self.config))
        if self.reconcile is None:
            return
        self.reconcile_nodes = ReconcileNodes(self.server, self.reconcile)
        await self.reconcile_nodes.build()
        if self.server.machine_vision is not None and self.server.server is not None:
            self.mismatch_condition = MismatchCondition(self.server.server, self.server.machine_vision, self.reconcile)
            await self.mismatch_condition.attach()

    def tasks(self) -> dict[str, Callable[[], Coroutine[Any, Any, None]]]:
        tasks: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {}
        if self._grace_s > 0:
            tasks["bridge-grace"] = self._release_held
        if self.reconcile_nodes is not None:
            tasks["bridge-reconcile-opcua"] = self.reconcile_nodes.run
        if self.mismatch_condition is not None:
            tasks["bridge-mv-conditions"] = self.mismatch_condition.run
        return tasks

    async def serve_all(self, state: BridgeState) -> None:
        await self.server.publish_all(state)

    async def serve(self, changes: list[Change]) -> None:
        crossings: list[Crossing] = []
        for change in changes:
            if isinstance(change, Crossing):
                await self.server.publish_line(change.camera, change.line, self.state.line(change.camera, change.line))
                crossings.append(change)
            else:
                await self.server.publish_status(change.camera, change.status)
        if self._first:  # the first batch: held back while no client has subscribed yet (`bridge-grace`)
            self._first = False
            if self._grace_s > 0 and not self.server.has_event_subscriber():
                self._held = []
                self._holding.set()
        if self._held is not None:
            self._held.extend(crossings)
            return
        for crossing in crossings:
            await self.server.fire(crossing)

    async def _release_held(self) -> None:
        """`bridge-grace`: the events held since the first batch, fired in order once a client
        subscribes or the grace has passed; then it has nothing more to do until the stop (a
        long-lived task that returns would end the bridge)."""
        await self._holding.wait()
        try:
            await self.server.await_event_subscriber(self._grace_s)
            held = self._held or []
            while held:  # `serve` appends to it until it is None
                await self._fire_held(held.pop(0))
        finally:
            self._held = None  # whatever happened, the next events fire as they come
        await asyncio.Event().wait()

    async def _fire_held(self, crossing: Crossing) -> None:
        """One held crossing's event; one that fails to fire is logged and skipped (the others still fire)."""
        try:
            await self.server.fire(crossing)
        except Exception as exc:  # asyncua's trigger: this event lost, never the end of the bridge
            log.error(
                "bridge_held_event_failed",
                camera=crossing.camera,
                line=crossing.line,
                error=f"{type(exc).__name__}: {exc}"[:300],
            )

    async def recall(self, crossings: list[Crossing]) -> None:
        await self.server.recall(crossings)

    async def heartbeat(self, beat: int, unix_ms: int) -> None:
        await self.server.heartbeat(unix_ms)

    async def grow(self, layout: BridgeLayout, added: Added) -> None:
        await self.server.grow(layout, added)
        for cid, lines in added.items():
            for line in lines:
                await self.server.publish_line(cid, line.id, self.state.line(cid, line.id))

    async def show_status(self, camera: str, status: str) -> None:
        await self.server.publish_status(camera, status)

    async def reload(self, config: BridgeConfig) -> dict[str, Any]:
        return await self.server.reload(config.opcua, read_users(config))

    @classmethod
    def health_off(cls) -> Health:
        return Health(clients=0, refused={})

    def health(self) -> Health:
        return Health(clients=self.server.clients, refused=dict(self.server.refusals.counts))

    async def close(self) -> None:
        await self.server.close()


__all__ = ["RELOADABLE", "OpcUaProtocol", "read_users"]
