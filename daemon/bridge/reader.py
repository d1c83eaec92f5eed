"""The consumer: every camera's objects stream and the events stream, through one consumer group.

The streams are the daemon's (`[redis] objects_stream` per camera, `[redis] events_stream`).

- Each stream's group is created with `XGROUP CREATE <stream> <group> 0 MKSTREAM` (BUSYGROUP
  ignored), so a new group reads each stream from its start. A group that vanished (Redis lost
  its data) is created again the same way.
- On each (re)connect: the snapshot (`snapshot_key`) is loaded once per process (until then Modbus
  answers busy and OPC UA BadWaitingForInitialData: `Sink.serve_all` marks it loaded), then, once
  per process, the crossings of the last `[bridge] event_history_s` of every objects stream are read
  (XRANGE) and handed to `Sink.recall` (the OPC UA event history: daemon.bridge.history), then every
  pending entry of the group is claimed with XAUTOCLAIM and processed first, then new entries are
  read with XREADGROUP.
- An entry is acknowledged only after its value is served: applied to the state and pushed to
  the servers (`Sink.serve`). The XACKs and the new snapshot go in one MULTI/EXEC, so the snapshot
  always reflects exactly the acknowledged entries. Replayed entries are no-ops (`daemon.bridge.state`).
- On each topology (one Redis, Sentinel, Cluster) the acknowledgements and the snapshot keep these
  guarantees; where they go and how `[redis] min_replicas` makes them survive a failover is
  `daemon.bridge.topology` (on a Cluster: one read loop, one MULTI and one snapshot part per slot).
- A malformed entry is counted, logged (at most one line per second) and acknowledged.
- Redis down: reconnect with capped exponential backoff and full jitter; what is served stays.
- A new entry is served as soon as XREADGROUP returns it: a read blocked on several streams wakes on
  an entry in any of them, so `BLOCK_MS` only bounds how often the pending counts are refreshed
  while idle (measured: `python -m tools.bridge.bench_first`).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError, ResponseError

from daemon.bridge.layout import BridgeLayout
from daemon.bridge.replies import AutoClaim, Entries, pending_count, stream_entries, text
from daemon.bridge.state import BridgeState, Change, Crossing, MalformedEntryError, crossings_from_rows, parse_id
from daemon.bridge.topology import AckLayout
from daemon.config.bridge import BridgeConfig
from daemon.config.redis import RedisConfig
from daemon.core.ratelimit import RateLimited
from daemon.core.tasks import run_together
from daemon.publish.redis_conn import RedisClient

log = structlog.get_logger("beltsight.bridge.reader")

BLOCK_MS = 1000
PENDING_REFRESH_S = 2.0
MALFORMED_LOG_INTERVAL_S = 1.0
REPLICAS_LOG_INTERVAL_S = 10.0
BACKOFF_BASE_S = 0.1
CAMERA_SET_KINDS = frozenset({"camera_added", "camera_changed", "camera_removed"})
"""Events-stream kinds after which the bridge reads its layout again (daemon.bridge.live)."""


class Sink(Protocol):
    async def serve(self, changes: list[Change]) -> None: ...

    async def serve_all(self, state: BridgeState) -> None: ...

    async def recall(self, crossings: list[Crossing]) -> None: ...


@dataclass(slots=True)
class ReaderStats:
    connected: bool = False
    last_ids: dict[str, str] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)
    malformed: int = 0
    entries: int = 0
    served: int = 0
    reconnects: int = 0
    replicas_short: int = 0
    """EXECs whose WAIT saw fewer than `[redis] min_replicas` replicas (daemon.bridge.topology)."""


def read_streams(layout: BridgeLayout, redis: RedisConfig) -> dict[str, str | None]:
    """The streams the bridge reads: each camera's objects stream (-> its id), the events stream (-> None)."""
    streams: dict[str, str | None] = {redis.objects_stream_for(c.id): c.id for c in layout.cameras}
    streams[redis.events_stream] = None
    return streams


