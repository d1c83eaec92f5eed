"""The bridge process: protocols, reader, heartbeat, health endpoint, sd_notify, clean shutdown.

Its lifecycle has the daemon's shape (daemon.app `Daemon.run`, daemon.core.tasks): `Bridge.run()`
= open (each protocol listens or connects, the health endpoint) -> the long-lived tasks (the
reader, the heartbeat, the reloads, each protocol's `tasks`, the reconciliation's, the live layout),
all in one `asyncio.TaskGroup`; READY -> wait for `request_stop` (a signal handler may call it: it
only sets an event; daemon.ops.signals) -> the ordered stop within `grace_s`: intake stopped with
the batch in flight served and acknowledged, then every other task, then the health endpoint and
the protocols closed. An unexpected exception in any task, or a long-lived task that returns, ends
`run()` with it (`bridge_task_failed`; the process exits non-zero and systemd restarts it); the
expected faults (Redis down, a PLC or broker gone) are retried inside the tasks.
`serving()` is the same lifecycle around a block, and `start`/`stop` its two halves (tests and
tools that look at the counters while it runs; both from one task).
The PLC protocols are the ones the table `daemon.bridge.protocols.PROTOCOLS` builds from the config,
driven through `daemon.bridge.protocol.PlcProtocol` only (`Bridge.protocol` finds one by class).
`request_reload` (SIGHUP) reads the config again (`load_config`) and applies what each protocol
reloads (`reload`; OPC UA: the users, the trusted client certificates and the server certificate);
cameras and lines added to the config are served live (daemon.bridge.live: at SIGHUP and after each
camera entry of the events stream); any other change in the config is logged as needing a restart,
and not applied.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Self, TypeVar

import structlog
from prometheus_client import CollectorRegistry

from daemon.bridge.layout import BridgeLayout, validate_layout
from daemon.bridge.live import LiveLayout
from daemon.bridge.protocol import PlcProtocol, ProtocolContext
from daemon.bridge.protocols import build_protocols, health_report, reloaded
from daemon.bridge.reader import StreamReader
from daemon.bridge.reconcile_setup import add_routes, build_reconcile, reconcile_problems
from daemon.bridge.reference import Reference
from daemon.bridge.state import BridgeState, Change, Crossing
from daemon.config.bridge import BridgeConfig
from daemon.config.redis import RedisConfig
from daemon.core.netaddr import parse_host_port
from daemon.core.tasks import CloseStep, Spawn, run_close_steps, spawner, stop_task
from daemon.ops.http import HealthServer
from daemon.ops.systemd import SystemdNotifier
from daemon.publish.redis_conn import RedisClient

log = structlog.get_logger("beltsight.bridge")

HEARTBEAT_S = 1.0
STOP_GRACE_S = 10.0
"""The ordered stop's deadline when none is given (`shutdown_grace_s`'s default)."""
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
        load_config: Callable[[], BridgeConfig | None] | None = None,
        grace_s: float = STOP_GRACE_S,
    ) -> None:
        """`redis` names the streams read (`objects_stream`, `events_stream`); the factory connects.
        `references`: the plant counters' readers by reconcile key, instead of the network ones.
        `layouts`: the config's layout read again (None when it does not load), served live as it grows
        (daemon.bridge.live) after each camera entry of the events stream and each reload.
        `load_config`: the config read again at `request_reload` (None: it did not load, logged there).
        `grace_s`: the ordered stop's deadline (the config's `shutdown_grace_s` for `beltsight bridge`)."""
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
        self.heartbeats = 0
        self.grace_s = grace_s
        self._load_config = load_config
        self._stop = asyncio.Event()
        self._reload = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        """Every long-lived task, in start order (the reader first), all in the one task group."""
        self._stopping = False
        self._running: AsyncExitStack | None = None

    def protocol(self, kind: type[P]) -> P | None:
        """The running protocol of that class (None: off in this config)."""
        return next((p for p in self.protocols if isinstance(p, kind)), None)

    def request_stop(self) -> None:
        """Begin the ordered stop (safe to call from a signal handler on the loop)."""
        self._stop.set()

    def request_reload(self) -> None:
        """Read the config again and apply what can change live (safe from a signal handler on the loop)."""
        self._reload.set()

    async def run(self) -> None:
        """Serve until `request_stop`, then stop in order; an unexpected exception in any task ends it."""
        async with self.serving():
            await self._stop.wait()

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[Self]:
        """Serve for the block's duration (the module docstring's lifecycle); a task's failure cancels
        the block and is raised from it (in an ExceptionGroup, as `asyncio.TaskGroup` raises it)."""
        try:
            await self._open()
            async with asyncio.TaskGroup() as group:
                self._start_tasks(spawner(group))
                self.notifier.ready("serving")
                log.info(
                    "bridge_started",
                    cameras=len(self.layout.cameras),
                    lines=len(self.layout.blocks()),
                    protocols=[p.name for p in self.protocols],
                )
                try:
                    yield self
                finally:
                    await self._stop_tasks()
        finally:
            await self._close()

    async def start(self) -> None:
        """The first half of `serving()`: serving once it returns (`stop` from the same task)."""
        self._running = AsyncExitStack()
        await self._running.enter_async_context(self.serving())

    async def stop(self) -> None:
        """The second half of `serving()`: the ordered stop (a task's failure is raised here)."""
        running, self._running = self._running, None
        if running is not None:
            await running.aclose()

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

    def report(self) -> dict[str, Any]:
        """`/healthz`: the reader's counters, and every protocol's part (`health_report`: a running
        one's `health`, an off one's defaults)."""
        stats = self.reader.stats
        protocols = health_report(self.protocols)
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
            "clients": protocols.pop("clients"),
            "refused": protocols.pop("refused"),
            "heartbeat": self.heartbeats,
            **protocols,
            "reconcile": self.reconcile.report() if self.reconcile is not None else None,
        }

    # -- startup ---------------------------------------------------------------------------
    async def _open(self) -> None:
        """Each protocol listens or connects, then the health endpoint (ValueError, OSError: not started)."""
        self._stopping = False
        for protocol in self.protocols:
            await protocol.start()
        if self.config.health_listen:
            host, port = parse_host_port(self.config.health_listen)
            self.health = HealthServer(host, port, self.registry, self.report)
            if self.reconcile is not None:
                add_routes(self.health, self.reconcile, self.config.evidence_url)
            await self.health.start()

    def _start_tasks(self, spawn: Spawn) -> None:
        """Every long-lived task, in the one group; the reader first (the intake `_stop_tasks` drains)."""
        runs: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {
            "bridge-reader": self.reader.run,
            "bridge-heartbeat": self._heartbeat,
            "bridge-reload": self._reloads,
        }
        for protocol in self.protocols:
            runs |= protocol.tasks()
        if self.reconcile is not None:
            runs |= self.reconcile.tasks()
        if self.live is not None:
            runs["bridge-layout"] = self.live.run
        self._tasks = [spawn(self._guarded(run(), name), name) for name, run in runs.items()]

    async def _guarded(self, work: Coroutine[Any, Any, None], name: str) -> None:
        """`work`, whose unexpected end ends the bridge: an exception (logged, raised to the group), or
        returning before the stop began."""
        try:
            await work
        except Exception as exc:
            log.error("bridge_task_failed", task=name, error=repr(exc)[:300])
            raise
        if not self._stopping:
            log.error("bridge_task_failed", task=name, error="returned")
            raise RuntimeError(f"bridge task ended unexpectedly: {name}")

    async def _heartbeat(self) -> None:
        while True:
            self.heartbeats += 1
            for protocol in self.protocols:
                await protocol.heartbeat(self.heartbeats, int(time.time() * 1000))
            self.notifier.watchdog()
            await asyncio.sleep(HEARTBEAT_S)

    async def _reloads(self) -> None:
        while True:
            await self._reload.wait()
            self._reload.clear()
            config = self._load_config() if self._load_config is not None else None
            if config is not None:
                await self.reload(config)
            if self.live is not None:
                self.live.wake()

    # -- stop ------------------------------------------------------------------------------
    async def _stop_tasks(self) -> None:
        """Stop intake with the batch in flight served and acknowledged (within `grace_s`; past it the
        batch is left pending, served again at the next start), then every other task."""
        self._stopping = True
        self.notifier.stopping()
        log.info("bridge_stopping", served=self.reader.stats.served)
        if self._tasks:
            intake = self._tasks[0]
            try:
                async with asyncio.timeout(self.grace_s), self.reader.serving:  # between two batches
                    await stop_task(intake)
            except TimeoutError:
                log.warning("bridge_drain_overdue", grace_s=self.grace_s, served=self.reader.stats.served)
        for task in self._tasks:
            await stop_task(task)
        self._tasks = []

    async def _close(self) -> None:
        """The reconciliation (its readers closed, its counts flushed), the health endpoint, then each
        protocol (their tasks already ended): every step runs whatever an earlier one did, the first
        failure raised once all ran (`run_close_steps`, `close_step_failed`). Outside the task group:
        a task failing while the tasks stop cancels the group's body, never this."""
        steps: list[CloseStep] = []
        if self.reconcile is not None:
            steps.append(("reconcile", self.reconcile.close))
        if self.health is not None:
            health, self.health = self.health, None
            steps.append(("health", health.close))
        steps += [(f"protocol {protocol.name}", protocol.close) for protocol in self.protocols]
        await run_close_steps(steps)
