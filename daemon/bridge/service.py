"""The bridge process: servers, reader, heartbeat, health endpoint, sd_notify, clean shutdown.

`run_bridge` is the entry point (the CLI calls it); `Bridge` is the same thing in pieces
(`start`, `reload`, `stop`) for tests and tools that want to look at its counters while it runs.
`reload` (SIGHUP through `run_bridge`'s `reloads`) reads the OPC UA users, the trusted client
certificates and the server certificate again; cameras and lines added to the config are served live
(daemon.bridge.live: at SIGHUP and after each camera entry of the events stream); any other change in
the config is logged as needing a restart, and not applied.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any

import structlog
from prometheus_client import CollectorRegistry

from daemon.bridge import reconcile_sparkplug
from daemon.bridge.blocks import stable_blocks
from daemon.bridge.layout import BridgeLayout, validate_layout
from daemon.bridge.live import LiveLayout
from daemon.bridge.machine_vision import MachineVision
from daemon.bridge.modbus import ModbusBridgeServer
from daemon.bridge.opcua import OpcUaBridgeServer
from daemon.bridge.reader import StreamReader
from daemon.bridge.reconcile_mv import MismatchCondition
from daemon.bridge.reconcile_opcua import ReconcileNodes
from daemon.bridge.reconcile_setup import add_routes, build_reconcile, reconcile_problems
from daemon.bridge.reference import Reference
from daemon.bridge.registers import RegisterMap
from daemon.bridge.sparkplug import SparkplugEdge
from daemon.bridge.state import BridgeState, Change, Crossing
from daemon.config.bridge import BridgeConfig
from daemon.config.redis import RedisConfig
from daemon.core.netaddr import parse_host_port
from daemon.core.redaction import SECRETS
from daemon.core.tasks import stop_task
from daemon.ops.http import HealthServer
from daemon.ops.systemd import SystemdNotifier
from daemon.publish.redis_conn import RedisClient

log = structlog.get_logger("beltsight.bridge")

HEARTBEAT_S = 1.0
RELOADABLE = ("users", "cert_file", "key_file")
"""The `[bridge.opcua]` keys a reload applies (with the files they name, and the trusted directory's contents)."""


class _Servers:
    """The reader's sink: pushes changes to the register map, the OPC UA server and the Sparkplug edge node."""

    def __init__(
        self,
        state: BridgeState,
        registers: RegisterMap,
        opcua: OpcUaBridgeServer | None,
        sparkplug: SparkplugEdge | None = None,
        resume_grace_s: float = 0.0,
        *,
        on_changes: Callable[[list[Change]], None] | None = None,
    ) -> None:
        """`resume_grace_s`: at the first `serve` of this process with no OPC UA event subscriber, the
        events (only: the registers, variables and Sparkplug are served at once) are held until one
        subscribes or this long since OPC UA listens (`OpcUaBridgeServer.await_event_subscriber`)."""
        self.state = state
        self.registers = registers
        self.opcua = opcua
        self.sparkplug = sparkplug
        self._grace_s = resume_grace_s if opcua is not None else 0.0
        self._held: list[Crossing] | None = None
        self._release: asyncio.Task[None] | None = None
        self.on_changes = on_changes

    async def serve(self, changes: list[Change]) -> None:
        if self.on_changes is not None:
            self.on_changes(changes)
        if self.sparkplug is not None:
            self.sparkplug.serve(changes)
        crossings: list[Crossing] = []
        for change in changes:
            if isinstance(change, Crossing):
                line = self.state.line(change.camera, change.line)
                self.registers.update_line(change.camera, change.line, line)
                if self.opcua is not None:
                    await self.opcua.publish_line(change.camera, change.line, line)
                    crossings.append(change)
            elif self.opcua is not None:
                await self.opcua.publish_status(change.camera, change.status)
        if self.opcua is None:
            return
        if self._grace_s > 0:
            grace, self._grace_s = self._grace_s, 0.0
            if not self.opcua.has_event_subscriber():
                self._held = []
                self._release = asyncio.create_task(self._fire_held(self.opcua, grace), name="bridge-grace")
        if self._held is not None:
            self._held.extend(crossings)
            return
        for crossing in crossings:
            await self.opcua.fire(crossing)

    async def _fire_held(self, opcua: OpcUaBridgeServer, grace_s: float) -> None:
        """The held events, in order, once a client subscribes or the grace has passed."""
        try:
            await opcua.await_event_subscriber(grace_s)
            held = self._held or []
            while held:  # `serve` appends to it until it is None
                await opcua.fire(held.pop(0))
        finally:
            self._held = None  # whatever happened, the next events fire as they come

    async def recall(self, crossings: list[Crossing]) -> None:
        if self.opcua is not None:
            await self.opcua.recall(crossings)

    async def close(self) -> None:
        if self._release is not None:
            await stop_task(self._release)

    async def serve_all(self, state: BridgeState) -> None:
        for cid, cam in state.cameras.items():
            for lid, line in cam.lines.items():
                self.registers.update_line(cid, lid, line)
        self.registers.loaded = True
        if self.opcua is not None:
            await self.opcua.publish_all(state)
        if self.sparkplug is not None:
            self.sparkplug.serve_all(state)


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


class Bridge:
    def __init__(
        self,
        config: BridgeConfig,
        layout: BridgeLayout,
        redis_client_factory: Callable[[], RedisClient],
        *,
        redis: RedisConfig,
        notifier: SystemdNotifier | None = None,
        references: dict[str, Reference] | None = None,
        layouts: Callable[[], BridgeLayout | None] | None = None,
    ) -> None:
        """`redis` names the streams read (`objects_stream`, `events_stream`); the factory connects.
        `references`: the plant counters' readers by reconcile key, instead of the network ones.
        `layouts`: the config's layout read again (None when it does not load), served live as it grows
        (daemon.bridge.live) after each camera entry of the events stream and each `reload`."""
        self.config = config
        self.layout = validate_layout(
            layout, base_register=config.modbus.base_register, block_size=config.modbus.block_size
        )
        self.notifier = notifier or SystemdNotifier()
        problems = reconcile_problems(config, layout)
        if problems:
            raise problems[0]
        self.state = BridgeState(layout)
        self.registry = CollectorRegistry()
        self.reconcile = build_reconcile(config, redis, redis_client_factory, self.registry, references)
        modbus = config.modbus
        blocks = (
            stable_blocks(layout, config.state_dir, base_register=modbus.base_register, block_size=modbus.block_size)
            if modbus.listen
            else None
        )
        self.registers = RegisterMap(
            layout, base_register=modbus.base_register, block_size=modbus.block_size, blocks=blocks
        )
        mv = MachineVision(layout, redis, redis_client_factory) if config.opcua.machine_vision else None
        self.opcua = (
            OpcUaBridgeServer(config.opcua, layout, config.state_dir, mv, config.event_history_s)
            if config.opcua.listen
            else None
        )
        self.modbus = ModbusBridgeServer(config.modbus, self.registers) if config.modbus.listen else None
        spb = config.sparkplug
        self.sparkplug = SparkplugEdge(spb, layout, self.state, config.state_dir) if spb.enabled else None
        on_changes = self.reconcile.on_changes if self.reconcile is not None else None
        if self.sparkplug is not None and self.reconcile is not None:
            reconcile_sparkplug.attach(self.sparkplug, self.reconcile)
        self.servers = _Servers(
            self.state, self.registers, self.opcua, self.sparkplug, config.resume_grace_s, on_changes=on_changes
        )
        self.reader = StreamReader(config, redis, self.state, self.servers, redis_client_factory)
        self.live = self._live(layouts) if layouts is not None else None
        self.health: HealthServer | None = None
        self.mismatch_condition: MismatchCondition | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.heartbeats = 0

    def _live(self, layouts: Callable[[], BridgeLayout | None]) -> LiveLayout:
        return LiveLayout(
            layouts,
            self.layout,
            self.config,
            state=self.state,
            registers=self.registers,
            reader=self.reader,
            opcua=self.opcua,
            sparkplug=self.sparkplug,
        )

    async def start(self) -> None:
        users = read_users(self.config)
        reconcile_nodes: ReconcileNodes | None = None
        if self.opcua is not None:
            await self.opcua.start(users)
            if self.reconcile is not None:
                reconcile_nodes = ReconcileNodes(self.opcua, self.reconcile)
                await reconcile_nodes.build()
                if self.opcua.machine_vision is not None and self.opcua.server is not None:
                    self.mismatch_condition = MismatchCondition(
                        self.opcua.server, self.opcua.machine_vision, self.reconcile
                    )
                    await self.mismatch_condition.attach()
        if self.modbus is not None:
            await self.modbus.start()
        if self.sparkplug is not None:
            self.sparkplug.start()
        if self.config.health_listen:
            host, port = parse_host_port(self.config.health_listen)
            self.health = HealthServer(host, port, self.registry, self.report)
            if self.reconcile is not None:
                add_routes(self.health, self.reconcile, self.config.evidence_url)
            await self.health.start()
        self._tasks = [
            asyncio.create_task(self.reader.run(), name="bridge-reader"),
            asyncio.create_task(self._heartbeat(), name="bridge-heartbeat"),
        ]
        if self.sparkplug is not None:
            self._tasks.append(asyncio.create_task(self.sparkplug.run(), name="bridge-sparkplug"))
        if self.reconcile is not None:
            self._tasks.append(asyncio.create_task(self.reconcile.run(), name="bridge-reconcile"))
        if self.live is not None:
            self._tasks.append(asyncio.create_task(self.live.run(), name="bridge-layout"))
        if reconcile_nodes is not None:
            self._tasks.append(asyncio.create_task(reconcile_nodes.run(), name="bridge-reconcile-opcua"))
        self.notifier.ready("serving")
        log.info(
            "bridge_started",
            cameras=len(self.layout.cameras),
            lines=len(self.layout.blocks()),
            opcua=self.config.opcua.listen or "off",
            modbus=self.config.modbus.listen or "off",
        )

    async def reload(self, config: BridgeConfig) -> None:
        """Apply `config`'s users and certificates (the trusted directory read again); log what changed
        (`bridge_reloaded`) or why nothing did (`bridge_reload_failed`: the old ones stay)."""
        try:
            users = read_users(config)
            changes = await self.opcua.reload(config.opcua, users) if self.opcua is not None else {}
        except (ValueError, OSError) as exc:
            log.error("bridge_reload_failed", error=str(exc)[:300])
            return
        old = self.config.opcua.model_dump(exclude=set(RELOADABLE))
        new = config.opcua.model_dump(exclude=set(RELOADABLE))
        restart = sorted(f"bridge.opcua.{k}" for k in old if old[k] != new[k])
        restart += sorted(
            f"bridge.{k}"
            for k in ("modbus", "sparkplug", "group", "consumer", "snapshot_key", "reconcile", "shifts")
            if getattr(self.config, k) != getattr(config, k)
        )
        if bool(users) != bool(self.config.opcua.users):
            restart.append("bridge.opcua.users (anonymous <-> users)")
        self.config = self.config.model_copy(
            update={"opcua": config.opcua.model_copy(update={k: getattr(self.config.opcua, k) for k in old})}
        )
        log.info("bridge_reloaded", restart_needed=restart, **changes)

    async def _heartbeat(self) -> None:
        while True:
            self.heartbeats += 1
            self.registers.set_heartbeat(self.heartbeats)
            if self.opcua is not None:
                await self.opcua.heartbeat(int(time.time() * 1000))
            self.notifier.watchdog()
            await asyncio.sleep(HEARTBEAT_S)

    def report(self) -> dict[str, Any]:
        stats = self.reader.stats
        modbus = self.modbus.stats if self.modbus is not None else None
        return {
            "ok": stats.connected,
            "redis_connected": stats.connected,
            "last_ids": dict(stats.last_ids),
            "pending": dict(stats.pending),
            "malformed": stats.malformed,
            "ignored": self.state.ignored,
            "served": stats.served,
            "reconnects": stats.reconnects,
            "replicas_short": stats.replicas_short,
            "clients": {
                "opcua": self.opcua.clients if self.opcua is not None else 0,
                "modbus": modbus.connections if modbus is not None else 0,
            },
            "refused": {
                "opcua": dict(self.opcua.refusals.counts) if self.opcua is not None else {},
                "modbus": {
                    k: getattr(modbus, k) for k in ("refused", "evicted", "idle_closed", "writes_refused", "malformed")
                }
                if modbus is not None
                else {},
            },
            "heartbeat": self.heartbeats,
            "sparkplug": asdict(self.sparkplug.stats) if self.sparkplug is not None else None,
            "reconcile": self.reconcile.report() if self.reconcile is not None else None,
        }

    async def stop(self) -> None:
        self.notifier.stopping()
        log.info("bridge_stopping", served=self.reader.stats.served)
        for task in self._tasks:
            await stop_task(task)
        for task in self._tasks:
            if not task.cancelled() and task.exception() is not None:
                log.error("bridge_task_failed", task=task.get_name(), error=repr(task.exception())[:300])
        self._tasks = []
        await self.servers.close()
        if self.mismatch_condition is not None:
            await self.mismatch_condition.close()
        if self.health is not None:
            await self.health.close()
        if self.modbus is not None:
            await self.modbus.close()
        if self.opcua is not None:
            await self.opcua.close()


async def run_bridge(
    config: BridgeConfig,
    layout: BridgeLayout,
    redis_client_factory: Callable[[], RedisClient],
    *,
    redis: RedisConfig,
    notifier: SystemdNotifier | None = None,
    stop_event: asyncio.Event,
    reloads: Callable[[], Awaitable[BridgeConfig | None]] | None = None,
    layouts: Callable[[], BridgeLayout | None] | None = None,
) -> None:
    """Serve until `stop_event` is set (or this task is cancelled, which propagates). `reloads`: awaited
    in a loop, each config it returns is applied with `Bridge.reload` (None: nothing to apply), and the
    layout read again (`layouts`, daemon.bridge.live)."""
    bridge = Bridge(config, layout, redis_client_factory, redis=redis, notifier=notifier, layouts=layouts)
    stop: asyncio.Task[bool] | None = None
    reloader: asyncio.Task[None] | None = None
    ended: list[str] = []
    try:
        await bridge.start()
        if reloads is not None:
            reloader = asyncio.create_task(_reload_loop(bridge, reloads), name="bridge-reload")
        stop = asyncio.create_task(stop_event.wait(), name="bridge-stop")
        done, _ = await asyncio.wait([stop, *bridge._tasks], return_when=asyncio.FIRST_COMPLETED)
        ended = [t.get_name() for t in done if t is not stop]
    finally:
        for task in (stop, reloader):
            if task is not None:
                await stop_task(task)
        await bridge.stop()
    if ended:
        raise RuntimeError(f"bridge task ended unexpectedly: {', '.join(ended)}")


async def _reload_loop(bridge: Bridge, reloads: Callable[[], Awaitable[BridgeConfig | None]]) -> None:
    while True:
        config = await reloads()
        if config is not None:
            await bridge.reload(config)
        if bridge.live is not None:
            bridge.live.wake()
