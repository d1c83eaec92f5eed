"""The bridge process: protocols, reader, heartbeat, health endpoint, sd_notify, clean shutdown.

`run_bridge` is the entry point (the CLI calls it); `Bridge` is the same thing in pieces
(`start`, `reload`, `stop`) for tests and tools that want to look at its counters while it runs.
The PLC protocols are the ones the table `daemon.bridge.protocols.PROTOCOLS` builds from the config,
driven through `daemon.bridge.protocol.PlcProtocol` only (`Bridge.protocol` finds one by class).
`reload` (SIGHUP through `run_bridge`'s `reloads`) applies what each protocol reloads (OPC UA: the
users, the trusted client certificates and the server certificate); cameras and lines added to the
config are served live (daemon.bridge.live: at SIGHUP and after each camera entry of the events
stream); any other change in the config is logged as needing a restart, and not applied.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import structlog
from prometheus_client import CollectorRegistry

from daemon.bridge.layout import BridgeLayout, validate_layout
from daemon.bridge.live import LiveLayout
from daemon.bridge.protocol import PlcProtocol, ProtocolContext
from daemon.bridge.protocols import build_protocols, reloaded
from daemon.bridge.reader import StreamReader
from daemon.bridge.reconcile_setup import add_routes, build_reconcile, reconcile_problems
from daemon.bridge.reference import Reference
from daemon.bridge.state import BridgeState, Change, Crossing
from daemon.config.bridge import BridgeConfig
from daemon.config.redis import RedisConfig
from daemon.core.netaddr import parse_host_port
from daemon.core.tasks import stop_task
from daemon.ops.http import HealthServer
from daemon.ops.systemd import SystemdNotifier
from daemon.publish.redis_conn import RedisClient

log = structlog.get_logger("beltsight.bridge")

HEARTBEAT_S = 1.0
RESTART_KEYS = ("group", "consumer", "snapshot_key", "reconcile", "shifts")
"""The bridge's own keys whose change a reload leaves to a restart (the protocols say theirs)."""
P = TypeVar("P", bound=PlcProtocol)


class _Sink:
    """The reader's sink: the reconciliation first, then every protocol in the table's order
    (daemon.bridge.protocols); the reader acknowledges once all of them served the batch."""

    def __init__(
        self, protocols: Sequence[PlcProtocol], on_changes: Callable[[list[Change]], None] | None = None
    ) -> None:
        self.protocols = tuple(protocols)
        self.on_changes = on_changes

    async def serve(self, changes: list[Change]) -> None:
        if self.on_changes is not None:
            self.on_changes(changes)
        for protocol in self.protocols:
            await protocol.serve(changes)

    async def serve_all(self, state: BridgeState) -> None:
        for protocol in self.protocols:
            await protocol.serve_all(state)

    async def recall(self, crossings: list[Crossing]) -> None:
        for protocol in self.protocols:
            await protocol.recall(crossings)


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
        ctx = ProtocolContext(config, self.layout, self.state, redis, redis_client_factory, self.reconcile)
        self.protocols = build_protocols(ctx)
        """The protocols the config turns on, in the table's order (daemon.bridge.protocols)."""
        on_changes = self.reconcile.on_changes if self.reconcile is not None else None
        self.sink = _Sink(self.protocols, on_changes)
        self.reader = StreamReader(config, redis, self.state, self.sink, redis_client_factory)
        self.live = (
            LiveLayout(layouts, self.layout, state=self.state, reader=self.reader, protocols=self.protocols)
            if layouts is not None
            else None
        )
        self.health: HealthServer | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.heartbeats = 0

    def protocol(self, kind: type[P]) -> P | None:
        """The running protocol of that class (None: off in this config)."""
        return next((p for p in self.protocols if isinstance(p, kind)), None)

    async def start(self) -> None:
        for protocol in self.protocols:
            await protocol.start()
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
        for protocol in self.protocols:
            self._tasks += [asyncio.create_task(run(), name=name) for name, run in protocol.tasks().items()]
        if self.reconcile is not None:
            self._tasks.append(asyncio.create_task(self.reconcile.run(), name="bridge-reconcile"))
        if self.live is not None:
            self._tasks.append(asyncio.create_task(self.live.run(), name="bridge-layout"))
        self.notifier.ready("serving")
        log.info(
            "bridge_started",
            cameras=len(self.layout.cameras),
            lines=len(self.layout.blocks()),
            protocols=[p.name for p in self.protocols],
        )

    async def reload(self, config: BridgeConfig) -> None:
        """Apply what each protocol reloads of `config` (OPC UA: its users and certificates, the trusted
        directory read again); log what changed (`bridge_reloaded`) or why nothing did
        (`bridge_reload_failed`: a protocol that failed keeps its old ones)."""
        changes: dict[str, Any] = {}
        try:
            for protocol in self.protocols:
                changes |= await protocol.reload(config)
        except (ValueError, OSError) as exc:
            log.error("bridge_reload_failed", error=str(exc)[:300])
            return
        applied, restart = reloaded(self.config, config)
        restart += [f"bridge.{k}" for k in RESTART_KEYS if getattr(self.config, k) != getattr(config, k)]
        self.config = applied
        log.info("bridge_reloaded", restart_needed=sorted(restart), **changes)

    async def _heartbeat(self) -> None:
        while True:
            self.heartbeats += 1
            for protocol in self.protocols:
                await protocol.heartbeat(self.heartbeats, int(time.time() * 1000))
            self.notifier.watchdog()
            await asyncio.sleep(HEARTBEAT_S)

    def report(self) -> dict[str, Any]:
        """`/healthz`: the reader's counters, and each running protocol's `health` under its name."""
        stats = self.reader.stats
        health = {p.name: p.health() for p in self.protocols}
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
            "clients": {name: h.clients for name, h in health.items() if h.clients is not None},
            "refused": {name: h.refused for name, h in health.items() if h.refused is not None},
            "heartbeat": self.heartbeats,
            **{name: h.stats for name, h in health.items() if h.stats is not None},
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
        if self.health is not None:
            await self.health.close()
        for protocol in self.protocols:
            await protocol.close()


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
