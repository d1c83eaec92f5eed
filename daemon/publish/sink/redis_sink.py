"""The Redis Streams sink: buffering, XADD with trimming, recovery through outages."""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Callable

import structlog
from redis.exceptions import ResponseError

from daemon.config.redis import RedisConfig
from daemon.core.backoff import Backoff
from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.core.frames import FrameResult, StatusEvent
from daemon.core.metrics import Metrics
from daemon.core.objects import ObjectsResume
from daemon.core.redaction import SECRETS
from daemon.publish.redis_conn import (
    RETRYABLE,
    TRANSIENT,
    Connector,
    RedisClient,
    ReplicasShortError,
    SinkError,
)
from daemon.publish.resume import resume_points
from daemon.publish.sink.backlog import Backlog, Buffer, Drops, Slot
from daemon.publish.sink.held import HeldStreams
from daemon.publish.sink.objects import ObjectWrites
from daemon.publish.sink.probe import HeldProbe
from daemon.publish.sink.report import OutageReport
from daemon.publish.sink.settle import Settle
from daemon.publish.sink.spools import open_spools, shut_spools
from daemon.publish.sink.stream_ids import StreamIds
from daemon.publish.sink.writer import BatchWriter

log = structlog.get_logger("beltsight.sink")


class Take(enum.Enum):
    """What one pipeline of the sink takes (`RedisSink._publish_batch`)."""

    BACKLOG = "backlog"
    HOLDS = "holds"
    EVENTS = "events"


EVENTS_BUFFER_MAX = 1000


