"""The Redis Streams sink: buffering, XADD with trimming, recovery through outages."""

from __future__ import annotations

import asyncio
import contextlib
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
from daemon.publish.redis_conn import RETRYABLE, Connector, RedisClient, ReplicasShortError, SinkError, is_transient
from daemon.publish.resume import resume_points
from daemon.publish.schema import EntryId
from daemon.publish.sink.backlog import Backlog, Buffer, Drops, Slot, open_spool
from daemon.publish.sink.held import HeldStreams, StreamRefusedError, key_refusal, refused_cameras, settle_events
from daemon.publish.sink.objects import ObjectBatch, ObjectWrites
from daemon.publish.sink.pipeline import Batch, XaddReply, confirmed_streams, send
from daemon.publish.sink.report import OutageReport
from daemon.publish.sink.stream_ids import ID_TOO_SMALL, StreamIds

log = structlog.get_logger("beltsight.sink")

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
    - One refused stream key (WRONGTYPE, NOPERM on a key) holds only its camera, apart, bounded,
      in order (`daemon.publish.sink.held`); the other cameras keep publishing.
    - Replicas (`min_replicas` > 0): each pipeline ends with `WAIT min_replicas wait_timeout_ms`
      (one per master written, `daemon.publish.redis_conn.queue_waits`); an entry leaves the buffer only
      once its master's WAIT counted enough replicas. Unconfirmed entries stay, in order; the next
      attempt finds them stored (same ID) and confirms them with that attempt's WAIT, or, when a
      failover lost them with the old master, writes them again to the new one. A short count is
      logged `redis_replicas_short` and backed off like an outage, on the same connection (WAIT
      counts that connection's writes). Events are not held for replicas.
    - Cluster, TLS: inside the client (`daemon.publish.redis_conn.Connector`); nothing here branches.
    - Redis user needs: XADD, XINFO, XRANGE on the detection and event streams (+ WAIT and
      XSETID for min_replicas, CLUSTER SLOTS and COMMAND for a cluster: README's ACL lines).
    - `close()` spills what is still in memory to the spool (the next run publishes it); without
      a spool it counts it as `dropped{camera, shutdown}`. Call it after `run()` has stopped.
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
        self._objects = ObjectWrites(cfg.objects_stream_for, self._ids)
        spool = open_spool(cfg)
        after_s = cfg.spool_after_s
        self._frames = Backlog(cfg.buffer_max, spool, self._ids.assign_spill_id, spool_after_s=after_s, clock=clock)
        held_root = cfg.spool_dir / "held" if cfg.spool_dir is not None and spool is not None else None
        self._held = HeldStreams(
            cfg.buffer_max,
            held_root,
            cfg.spool_cap_bytes,
            self._ids.assign_spill_id,
            clock=clock,
            backoff_s=(backoff_min_s, backoff_max_s),
        )
        metrics.sink_spooled.set_function(lambda: self.spooled)
        self._events: Buffer[StatusEvent] = Buffer(EVENTS_BUFFER_MAX)
        # tickets this client wrote whose replicas have not confirmed them yet (min_replicas)
        self._unconfirmed: set[int] = set()
        self._client: RedisClient | None = None
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._report = OutageReport(cfg, clock)
        self.connected = False
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

    async def run(self) -> None:
        """Publish until cancelled: wait for work, write a batch, back off while Redis fails.

        A cancellation that a library swallows (a connect or disconnect turning CancelledError
        into a timeout) still ends the loop: the task's pending cancel count is checked on each
        pass, so shutdown never waits on a sink that keeps retrying."""
        task = asyncio.current_task()
        try:
            while True:
                if task is not None and task.cancelling():
                    raise asyncio.CancelledError
                if not self._frames and not self._events:
                    await self._idle()
                delay_s = await self._attempt()
                if delay_s is not None:
                    await self._pause(delay_s)
        finally:
            await self._drop_client()

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
                while self._frames or self._events:
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
        or without one (or when it cannot be written) are counted as dropped (`shutdown`)."""
        spilled, drops, lost = self._frames.shut()
        held_spilled, held_lost = self._held.shut()
        spilled, lost = spilled + held_spilled, lost + held_lost
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
                await self._publish_batch(self._client)
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

    async def _publish_batch(self, client: RedisClient) -> None:
        # entries waiting for replicas ride along (not written again), so new ones still go out
        peeked = self._frames.peek(self.cfg.publish_batch + len(self._unconfirmed))
        self._unconfirmed &= {s.ticket for s in peeked}
        events = self._events.peek(self.cfg.publish_batch)
        fresh, moved, drops = self._held.divert(peeked)  # cameras held apart: not in this batch
        self._count_drops(drops)
        frames = self._held.due(self.cfg.publish_batch) + fresh
        done_frames: set[int] = set()
        done_events: set[int] = set()
        refusal: Exception | None = None
        short: ReplicasShortError | None = None
        try:
            frames, objects = await self._prepare(client, frames, moved)
            to_send = [s for s in frames if not s.duplicate]
            batch = Batch(frames=frames, to_write=to_send, events=events)
            replies, waits = await send(
                client,
                self.cfg,
                batch,
                objects,
                ids=self._ids,
                writes=self._objects,
                clock=self._clock,
                cpu=self.metrics.stage_cpu,
            )
            self._objects.settle(objects, replies.objects)
            confirmed, fewest = confirmed_streams(self.cfg, self.metrics, client, waits, replies.waits)
            # a frame one of whose events failed stays: its entry is stored, its events go again
            refusal = self._settle_frames(frames, to_send, replies.frames, confirmed, done_frames, objects=objects)
            refusal = settle_events(self._held, self.cfg.events_stream, events, replies.events, done_events) or refusal
            for camera, cause in refused_cameras(
                self.cfg.stream_for, frames, to_send, replies.frames, objects.refused
            ).items():
                self._hold([s for s in frames if s.item.camera_id == camera], cause, moved)
            written = {s.ticket for s, r in zip(to_send, replies.frames, strict=True) if not isinstance(r, Exception)}
            self._unconfirmed = {s.ticket for s in frames if s.duplicate or s.ticket in written} - done_frames
            waiting = sum(s.ticket not in done_frames for s in frames)
            if confirmed is not None and refusal is None and waiting:
                short = ReplicasShortError(
                    f"{waiting} entries in Redis, confirmed by {fewest} of {self.cfg.min_replicas} replicas"
                    f" within {self.cfg.wait_timeout_ms} ms"
                )
        finally:
            in_backlog = {s.ticket for s in peeked}
            self._count_drops(self._frames.settle((done_frames | moved) & in_backlog))
            self._count_drops(self._held.settle(done_frames))
            self._events.settle(done_events)
            self._update_gauges()
        if refusal is not None:
            if is_transient(refusal):  # a node went away mid-pipeline (cluster): an outage
                raise refusal
            raise SinkError(str(refusal)) from refusal
        if short is not None:
            raise short

    async def _prepare(
        self, client: RedisClient, frames: list[Slot[FrameResult]], moved: set[int]
    ) -> tuple[list[Slot[FrameResult]], ObjectBatch]:
        """Resolve the frames' IDs and plan their object events; a camera whose stream key Redis
        refuses while they are read is held apart (`moved`) and the rest go on without it."""
        while True:
            try:
                await self._ids.resolve(client, frames, self._unconfirmed)
                return frames, await self._objects.plan(client, frames)
            except StreamRefusedError as refused:
                cameras = {c for c in {s.item.camera_id for s in frames} if refused.stream in self._streams(c)}
                if not cameras:
                    raise
                self._hold([s for s in frames if s.item.camera_id in cameras], refused, moved)
                frames = [s for s in frames if s.item.camera_id not in cameras]

    def _hold(self, slots: list[Slot[FrameResult]], refused: StreamRefusedError, moved: set[int]) -> None:
        self._count_drops(self._held.hold(slots, refused))
        for camera in {s.item.camera_id for s in slots}:
            self.metrics.stream_refusals.labels(camera=camera, code=key_refusal(refused.cause) or "WRONGTYPE").inc()
        moved |= {s.ticket for s in slots}

    def _streams(self, camera: str) -> tuple[str, str]:
        return self.cfg.stream_for(camera), self.cfg.objects_stream_for(camera)

    def _update_gauges(self) -> None:
        self.metrics.sink_buffered.set(len(self._frames) + len(self._held))
        self._held.report(self.metrics.sink_held)

    def _settle_frames(
        self,
        batch: list[Slot[FrameResult]],
        sent: list[Slot[FrameResult]],
        replies: list[XaddReply],
        confirmed: set[str] | None,
        done: set[int],
        *,
        objects: ObjectBatch,
    ) -> Exception | None:
        refusal: Exception | None = objects.refusal
        for slot, reply in zip(sent, replies, strict=True):
            stream = self.cfg.stream_for(slot.item.camera_id)
            if isinstance(reply, Exception):
                if ID_TOO_SMALL in str(reply):
                    self._ids.forget_top(stream)  # someone else wrote: re-read the top, re-check
                elif not key_refusal(reply):
                    refusal = refusal or reply
                continue
            self._ids.written(stream, EntryId.parse(reply))
        now = self._clock.monotonic()
        for slot, reply in zip(sent, replies, strict=True):
            if not isinstance(reply, Exception) and slot.ticket not in objects.failed:
                self._published(slot, confirmed, done, now)
        for slot in batch:
            # written by an earlier attempt whose reply was lost or unconfirmed
            if slot.duplicate and slot.ticket not in objects.failed:
                self._published(slot, confirmed, done, None)
        return refusal

    def _published(
        self, slot: Slot[FrameResult], confirmed: set[str] | None, done: set[int], now: float | None
    ) -> None:
        camera = slot.item.camera_id
        needed = {self.cfg.stream_for(camera)} | self._objects.streams([slot])
        if confirmed is not None and not needed <= confirmed:
            return  # in Redis, not yet on enough replicas: stays buffered
        done.add(slot.ticket)
        self.metrics.entries_published.labels(camera=camera).inc()
        if now is not None or confirmed is not None:
            latency_s = max(0.0, (now or self._clock.monotonic()) - slot.item.captured_mono)
            self.metrics.latency_seconds.labels(camera=camera).observe(latency_s)

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
        self._unconfirmed.clear()  # a new connection looks them up again
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


__all__ = ["RedisSink"]
