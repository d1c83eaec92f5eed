"""The objects stream's writes: each frame's tracking events, exactly once, beside its entry.

A frame's object events (`FrameResult.objects`) travel with the frame through the sink's buffer
and spool, and are written in the same pipeline, just before the frame's own entry, to the
camera's objects stream (`[redis] objects_stream`). Their IDs derive from the frame entry's ID,
`<ms>-<seq * 65536 + i + 1>` for the i-th event, so they strictly increase per stream as the frame
IDs do, and a replay (lost reply, restart from the spool) writes the same IDs. Before writing, the
objects stream's top is known (XINFO, as for the detection streams): an event at or below it is
already stored and is skipped, so nothing is written twice even when a pipeline was cut between a
frame's events and its entry. A frame leaves the buffer only once its entry and all its events are
stored (and, with `min_replicas`, confirmed on both streams).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from daemon.core.frames import FrameResult
from daemon.publish.schema import EntryId
from daemon.publish.sink.backlog import Slot
from daemon.publish.sink.faults import StreamRefusedError, stream_fault
from daemon.publish.sink.stream_ids import ID_TOO_SMALL, StreamIds

EVENTS_PER_FRAME = 65_536
"""IDs reserved per frame entry; a frame carries far fewer events (a few per tracked part)."""


def object_entry_id(frame_id: EntryId, index: int) -> EntryId:
    """The ID of a frame's `index`-th object event."""
    if not 0 <= index < EVENTS_PER_FRAME - 1:
        raise ValueError(f"a frame carries at most {EVENTS_PER_FRAME - 1} object events")
    return EntryId(frame_id.ms, frame_id.seq * EVENTS_PER_FRAME + index + 1)


@dataclass(slots=True)
class ObjectBatch:
    """The object XADDs of one pipeline, in order, and which frames they belong to."""

    writes: list[tuple[int, str, EntryId, dict[str, str]]] = field(default_factory=list)
    """(frame ticket, stream, entry ID, fields)."""
    failed: set[int] = field(default_factory=set)
    """Tickets of frames one of whose events was not stored this time."""
    refusal: Exception | None = None
    """The first refusal of the whole server among the replies."""
    refused: dict[int, StreamRefusedError] = field(default_factory=dict)
    """Frame ticket -> the fault of its objects stream's key or slot (`daemon.publish.sink.faults.stream_fault`)."""

    @property
    def streams(self) -> set[str]:
        return {stream for _, stream, _, _ in self.writes}


class ObjectWrites:
    """What the sink writes to the objects streams; event-loop only."""

    def __init__(self, stream_for: Callable[[str], str], ids: StreamIds) -> None:
        self._stream_for = stream_for
        self._ids = ids

    def streams(self, frames: list[Slot[FrameResult]]) -> set[str]:
        """The objects streams that `frames` have events for."""
        return {self._stream_for(s.item.camera_id) for s in frames if s.item.objects}

    async def plan(self, client: Any, frames: list[Slot[FrameResult]]) -> ObjectBatch:
        """The events of `frames` (their entry IDs resolved) that the objects streams lack."""
        batch = ObjectBatch()
        streams = self.streams(frames)
        if not streams:
            return batch
        await self._ids.load_tops(client, sorted(streams))
        for slot in frames:
            if not slot.item.objects or slot.entry_id is None:
                continue
            stream = self._stream_for(slot.item.camera_id)
            top = self._ids.top(stream) or EntryId(0, 0)
            for index, event in enumerate(slot.item.objects):
                entry_id = object_entry_id(slot.entry_id, index)
                if entry_id > top:
                    batch.writes.append((slot.ticket, stream, entry_id, event.to_fields()))
        return batch

    def queue(self, pipe: Any, batch: ObjectBatch, maxlen: int) -> None:
        for _, stream, entry_id, fields in batch.writes:
            pipe.xadd(stream, fields, id=str(entry_id), maxlen=maxlen, approximate=True)

    def settle(self, batch: ObjectBatch, replies: list[str | Exception]) -> None:
        """Record what the replies say: tops advanced, frames whose events failed, the refusal."""
        for (ticket, stream, _entry_id, _), reply in zip(batch.writes, replies, strict=True):
            if isinstance(reply, Exception):
                batch.failed.add(ticket)
                if ID_TOO_SMALL in str(reply):
                    self._ids.forget_top(stream)  # the top moved unseen: re-read it, skip what is there
                elif stream_fault(reply):
                    batch.refused.setdefault(ticket, StreamRefusedError(stream, reply))
                else:
                    batch.refusal = batch.refusal or reply
                continue
            self._ids.written(stream, EntryId.parse(reply))


__all__ = ["EVENTS_PER_FRAME", "ObjectBatch", "ObjectWrites", "object_entry_id"]