class RedisSink:
    """Publishes every FrameResult as one schema-v1 entry in its camera's stream.

    Policies:
    - Buffer: `accept()` never blocks on Redis; up to `buffer_max` entries wait in memory.
      Without `spool_dir`, when full, the oldest entry not being written is dropped, counted
      `dropped{camera, buffer_full}` and logged (at most every 5 s). With `spool_dir`, the
      oldest entries are spilled to the disk spool instead (chunks of up to 256, written and
      fsync'd by the spool's writer thread: the loop never waits for the disk), published
      first once Redis is back, and found again by the next run;
      only when the spool passes `spool_max_mb` are its oldest entries dropped (counted and
      logged the same way). See `Backlog` and `daemon.publish.spool`. Events have their own memory
      buffer of 1000, drop-oldest, never spooled.
    - Writes: pipelines (no MULTI) of up to `publish_batch` XADDs with `MAXLEN ~ maxlen`.
      IDs are explicit, `<captured_ms>-<n>`, strictly increasing per stream (same ms or the
      clock going back: previous ID + 1). An ID, once given to an entry, sticks to it.
    - Exactly once: before writing, IDs are checked against the stream's top after anything
      that may have hidden a write; an entry already stored is counted, not written again
      (`daemon.publish.sink.stream_ids`). Order per camera holds while this sink is the only writer.
    - Outages (connection refused/reset, timeouts, LOADING): keep the buffer, `redis_up` 0,
      log `redis_down` once, retry with capped exponential backoff and full jitter
      (`backoff_min_s` .. `backoff_max_s`), then log `redis_up` and publish the backlog in
      order. Authentication/ACL failures are logged as `redis_auth_failed` (ERROR) and
      retried the same way; the connection is rebuilt each time, so a fixed password file is
      picked up. Other refusals of the whole server (OOM, MISCONF, BUSY) are logged
      `redis_write_failed` and retried the same way.
    - Holds as wide as the fault: one refused stream key (WRONGTYPE, NOPERM on a key), in a Cluster
      one slot that is not served or moving (CLUSTERDOWN, TRYAGAIN, MOVED/ASK) or one master that
      does not answer while others do (NODE_DOWN, `daemon.publish.sink.faults`) holds only the
      cameras whose detection or objects streams live there, apart, bounded, in order, across a
      restart (`daemon.publish.sink.held`), and the events stream alone when it is the one; the
      other cameras keep publishing. Held cameras are tried in a task of their own
      (`daemon.publish.sink.probe`).
    - Replicas (`min_replicas` > 0): each pipeline ends with `WAIT min_replicas wait_timeout_ms`
      (one per master written, `daemon.publish.redis_conn.queue_waits`); an entry leaves the buffer only
      once its master's WAIT counted enough replicas. Unconfirmed entries stay, in order; the next
      attempt finds them stored (same ID) and confirms them with that attempt's WAIT, or, when a
      failover lost them with the old master, writes them again to the new one. A short count is
      logged `redis_replicas_short` and backed off like an outage, on the same connection (WAIT
      counts that connection's writes). Events are not held for replicas.
    - Cluster, TLS: inside the client (`daemon.publish.redis_conn.Connector`); only the width of a
      fault is the Cluster's to decide (`daemon.publish.sink.faults.isolate`).
    - Redis user needs: XADD, XINFO, XRANGE on the detection and event streams (+ WAIT and
      XSETID for min_replicas, CLUSTER SLOTS and COMMAND for a cluster: README's ACL lines).
    - Lifecycle: building a sink touches no disk and starts nothing; `open()` recovers the spools
      and starts their writer threads (`daemon.publish.sink.spools`), before `run()`. `close()`
      spills what is still in memory to the spool (the next run publishes it; without a spool it
      counts it as `dropped{camera, shutdown}`) and stops those threads; call it after `run()` has
      stopped, and after an `open()` that failed too.
    """

    def __init__(
        self,
        cfg: RedisConfig,
        metrics: Metrics,
        *,
        client_factory: Callable[[], RedisClient] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        backoff_min_s: float = 0.2,
        backoff_max_s: float = 5.0,
    ) -> None:
        self.cfg = cfg
        self.metrics = metrics
        self._client_factory = client_factory or Connector(cfg)
        self._clock = clock
        self._backoff = Backoff(backoff_min_s, backoff_max_s, healthy_reset_s=30.0, clock=clock)
        self._ids = StreamIds(cfg.stream_for)
        after_s = cfg.spool_after_s
        self._frames = Backlog(cfg.buffer_max, None, self._ids.assign_spill_id, spool_after_s=after_s, clock=clock)
        self._held = HeldStreams(
            cfg.buffer_max,
            cfg.spool_cap_bytes,
            self._ids.assign_spill_id,
            clock=clock,
            backoff_s=(backoff_min_s, backoff_max_s),
        )
        objects = ObjectWrites(cfg.objects_stream_for, self._ids)
        settle = Settle(cfg, metrics, self._ids, objects, clock)
        self._writer = BatchWriter(
            cfg,
            metrics,
            ids=self._ids,
            writes=objects,
            settle=settle,
            held=self._held,
            count_drops=self._count_drops,
            clock=clock,
        )
        metrics.sink_spooled.set_function(lambda: self.spooled)
        self._events: Buffer[StatusEvent] = Buffer(EVENTS_BUFFER_MAX)
        self._client: RedisClient | None = None
        self._wake = asyncio.Event()
        self._probe = HeldProbe(
            self._held,
            self._client_factory,
            lambda client: self._publish_batch(client, Take.HOLDS),
            forget_tops=self._ids.forget_tops,
            wake=self._wake,
        )
        self._lock = asyncio.Lock()
        self._report = OutageReport(cfg, clock)
        self.connected = False
        self.opened = False
        metrics.redis_up.set(0)
        self._report.tls_unverified()

    # -- intake (event loop, never blocks) ----------------------------------------------

    def accept(self, result: FrameResult) -> None:
        self._count_drops(self._frames.push(result))
        self.metrics.sink_buffered.set(len(self._frames) + len(self._held))
        self._wake.set()

    def accept_event(self, event: StatusEvent) -> None:
        dropped = self._events.push(event)
        if dropped is not None:
            log.warning("sink_event_dropped", kind=dropped.kind, camera=dropped.camera_id)
        self._wake.set()

    @property
    def buffered(self) -> int:
        """Frame entries not yet in Redis, in memory and in the spool, held apart or not."""
        return len(self._frames) + len(self._held)

    @property
    def spooled(self) -> int:
        """Frame entries waiting in the disk spool, held apart or not (0 without one)."""
        return self._frames.spooled + self._held.spooled

    async def resume_points(
        self, cameras: dict[str, set[tuple[str, str]]], timeout_s: float
    ) -> tuple[dict[str, ObjectsResume], bool]:
        """`daemon.publish.resume.resume_points` through this sink's connection factory and spool."""
        spooled = self._frames.spooled_results() + self._held.spooled_results()
        return await resume_points(
            self._client_factory, self.cfg.objects_stream_for, cameras, timeout_s, spooled=spooled
        )

    # -- publishing ----------------------------------------------------------------------

    async def open(self) -> None:
        """Recover what the last run left in `spool_dir` and start the spools' writer threads
        (`daemon.publish.sink.spools.open_spools`); once, before `run()`."""
        if self.opened:
            raise RuntimeError("the sink is open already")
        self.opened = True
        await open_spools(self.cfg, self._frames, self._held)

    async def run(self) -> None:
        """Publish until cancelled: wait for work, write a batch, back off while Redis fails.

        A cancellation that a library swallows (a connect or disconnect turning CancelledError
        into a timeout) still ends the loop: the task's pending cancel count is checked on each
        pass, so shutdown never waits on a sink that keeps retrying."""
        if not self.opened:
            raise RuntimeError("open() the sink before run()")
        task = asyncio.current_task()
        try:
            while True:
                if task is not None and task.cancelling():
                    raise asyncio.CancelledError
                if not self._frames and not self._events_ready():
                    await self._idle()
                delay_s = await self._attempt()
                if delay_s is not None:
                    await self._pause(delay_s)
        finally:
            await self._drop_client()  # the probe of the held cameras too

    def _events_ready(self) -> bool:
        """Status events wait and their stream is not held (a held one goes out on its probes)."""
        return bool(self._events) and not self._held.events.held

    async def _idle(self) -> None:
        """Wait for work: a new entry, or the next try of a held stream."""
        self._wake.clear()
        due_s = self._held.next_due_s()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(due_s):
                await self._wake.wait()

    async def drain(self, timeout_s: float) -> int:
        """Flush the buffers within `timeout_s`; return how many frame entries are left."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            async with asyncio.timeout_at(deadline):
                while self._frames or self._events_ready():
                    delay_s = await self._attempt()
                    if delay_s is not None:
                        await self._pause(min(delay_s, max(0.0, deadline - loop.time())))
        except TimeoutError:
            pass
        return len(self._frames) + len(self._held)

    async def _pause(self, delay_s: float) -> None:
        """Back off for `delay_s`, moving what has waited `spool_after_s` to the spool meanwhile."""
        loop = asyncio.get_running_loop()
        until = loop.time() + delay_s
        while (left := until - loop.time()) > 0:
            await asyncio.sleep(min(left, self.cfg.spool_after_s / 2))
            self._count_drops(self._frames.tick())

    async def close(self) -> None:
        """Close the connection; entries still in memory go to the spool for the next run,
        or without one (or when it cannot be written) are counted as dropped (`shutdown`); the
        spools are closed, their writer threads stopped (blocks for their last writes)."""
        await self._probe.stop()
        spilled, drops, lost = shut_spools(self._frames, self._held)
        self._count_drops(drops)
        for result in lost:
            self.metrics.dropped(result.camera_id, "shutdown")
        if spilled or drops:
            log.info("sink_spooled_at_shutdown", spilled=spilled, dropped=sum(drops.values()))
        self._events.drain_all()
        self.metrics.sink_buffered.set(0)
        await self._drop_client()

    async def _attempt(self) -> float | None:
        """One batch; when Redis failed, the seconds to back off."""
        async with self._lock:
            try:
                if self._client is None:
                    self._client = self._client_factory()
                await self._publish_batch(self._client, Take.BACKLOG)
                if self._held.events.held and self._held.events.due():
                    await self._probe_events(self._client)
                self._probe.start()  # the held cameras, beside (`daemon.publish.sink.probe`)
            except asyncio.CancelledError:
                # cut off mid-pipeline: the socket may hold unread replies and writes may have landed
                self._ids.forget_tops()
                await self._drop_client()
                raise
            except RETRYABLE as exc:
                return await self._on_failure(exc)
            except ResponseError as exc:  # a refusal raised by the client itself (BUSY on a whole pipeline)
                return await self._on_failure(SinkError(SECRETS.scrub(str(exc))), exc)
            except ValueError as exc:  # unreadable password file, bad URL
                return await self._on_failure(SinkError(SECRETS.scrub(str(exc))))
            self._on_success()
            return None

    async def _probe_events(self, client: RedisClient) -> None:
        try:
            await self._publish_batch(client, Take.EVENTS)
        except (*RETRYABLE, ResponseError) as exc:  # the backlog's batch went through: the events stream's own
            self._held.events_failed(self.cfg.events_stream, exc, self._held.events.code or "NODE_DOWN")

    async def _publish_batch(self, client: RedisClient, take: Take) -> None:
        """One pipeline: the backlog's oldest entries and the status events (cameras held apart are
        diverted to their holds), the held cameras that are due a try (`HOLDS`), or the held events
        stream (`EVENTS`). A pipeline that fails as a whole on a Cluster where some masters still
        answer holds only what lives on the others (`faults.isolate`); the rest is tried again."""
        peeked: list[Slot[FrameResult]] = []
        moved: set[int] = set()
        frames = self._held.due(self.cfg.publish_batch) if take is Take.HOLDS else []
        if take is Take.BACKLOG:
            # entries waiting for replicas ride along (not written again), so new ones still go out
            peeked = self._frames.peek(self.cfg.publish_batch + len(self._writer.unconfirmed))
            self._writer.unconfirmed &= {s.ticket for s in peeked}
            frames, moved, drops = self._held.divert(peeked)  # cameras held apart: not in this batch
            self._count_drops(drops)
        take_events = take is Take.EVENTS or (take is Take.BACKLOG and not self._held.events.held)
        events = self._events.peek(self.cfg.publish_batch) if take_events else []
        done_frames: set[int] = set()
        done_events: set[int] = set()
        failed = True
        try:
            try:
                await self._writer.write(
                    client, frames, events, moved=moved, done_frames=done_frames, done_events=done_events
                )
            except TRANSIENT as exc:  # a try of held cameras that fails as a whole just failed
                left = [s for s in frames if s.ticket not in done_frames | moved]
                if take is Take.HOLDS or not await self._writer.isolate(client, exc, left, events):
                    raise
                moved |= {s.ticket for s in frames if self._held.held(s.item.camera_id)} - done_frames
            failed = False
        finally:
            if take is Take.BACKLOG:  # the others leave the backlog's flight alone (it may be in one)
                self._count_drops(self._frames.settle((done_frames | moved) & {s.ticket for s in peeked}))
            probed = {s.ticket for s in frames} if take is Take.HOLDS else set()
            self._count_drops(self._held.settle(done_frames, probed, failed=failed))
            if take_events:
                self._events.settle(done_events)
            self._update_gauges()

    def _update_gauges(self) -> None:
        self.metrics.sink_buffered.set(len(self._frames) + len(self._held))
        self._held.report(self.metrics.sink_held)

    # -- health, backoff, logging ---------------------------------------------------------

    def _on_success(self) -> None:
        if not self.connected:
            self._report.up(self._backoff.failures)
        self.connected = True
        self._backoff.succeeded()
        self.metrics.redis_up.set(1)

    async def _on_failure(self, exc: BaseException, cause: BaseException | None = None) -> float:
        """Log the failure once per outage and kind; return the backoff delay."""
        exc.__cause__ = cause or exc.__cause__
        self.connected = False
        self.metrics.redis_up.set(0)
        delay_s = self._backoff.failed()
        if isinstance(exc, ReplicasShortError):  # replies all read: keep the connection WAIT counts on
            delay_s = min(delay_s, self.cfg.wait_timeout_ms / 1000)  # each WAIT already waited that long
        else:
            self._ids.forget_tops()  # a write may have landed without its reply: re-read the tops
            await self._drop_client()
        self._report.failed(exc, len(self._frames))
        return delay_s

    def _count_drops(self, drops: Drops) -> None:
        for (camera_id, reason), n in drops.items():
            self.metrics.dropped(camera_id, reason, n)
        if drops:
            self._report.dropped(drops)

    async def _drop_client(self) -> None:
        await self._probe.stop()  # its client too
        self._writer.unconfirmed.clear()  # a new connection looks them up again
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


__all__ = ["RedisSink"]
