"""Entry IDs for exactly-once writes to Redis Streams.

IDs are explicit, `<captured_ms>-<n>`, strictly increasing per stream (same ms or the clock
going back: previous ID + 1); an ID, once given to an entry, sticks to it. Before writing to a
stream whose top is unknown (first write, after a reconnect, after an ID conflict) its
last-generated-id is read (XINFO STREAM). An entry whose ID is not above it may already be there
(a retry whose reply was lost, a replay): if the entry stored at that ID is the same camera +
seq + captured_ms it is a duplicate (counted as published, not written); otherwise it is
renumbered above the top. Order per camera holds as long as one sink writes the stream.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet

from redis.exceptions import ResponseError

from daemon.core.frames import FrameResult
from daemon.publish.redis_conn import RedisClient, SinkError, as_text, is_transient
from daemon.publish.schema import EntryId, next_entry_id, same_frame
from daemon.publish.sink.backlog import Slot
from daemon.publish.sink.faults import StreamRefusedError, stream_fault

ID_TOO_SMALL = "equal or smaller than the target stream top item"
"""Redis' refusal of an explicit ID at or below the stream's top."""


class StreamIds:
    """What one sink knows about its streams' IDs; event-loop only (not thread-safe)."""

    def __init__(self, stream_for: Callable[[str], str]) -> None:
        self._stream_for = stream_for
        self._top: dict[str, EntryId] = {}  # last-generated-id per stream, as known
        self._last: dict[str, EntryId] = {}  # highest ID given to an entry per stream

    def forget_tops(self) -> None:
        """Writes may have landed unseen (lost replies, another writer): re-read every top."""
        self._top.clear()

    def forget_top(self, stream: str) -> None:
        self._top.pop(stream, None)

    def top(self, stream: str) -> EntryId | None:
        """The stream's last-generated-id as known (None: to be read again)."""
        return self._top.get(stream)

    def written(self, stream: str, entry_id: EntryId) -> None:
        """Redis confirmed `entry_id` in `stream`."""
        self._top[stream] = max(self._top.get(stream, entry_id), entry_id)

    def assign_spill_id(self, slot: Slot[FrameResult]) -> None:
        """Give an entry about to be spooled its ID now, so every replay writes the same one."""
        stream = self._stream_for(slot.item.camera_id)
        if slot.entry_id is None:
            slot.entry_id = next_entry_id(self._last.get(stream), slot.item.captured_ms)
        self._advance(stream, slot.entry_id)

    async def resolve(
        self, client: RedisClient, frames: list[Slot[FrameResult]], stored: AbstractSet[int] = frozenset()
    ) -> None:
        """Give every slot an ID above the stream's top, or mark it a duplicate of a stored entry.

        `stored`: tickets of slots this connection wrote at their `entry_id` (not yet confirmed
        by replicas): duplicates without a lookup."""
        streams = {self._stream_for(s.item.camera_id) for s in frames}
        await self.load_tops(client, sorted(streams))
        tentative: list[EntryId] = []
        chain: dict[str, EntryId | None] = {s: self._last.get(s) for s in streams}
        for slot in frames:
            stream = self._stream_for(slot.item.camera_id)
            entry_id = slot.entry_id or next_entry_id(chain[stream], slot.item.captured_ms)
            prev = chain[stream]
            chain[stream] = entry_id if prev is None else max(prev, entry_id)
            tentative.append(entry_id)
        while missing := sorted(s for s in streams if s not in self._top):  # forgotten meanwhile (another batch)
            await self.load_tops(client, missing)
        tops = {s: self._top[s] for s in streams}
        suspects = [
            (slot, eid)
            for slot, eid in zip(frames, tentative, strict=True)
            if eid <= tops[self._stream_for(slot.item.camera_id)] and slot.ticket not in stored
        ]
        looked_up = await self._lookup(client, suspects)
        floor = dict(tops)  # what the next new entry must exceed
        for slot, eid in zip(frames, tentative, strict=True):
            stream = self._stream_for(slot.item.camera_id)
            found = looked_up.get(slot.ticket)
            slot.duplicate = slot.ticket in stored or (found is not None and same_frame(found, slot.item))
            if slot.duplicate:
                slot.entry_id = eid
            else:
                new_id = eid if eid > floor[stream] else next_entry_id(floor[stream], slot.item.captured_ms)
                slot.entry_id = floor[stream] = new_id
            self._advance(stream, slot.entry_id)  # the chain continues from here, so a replay keeps matching

    def _advance(self, stream: str, entry_id: EntryId) -> None:
        last = self._last.get(stream)
        self._last[stream] = entry_id if last is None else max(last, entry_id)

    async def load_tops(self, client: RedisClient, streams: list[str]) -> None:
        """Read the tops of those `streams` whose top is not known (XINFO STREAM)."""
        streams = [s for s in streams if s not in self._top]
        if not streams:
            return
        async with client.pipeline(transaction=False) as pipe:
            for stream in streams:
                pipe.xinfo_stream(stream)
            replies = await pipe.execute(raise_on_error=False)
        for stream, reply in zip(streams, replies, strict=True):
            if isinstance(reply, ResponseError) and "no such key" in str(reply):
                self._top[stream] = EntryId(0, 0)
            elif isinstance(reply, Exception) and stream_fault(reply):
                raise StreamRefusedError(stream, reply) from reply
            elif isinstance(reply, Exception) and is_transient(reply):
                raise reply  # a node went away mid-pipeline: the sink decides how wide (faults.isolate)
            elif isinstance(reply, Exception):
                raise SinkError(str(reply)) from reply
            else:
                self._top[stream] = EntryId.parse(reply["last-generated-id"])

    async def _lookup(
        self, client: RedisClient, suspects: list[tuple[Slot[FrameResult], EntryId]]
    ) -> dict[int, dict[str, str]]:
        if not suspects:
            return {}
        async with client.pipeline(transaction=False) as pipe:
            for slot, eid in suspects:
                pipe.xrange(self._stream_for(slot.item.camera_id), min=str(eid), max=str(eid))
            replies = await pipe.execute(raise_on_error=False)
        found: dict[int, dict[str, str]] = {}
        for (slot, _), reply in zip(suspects, replies, strict=True):
            if isinstance(reply, Exception) and stream_fault(reply):
                raise StreamRefusedError(self._stream_for(slot.item.camera_id), reply) from reply
            if isinstance(reply, Exception) and is_transient(reply):
                raise reply
            if isinstance(reply, Exception):
                raise SinkError(str(reply)) from reply
            if reply:
                found[slot.ticket] = as_text(reply[0][1])
        return found


__all__ = ["ID_TOO_SMALL", "StreamIds"]