class StreamReader:
    def __init__(
        self,
        cfg: BridgeConfig,
        redis: RedisConfig,
        state: BridgeState,
        sink: Sink,
        client_factory: Callable[[], RedisClient],
        *,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.cfg = cfg
        self.state = state
        self.sink = sink
        self._factory = client_factory
        self._rng = rng
        self.streams = read_streams(state.layout, redis)
        self.acks = AckLayout.of(cfg, redis, self.streams)
        self.stats = ReaderStats()
        self._snapshot_loaded = False
        self._recalled = cfg.event_history_s <= 0
        self._lines = {(c.id, line.id) for c in state.layout.cameras for line in c.lines}
        self._malformed_log = RateLimited(MALFORMED_LOG_INTERVAL_S)
        self._replicas_log = RateLimited(REPLICAS_LOG_INTERVAL_S)
        self._pending_at: dict[int, float] = {}
        self.serving = asyncio.Lock()
        """Held while a batch is applied and served (the live layout changes between batches)."""
        self._redis = redis
        self._generation = 0
        """+1 each time `grow` adds streams: the read loops end and the session reads the new set."""
        self.on_cameras: Callable[[], None] | None = None
        """Called for each `camera_added`/`camera_changed`/`camera_removed` entry of the events stream."""

    def grow(self, layout: BridgeLayout) -> None:
        """Read `layout`'s streams from now on (the served layout grown live, daemon.bridge.live): each new
        camera's objects stream joins the group, from its start when the group is new there (its counts
        are rebuilt from its entries), else from what was acknowledged; the read loops take the new set
        within one `BLOCK_MS`, on the same connection."""
        self._lines = {(c.id, line.id) for c in layout.cameras for line in c.lines}
        streams = read_streams(layout, self._redis)
        if set(streams) != set(self.streams):
            self.streams = streams
            self.acks = AckLayout.of(self.cfg, self._redis, streams)
            self._generation += 1

    async def run(self) -> None:
        """Read until cancelled; Redis errors only cause a reconnect."""
        attempt = 0
        while True:
            client = self._factory()
            was_connected = False
            try:
                await self._session(client)
            except (RedisError, OSError) as exc:
                was_connected = self.stats.connected
                if was_connected or attempt == 0:
                    log.warning("bridge_redis_down", error=str(exc)[:200], served=self.stats.served)
                self.stats.connected = False
            finally:
                await client.aclose()
            attempt = 1 if was_connected else attempt + 1
            self.stats.reconnects += 1
            cap = min(self.cfg.reconnect_max_s, BACKOFF_BASE_S * 2 ** min(attempt, 20))
            await asyncio.sleep(cap * self._rng())

    async def _session(self, client: RedisClient) -> None:
        await self._ensure_groups(client)
        if not self._snapshot_loaded:
            await self._load_snapshot(client)
        if not self._recalled:
            await self._recall(client)
        self.stats.connected = True
        log.info("bridge_redis_connected", streams=len(self.streams), group=self.cfg.group)
        await self._claim(client)
        while True:
            await self._read_groups(client, self._generation)
            await self._ensure_groups(client)  # the streams `grow` added

    async def _read_groups(self, client: RedisClient, generation: int) -> None:
        """The read loops, until an error (raised) or until `grow` changes the streams (returns)."""
        groups = self.acks.read_groups()
        if len(groups) == 1:
            await self._read_loop(client, groups[0], generation)
            return
        loops = {f"bridge-read-{i}": self._read_loop(client, g, generation) for i, g in enumerate(groups)}
        await run_together(loops)  # the first loop's error ends the session (it reconnects)

    async def _read_loop(self, client: RedisClient, streams: list[str], generation: int = 0) -> None:
        """XREADGROUP on `streams` (all of them, or one cluster slot's) and process, until an error or
        until the streams read change (`grow`)."""
        while generation == self._generation:
            try:
                reply = await client.xreadgroup(
                    self.cfg.group,
                    self.cfg.consumer,
                    dict.fromkeys(streams, ">"),
                    count=self.cfg.read_count,
                    block=BLOCK_MS,
                )
            except ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                await self._ensure_groups(client)
                continue
            batches = stream_entries(reply)
            if batches:
                await self.process(client, batches)
            await self._refresh_pending(client, streams)

    async def _ensure_groups(self, client: RedisClient) -> None:
        for stream in self.streams:
            try:
                await client.xgroup_create(stream, self.cfg.group, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    async def _load_snapshot(self, client: RedisClient) -> None:
        for key, _camera, stream in self.acks.snapshot_keys():
            raw = await client.get(key)
            if raw is None:
                continue
            try:
                if stream:
                    self.state.load_snapshot_part(text(raw))
                else:
                    self.state.load_snapshot(text(raw))
                log.info("bridge_snapshot_loaded", key=key)
            except MalformedEntryError as exc:
                log.warning("bridge_snapshot_invalid", key=key, reason=exc.reason)
        self._snapshot_loaded = True
        await self.sink.serve_all(self.state)

    async def _recall(self, client: RedisClient) -> None:
        """The crossings of the last `event_history_s` of every objects stream, oldest first, to the
        sink's event history (before any entry is served, so that none is missed or kept twice)."""
        since = max(0, int((time.time() - self.cfg.event_history_s) * 1000))
        crossings: list[Crossing] = []
        for stream, camera in self.streams.items():
            if camera is None:
                continue
            start = f"{since}-0"
            while True:
                rows = await client.xrange(stream, min=start, max="+", count=self.cfg.read_count) or []
                crossings += [c for c in crossings_from_rows(camera, rows) if (camera, c.line) in self._lines]
                if len(rows) < self.cfg.read_count:
                    break
                start = "(" + text(rows[-1][0])
        crossings.sort(key=lambda c: parse_id(c.entry_id))
        await self.sink.recall(crossings)
        self._recalled = True
        log.info("bridge_history_recalled", crossings=len(crossings), window_s=self.cfg.event_history_s)

    async def _claim(self, client: RedisClient) -> None:
        """Process every pending entry of the group first (a previous run's, or this one's)."""
        for stream in self.streams:
            start = "0-0"
            while True:
                reply = await client.xautoclaim(
                    stream,
                    self.cfg.group,
                    self.cfg.consumer,
                    min_idle_time=0,
                    start_id=start,
                    count=self.cfg.read_count,
                )
                claimed = AutoClaim.of(reply)
                start = claimed.next_start
                if claimed.entries or claimed.deleted:
                    await self.process(client, [(stream, [*claimed.entries, *claimed.deleted])])
                if start == "0-0":
                    break

    async def process(self, client: RedisClient, batches: list[tuple[str, Entries]]) -> None:
        """Apply, serve, then acknowledge (with the snapshot, atomically); one batch at a time (the
        read loops of a cluster's slots take turns)."""
        async with self.serving:
            await self._process(client, batches)

    async def _process(self, client: RedisClient, batches: list[tuple[str, Entries]]) -> None:
        changes: list[Change] = []
        for stream, entries in batches:
            camera = self.streams.get(stream)
            for entry_id, fields in entries:
                self.stats.entries += 1
                self.stats.last_ids[stream] = entry_id
                if fields is None:  # trimmed away while pending
                    continue
                if camera is None and fields.get("kind") in CAMERA_SET_KINDS and self.on_cameras is not None:
                    self.on_cameras()
                change = self._apply(stream, camera, entry_id, fields)
                if change is not None:
                    changes.append(change)
        if changes:
            await self.sink.serve(changes)
            self.stats.served += len(changes)
        acks = {stream: [eid for eid, _ in entries] for stream, entries in batches if entries}
        for streams in self.acks.by_slot(list(acks)):
            await self._acknowledge(client, {s: acks[s] for s in streams})

    async def _acknowledge(self, client: RedisClient, acks: dict[str, list[str]]) -> None:
        """One MULTI (one slot on a cluster): the snapshot (parts) and the XACKs; then WAIT, with min_replicas."""
        if self.acks.cluster:
            snapshot = [(self.acks.part_key(s), self.state.to_snapshot_part(self.streams.get(s))) for s in acks]
        else:
            snapshot = [(self.acks.snapshot_key, self.state.to_snapshot())]
        async with client.pipeline(transaction=True) as pipe:
            for key, value in snapshot:
                pipe.set(key, value)
            for stream, ids in acks.items():
                pipe.xack(stream, self.cfg.group, *ids)
            await pipe.execute()
        if self.acks.min_replicas > 0:
            await self._confirm(client, *snapshot[0])

    async def _confirm(self, client: RedisClient, key: str, value: str) -> None:
        """WAIT for `min_replicas` after the EXEC: a rewrite of `key` on the WAIT's own connection first
        (WAIT counts from its connection's last write; replication is ordered, so it covers the EXEC)."""
        target: dict[str, Any] = {}
        if isinstance(client, RedisCluster):
            target = {"target_nodes": client.get_node_from_key(key)}
        async with client.pipeline(transaction=False) as pipe:
            pipe.set(key, value)
            pipe.execute_command("WAIT", self.acks.min_replicas, self.acks.wait_timeout_ms, **target)
            replies = await pipe.execute()
        got = replies[-1]
        replicas = int(next(iter(got.values())) if isinstance(got, dict) else got)
        if replicas < self.acks.min_replicas:
            self.stats.replicas_short += 1
            if self._replicas_log.allow() is not None:
                log.warning(
                    "bridge_replicas_short",
                    replicas=replicas,
                    min_replicas=self.acks.min_replicas,
                    short=self.stats.replicas_short,
                )

    def _apply(self, stream: str, camera: str | None, entry_id: str, fields: dict[str, str]) -> Change | None:
        try:
            if camera is None:
                return self.state.apply_event(entry_id, fields)
            return self.state.apply_object(camera, entry_id, fields)
        except MalformedEntryError as exc:
            self.stats.malformed += 1
            if self._malformed_log.allow() is not None:  # `malformed` counts every one, logged or not
                log.warning(
                    "bridge_entry_malformed",
                    stream=stream,
                    id=entry_id,
                    reason=exc.reason,
                    malformed=self.stats.malformed,
                )
            return None

    async def _refresh_pending(self, client: RedisClient, streams: list[str]) -> None:
        now = time.monotonic()
        if now - self._pending_at.get(id(streams), 0.0) < PENDING_REFRESH_S:
            return
        self._pending_at[id(streams)] = now
        for stream in streams:
            summary = await client.xpending(stream, self.cfg.group)
            self.stats.pending[stream] = pending_count(summary)
