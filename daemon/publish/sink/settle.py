"""Reading a batch's frame replies: what is stored, what is confirmed, what counts as published.

An entry is done (leaves the buffer) once Redis took it (or it was found already stored) and every
object event of its frame is stored, and, with `min_replicas`, once the WAITs confirmed both its
streams. Its publish latency (`beltsight_latency_seconds`) is observed then.
"""

from __future__ import annotations

from daemon.config.redis import RedisConfig
from daemon.core.clock import Clock
from daemon.core.frames import FrameResult
from daemon.core.metrics import Metrics
from daemon.publish.schema import EntryId
from daemon.publish.sink.backlog import Slot
from daemon.publish.sink.faults import stream_fault
from daemon.publish.sink.objects import ObjectBatch, ObjectWrites
from daemon.publish.sink.pipeline import XaddReply
from daemon.publish.sink.stream_ids import ID_TOO_SMALL, StreamIds


class Settle:
    """The sink's settling of frame replies; event-loop only."""

    def __init__(self, cfg: RedisConfig, metrics: Metrics, ids: StreamIds, writes: ObjectWrites, clock: Clock) -> None:
        self.cfg = cfg
        self.metrics = metrics
        self._ids = ids
        self._writes = writes
        self._clock = clock

    def frames(
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
                elif not stream_fault(reply):
                    refusal = refusal or reply
                continue
            self._ids.written(stream, EntryId.parse(reply))
        now = self._clock.monotonic()
        for slot, reply in zip(sent, replies, strict=True):
            if not isinstance(reply, Exception) and slot.ticket not in objects.failed:
                self.published(slot, confirmed, done, now)
        for slot in batch:
            # written by an earlier attempt whose reply was lost or unconfirmed
            if slot.duplicate and slot.ticket not in objects.failed:
                self.published(slot, confirmed, done, None)
        return refusal

    def published(self, slot: Slot[FrameResult], confirmed: set[str] | None, done: set[int], now: float | None) -> None:
        camera = slot.item.camera_id
        needed = {self.cfg.stream_for(camera)} | self._writes.streams([slot])
        if confirmed is not None and not needed <= confirmed:
            return  # in Redis, not yet on enough replicas: stays buffered
        done.add(slot.ticket)
        self.metrics.entries_published.labels(camera=camera).inc()
        if now is not None or confirmed is not None:
            latency_s = max(0.0, (now or self._clock.monotonic()) - slot.item.captured_mono)
            self.metrics.latency_seconds.labels(camera=camera).observe(latency_s)


__all__ = ["Settle"]
