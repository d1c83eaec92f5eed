"""One publishing pipeline of the sink: the XADDs of a batch and the WAITs that confirm them.

`send` queues, in one pipeline without MULTI, the frames' object events (`daemon.publish.sink.objects`),
the frame entries, the status events, then (with `min_replicas`) the WAITs that confirm every
stream of the batch (`daemon.publish.redis_conn.queue_waits`), and hands the replies back as
`Replies`, a field per kind of command; `confirmed_streams` reads the WAITs' replies and counts
them (`beltsight_replica_waits_total`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from daemon.config.redis import RedisConfig
from daemon.core.clock import Clock, time_ms
from daemon.core.frames import FrameResult, StatusEvent
from daemon.core.metrics import Metrics
from daemon.core.stagecpu import StageCpu
from daemon.publish.redis_conn import RedisClient, Waits, execute, queue_waits
from daemon.publish.schema import encode_entry, encode_event
from daemon.publish.sink.backlog import Slot
from daemon.publish.sink.objects import ObjectBatch, ObjectWrites
from daemon.publish.sink.stream_ids import StreamIds

XaddReply = str | Exception
"""The new entry's ID, or the error Redis (or the client: a node gone) answered instead."""


@dataclass(frozen=True, slots=True)
class Batch:
    """What one pipeline publishes."""

    frames: list[Slot[FrameResult]]
    """Every frame of the batch: written now, or found already stored (`Slot.duplicate`)."""
    to_write: list[Slot[FrameResult]]
    """The frames XADDed now, in order (those not found stored)."""
    events: list[Slot[StatusEvent]]


@dataclass(frozen=True, slots=True)
class Replies:
    """A pipeline's replies by kind of command, each list in the order its commands were queued."""

    objects: list[XaddReply] = field(default_factory=list)
    """The frames' object events (`ObjectBatch.writes`)."""
    frames: list[XaddReply] = field(default_factory=list)
    """The frame entries (`Batch.to_write`)."""
    events: list[XaddReply] = field(default_factory=list)
    """The status events (`Batch.events`)."""
    waits: list[object] = field(default_factory=list)
    """The WAITs and the XSETIDs before them (`Waits.confirmed` reads them)."""

    @classmethod
    def split(cls, replies: list[Any], *, objects: int, frames: int, events: int, waits: int) -> Replies:
        """The replies of a pipeline that queued `objects`, `frames`, `events` and `waits` commands, in that order."""
        if len(replies) != objects + frames + events + waits:
            raise ValueError(f"{len(replies)} replies for {objects + frames + events + waits} commands")
        ends = (objects, objects + frames, objects + frames + events)
        return cls(replies[: ends[0]], replies[ends[0] : ends[1]], replies[ends[1] : ends[2]], replies[ends[2] :])


async def send(
    client: RedisClient,
    cfg: RedisConfig,
    batch: Batch,
    objects: ObjectBatch,
    *,
    ids: StreamIds,
    writes: ObjectWrites,
    clock: Clock,
    cpu: StageCpu,
) -> tuple[Replies, Waits]:
    """XADD the frames' object events, the frames and the events in one pipeline (no MULTI), then
    the WAITs that confirm every stream of the batch when min_replicas is set. `cpu` records the
    encoding (entries into pipeline commands) and the round trip (`execute`, less the other
    stages the event loop ran while the replies were awaited)."""
    frames, events = batch.to_write, batch.events
    streams = {cfg.stream_for(s.item.camera_id) for s in batch.frames} | writes.streams(batch.frames)
    if not frames and not events and not objects.writes and not (streams and cfg.min_replicas):
        return Replies(), Waits(cfg.min_replicas)
    published_ms = time_ms(clock)
    async with client.pipeline(transaction=False) as pipe:
        started = cpu.encode.start()
        writes.queue(pipe, objects, cfg.maxlen)
        for slot in frames:
            pipe.xadd(
                cfg.stream_for(slot.item.camera_id),
                encode_entry(slot.item, published_ms),  # type: ignore[arg-type]
                id=str(slot.entry_id),
                maxlen=cfg.maxlen,
                approximate=True,
            )
        for ev in events:
            pipe.xadd(
                cfg.events_stream,
                encode_event(ev.item, published_ms),  # type: ignore[arg-type]
                maxlen=cfg.events_maxlen,
                approximate=True,
            )
        cpu.encode.stop(started)
        written = {cfg.stream_for(s.item.camera_id) for s in frames} | objects.streams
        written |= {cfg.events_stream} if events else set()
        tops = {s: str(top) for s in streams if (top := ids.top(s)) is not None}
        waits = queue_waits(client, pipe, streams, cfg.min_replicas, cfg.wait_timeout_ms, written=written, tops=tops)
        # a write redis-py redirects (MOVED/ASK) would land outside its WAIT: with replicas to
        # wait for, a redirect fails the batch and the next attempt re-reads the slot map
        started, mark = cpu.redis.start(), cpu.redis.mark()
        replies = await execute(client, pipe, follow_redirects=not cfg.min_replicas)
        cpu.redis.stop(started, since_mark=mark)
    split = Replies.split(
        replies, objects=len(objects.writes), frames=len(frames), events=len(events), waits=len(waits)
    )
    return split, waits


def confirmed_streams(
    cfg: RedisConfig, metrics: Metrics, client: RedisClient, waits: Waits, replies: list[object]
) -> tuple[set[str] | None, int]:
    """(streams whose writes the replicas confirmed, fewest replicas a WAIT counted);
    None: nothing to confirm (min_replicas 0)."""
    if cfg.min_replicas == 0:
        return None, 0
    if not waits:
        return set(), 0
    confirmed, fewest = waits.confirmed(client, replies)
    for wait in waits.queued:
        outcome = "confirmed" if wait.streams <= confirmed else "short"
        metrics.replica_waits.labels(outcome=outcome).inc()
    return confirmed, fewest


__all__ = ["Batch", "Replies", "XaddReply", "confirmed_streams", "send"]
