"""Writing one batch: resolve its IDs, plan its object events, send the pipeline, read the replies.

`BatchWriter.write` is one pipeline of the sink (`daemon.publish.sink.pipeline.send`); what a reply
says about one stream key or its Cluster slot (`daemon.publish.sink.faults.stream_fault`) holds
only the cameras whose streams those are (`daemon.publish.sink.held`), and after a MOVED, ASK or
CLUSTERDOWN the slot map is read again. `BatchWriter.isolate` decides a pipeline that failed as a
whole: on a Cluster where some masters still answer, only what lives on the others is held
(NODE_DOWN). Everything else (a refusal of the whole server, a fault of the connection, replicas
short) is raised for the sink to back off as a whole.
"""

from __future__ import annotations

from collections.abc import Callable

from daemon.config.redis import RedisConfig
from daemon.core.clock import Clock
from daemon.core.frames import FrameResult, StatusEvent
from daemon.core.metrics import Metrics
from daemon.publish.redis_conn import RedisClient, ReplicasShortError, SinkError, is_transient
from daemon.publish.sink.backlog import Drops, Slot
from daemon.publish.sink.faults import REDIRECTS, StreamRefusedError, refresh_slots, stream_fault
from daemon.publish.sink.faults import isolate as isolate_faulty
from daemon.publish.sink.held import HeldStreams, refused_cameras, settle_events
from daemon.publish.sink.objects import ObjectBatch, ObjectWrites
from daemon.publish.sink.pipeline import Batch, confirmed_streams, send
from daemon.publish.sink.settle import Settle
from daemon.publish.sink.stream_ids import StreamIds


class BatchWriter:
    """The sink's batches; event-loop only. `unconfirmed`: tickets this client wrote whose
    replicas have not confirmed them yet (min_replicas), found stored without a lookup."""

    def __init__(
        self,
        cfg: RedisConfig,
        metrics: Metrics,
        *,
        ids: StreamIds,
        writes: ObjectWrites,
        settle: Settle,
        held: HeldStreams,
        count_drops: Callable[[Drops], None],
        clock: Clock,
    ) -> None:
        self.cfg = cfg
        self.metrics = metrics
        self._ids = ids
        self._writes = writes
        self._settle = settle
        self._held = held
        self._count_drops = count_drops
        self._clock = clock
        self.unconfirmed: set[int] = set()

    async def isolate(
        self, client: RedisClient, exc: BaseException, frames: list[Slot[FrameResult]], events: list[Slot[StatusEvent]]
    ) -> bool:
        """Hold what lives on the Cluster masters that do not answer; False: the fault is the connection's."""
        if not is_transient(exc):
            return False
        isolated = await isolate_faulty(
            client, {s.item.camera_id for s in frames}, self._streams, self.cfg.events_stream if events else None
        )
        if isolated is None:
            return False
        for camera in {s.item.camera_id for s in frames}:  # writes to the masters that answered may have landed unseen
            for stream in self._streams(camera):
                self._ids.forget_top(stream)
        for camera, (key, code) in isolated.cameras.items():
            refused = StreamRefusedError(key, exc, code=code)
            self.hold([s for s in frames if s.item.camera_id == camera], refused, set())
        if isolated.events is not None:
            self._held.events_failed(self.cfg.events_stream, exc, isolated.events)
        return True

    async def write(
        self,
        client: RedisClient,
        frames: list[Slot[FrameResult]],
        events: list[Slot[StatusEvent]],
        *,
        moved: set[int],
        done_frames: set[int],
        done_events: set[int],
    ) -> None:
        refusal: Exception | None = None
        frames, objects = await self._prepare(client, frames, moved)
        to_send = [s for s in frames if not s.duplicate]
        batch = Batch(frames=frames, to_write=to_send, events=events)
        replies, waits = await send(
            client,
            self.cfg,
            batch,
            objects,
            ids=self._ids,
            writes=self._writes,
            clock=self._clock,
            cpu=self.metrics.stage_cpu,
        )
        self._writes.settle(objects, replies.objects)
        confirmed, fewest = confirmed_streams(self.cfg, self.metrics, client, waits, replies.waits)
        # a frame one of whose events failed stays: its entry is stored, its events go again
        refusal = self._settle.frames(frames, to_send, replies.frames, confirmed, done_frames, objects=objects)
        refusal = settle_events(self._held, self.cfg.events_stream, events, replies.events, done_events) or refusal
        redirected = False
        for camera, cause in refused_cameras(
            self.cfg.stream_for, frames, to_send, replies.frames, objects.refused
        ).items():
            self.hold([s for s in frames if s.item.camera_id == camera], cause, moved)
            redirected |= cause.code in REDIRECTS
        redirected |= any(isinstance(r, Exception) and stream_fault(r) in REDIRECTS for r in replies.events)
        if redirected:
            await refresh_slots(client)
        written = {s.ticket for s, r in zip(to_send, replies.frames, strict=True) if not isinstance(r, Exception)}
        tickets = {s.ticket for s in frames}
        unconfirmed = {s.ticket for s in frames if s.duplicate or s.ticket in written} - done_frames
        self.unconfirmed = (self.unconfirmed - tickets) | unconfirmed
        waiting = sum(s.ticket not in done_frames for s in frames)
        if refusal is not None:
            if is_transient(refusal):  # a node went away mid-pipeline (cluster): an outage, or a node's fault
                raise refusal
            raise SinkError(str(refusal)) from refusal
        if confirmed is not None and waiting:
            raise ReplicasShortError(
                f"{waiting} entries in Redis, confirmed by {fewest} of {self.cfg.min_replicas} replicas"
                f" within {self.cfg.wait_timeout_ms} ms"
            )

    async def _prepare(
        self, client: RedisClient, frames: list[Slot[FrameResult]], moved: set[int]
    ) -> tuple[list[Slot[FrameResult]], ObjectBatch]:
        """Resolve the frames' IDs and plan their object events; a camera whose stream key Redis
        refuses while they are read is held apart (`moved`) and the rest go on without it."""
        while True:
            try:
                await self._ids.resolve(client, frames, self.unconfirmed)
                return frames, await self._writes.plan(client, frames)
            except StreamRefusedError as refused:
                cameras = {c for c in {s.item.camera_id for s in frames} if refused.stream in self._streams(c)}
                if not cameras:
                    raise
                self.hold([s for s in frames if s.item.camera_id in cameras], refused, moved)
                frames = [s for s in frames if s.item.camera_id not in cameras]

    def hold(self, slots: list[Slot[FrameResult]], refused: StreamRefusedError, moved: set[int]) -> None:
        self._count_drops(self._held.hold(slots, refused))
        for camera in {s.item.camera_id for s in slots}:
            self.metrics.stream_refusals.labels(camera=camera, code=refused.code).inc()
        moved |= {s.ticket for s in slots}

    def _streams(self, camera: str) -> tuple[str, str]:
        return self.cfg.stream_for(camera), self.cfg.objects_stream_for(camera)


__all__ = ["BatchWriter"]
