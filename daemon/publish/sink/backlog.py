"""Accepted-but-unpublished stream entries: a bounded memory buffer with an optional disk spool.

`Buffer` holds entries in acceptance order with the ones being written marked in flight;
`Backlog` puts the disk spool (`daemon.publish.spool`) ahead of it, so that entries Redis has not
taken within `spool_after_s`, or that memory cannot hold, go to disk instead of waiting in memory
or being dropped, and are published first on reconnect. The spool comes in already open (`attach`:
`daemon.publish.sink.spools` opens it when the sink opens).
"""

from __future__ import annotations

import errno
import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import structlog

from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.core.drop_reasons import DropReason
from daemon.core.frames import FrameResult
from daemon.core.ratelimit import RateLimited
from daemon.publish.schema import EntryId
from daemon.publish.spool.record import SpoolRecord
from daemon.publish.spool.store import NO_SPACE, Spool

log = structlog.get_logger("beltsight.sink")

T = TypeVar("T")
SPOOL_ERROR_LOG_INTERVAL_S = 5.0


@dataclass(slots=True)
class Slot(Generic[T]):
    """A buffered item; `entry_id` sticks once assigned so a retry re-sends the same ID."""

    ticket: int
    item: T
    at: float = 0.0  # when it was accepted (the buffer's clock)
    entry_id: EntryId | None = None
    duplicate: bool = False


class Buffer(Generic[T]):
    """Bounded FIFO of items not yet in Redis (the seam where a disk spool will slot in).

    Policy when full: drop the oldest item that is not being written right now (if every
    item is in flight, the incoming one) and hand it back to the caller to count.
    `peek(n)` marks the first n items in flight; `settle(done)` ends the flight and removes
    the written ones. Items that were not written stay at the front, in order.
    """

    def __init__(self, capacity: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = capacity
        self._clock = clock
        self._slots: deque[Slot[T]] = deque()
        self._in_flight = 0
        self._next_ticket = 0

    def __len__(self) -> int:
        return len(self._slots)

    def push(self, item: T) -> T | None:
        slot = Slot(self._next_ticket, item, self._clock())
        self._next_ticket += 1
        if len(self._slots) < self.capacity:
            self._slots.append(slot)
            return None
        if self._in_flight >= len(self._slots):
            return item
        dropped = self._slots[self._in_flight]
        del self._slots[self._in_flight]
        self._slots.append(slot)
        return dropped.item

    def peek(self, n: int) -> list[Slot[T]]:
        batch = [self._slots[i] for i in range(min(n, len(self._slots)))]
        self._in_flight = len(batch)
        return batch

    def settle(self, done_tickets: set[int]) -> None:
        keep = [self._slots.popleft() for _ in range(self._in_flight)]
        self._slots.extendleft(reversed([s for s in keep if s.ticket not in done_tickets]))
        self._in_flight = 0

    def drain_all(self) -> list[T]:
        return [s.item for s in self.take_all()]

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def add(self, item: T) -> None:
        """Append even beyond `capacity` (the caller enforces its own bound)."""
        self._slots.append(Slot(self._next_ticket, item, self._clock()))
        self._next_ticket += 1

    def accepted_before(self, cutoff: float) -> int:
        """How many items from the front were accepted at or before `cutoff`."""
        n = 0
        for slot in self._slots:
            if slot.at > cutoff:
                break
            n += 1
        return n

    def take_oldest(self, n: int) -> list[Slot[T]]:
        """Remove and return the first n slots; only between writes (nothing in flight)."""
        assert self._in_flight == 0, "take_oldest() during a write"
        return [self._slots.popleft() for _ in range(min(n, len(self._slots)))]

    def drop_oldest_idle(self) -> T | None:
        """Remove the oldest item that is not being written, if any."""
        if self._in_flight >= len(self._slots):
            return None
        dropped = self._slots[self._in_flight]
        del self._slots[self._in_flight]
        return dropped.item

    def restore(self, slots: list[Slot[T]]) -> None:
        """Put slots taken by `take_oldest` back at the front, in order."""
        self._slots.extendleft(reversed(slots))

    def take_all(self) -> list[Slot[T]]:
        slots = list(self._slots)
        self._slots.clear()
        self._in_flight = 0
        return slots


Drops = dict[tuple[str, DropReason], int]
"""Entries dropped, per (camera, reason): `buffer_full` (memory) or `spool_full` (the spool's cap,
or a disk that takes no more)."""
BUFFER_FULL: DropReason = "buffer_full"
SPOOL_FULL: DropReason = "spool_full"


class Backlog:
    """Frame entries not yet in Redis: an optional disk spool (oldest) ahead of memory (newest).

    Without a spool it is the memory `Buffer` and its drop-oldest policy. With one:
    - Spill: entries go to the spool, with their stream IDs given now (`assign_id`), when
      memory holds more than `capacity` (a chunk of about capacity/4, at most 256, so one fsync
      covers many), and when the oldest has waited `spool_after_s` (those waiting half of that
      go with it: one group commit per half period). Memory is the fast path: an entry Redis takes
      within `spool_after_s` never touches the disk. Entries being written are never spilled
      (that could reorder them): memory is written only while the spool is empty, and during such
      a write (bounded by the socket timeout) memory may grow to 2 x capacity; beyond that the
      oldest entry not in flight is dropped (`buffer_full`). `tick()` runs the checks when no
      entry arrives (the sink calls it while it backs off).
    - Full spool: if the spool cannot be written (a full disk, an I/O error), memory keeps
      `capacity` entries and drops the oldest (`spool_full`), and the spill is tried again every
      `spool_after_s`; on a full disk (`spool_disk_full`, logged once) each try is one entry, a
      probe, so what the spool holds only in memory stays small, until one reaches the disk
      (`spool_disk_ok`). Between writes, while the spool is over its cap, its oldest records are
      dropped (`spool_full`). `push`, `settle` and `tick` return drops for the caller to count.
    - Order: batches come from the spool while it holds anything, then from memory;
      everything in the spool is older than everything in memory, so each camera keeps order.
    - An entry whose write fails for a reason other than its own key (a key's refusal takes its
      camera out of the backlog: `daemon.publish.sink.held`) holds the spool back behind it, like
      the memory buffer does: at most 4 batches are read ahead of it, the ones written meanwhile
      are remembered and committed once it goes through.
    """

    def __init__(
        self,
        capacity: int,
        spool: Spool | None,
        assign_id: Callable[[Slot[FrameResult]], None],
        *,
        spool_after_s: float = 1.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.capacity = capacity
        self.memory: Buffer[FrameResult] = Buffer(capacity, clock.monotonic)
        self.spool = spool
        self._assign_id = assign_id
        self._clock = clock.monotonic
        self._spool_after_s = spool_after_s
        # read from the spool, not committed; kept between batches only when some were written
        # after one that failed, or renumbered (what was learnt exists only here)
        self._head: deque[Slot[FrameResult]] = deque()
        self._head_ids: dict[int, EntryId] = {}  # ticket -> the ID it was spooled with
        self._head_done: set[int] = set()
        self._tickets = itertools.count(-1, -1)  # spool slots: negative, never a memory ticket
        self._from_spool = False  # the batch in flight came from the spool
        self._spill_chunk = max(1, min(capacity // 4, 256))
        self._spill_retry_at = float("-inf")  # after a failed spill, or a probe of a full disk: not before this
        self._disk_was_full = False
        self._spool_errors = RateLimited(SPOOL_ERROR_LOG_INTERVAL_S, clock)

    def __len__(self) -> int:
        return len(self.memory) + self.spooled

    @property
    def spooled(self) -> int:
        return len(self.spool) if self.spool is not None else 0

    def attach(self, spool: Spool) -> None:
        """Put `spool` (open, what a previous run left in it recovered) ahead of memory: its entries
        are older than any accepted since. Once, before the first write."""
        if self.spool is not None or self.memory.in_flight:
            raise RuntimeError("a spool is attached once, before the first write")
        self.spool = spool

    def spooled_results(self, chunk: int = 256) -> list[FrameResult]:
        """Every result in the spool, oldest first, read without consuming it (startup only: the
        tracking stage resumes past the events that are not yet in Redis)."""
        if self.spool is None or self._head:
            return []
        out: list[FrameResult] = []
        try:
            while len(out) < len(self.spool):
                records = self.spool.read(chunk)
                if not records:
                    break
                out += [r.result for r in records]
        finally:
            self.spool.rewind()
        return out

    def push(self, item: FrameResult) -> Drops:
        if self.spool is None:
            dropped = self.memory.push(item)
            return {} if dropped is None else {(dropped.camera_id, BUFFER_FULL): 1}
        self.memory.add(item)
        return self._enforce(self.spool)

    def tick(self) -> Drops:
        """The checks `push` runs, with no new entry: what has waited `spool_after_s` goes to disk."""
        return {} if self.spool is None else self._enforce(self.spool)

    def peek(self, n: int) -> list[Slot[FrameResult]]:
        spool = self.spool
        if spool is None or not (self._head or spool.unread):
            self._from_spool = False
            return self.memory.peek(n)
        pending = [s for s in self._head if s.ticket not in self._head_done]
        room = n - len(pending) if len(self._head) < 4 * n else 0
        for record in spool.read(max(0, room)):
            slot = Slot(next(self._tickets), record.result, entry_id=record.entry_id)
            self._head.append(slot)
            self._head_ids[slot.ticket] = record.entry_id
            pending.append(slot)
        self._from_spool = True
        return pending[:n]

    def settle(self, done_tickets: set[int]) -> Drops:
        if self.spool is None:
            self.memory.settle(done_tickets)
            return {}
        if not self._from_spool:
            self.memory.settle(done_tickets)
            return self._enforce(self.spool)
        self._from_spool = False
        self._head_done |= done_tickets
        published = 0
        while self._head and self._head[0].ticket in self._head_done:
            ticket = self._head.popleft().ticket
            self._head_done.discard(ticket)
            del self._head_ids[ticket]
            published += 1
        self.spool.commit(published)
        if not self._head_done and all(s.entry_id == self._head_ids[s.ticket] for s in self._head):
            self._forget_head()  # nothing learnt about them: read them again next time
        return self._enforce(self.spool)

    def _forget_head(self) -> None:
        self._head.clear()
        self._head_ids.clear()
        self._head_done.clear()
        if self.spool is not None:
            self.spool.rewind()

    def _enforce(self, spool: Spool) -> Drops:
        drops: Drops = {}
        spool.poll()
        now = self._clock()
        if self._disk_was_full and not spool.disk_full:
            self._spill_retry_at = float("-inf")  # space is back: spill at once
        self._disk_was_full = full = spool.disk_full
        if self.memory.in_flight == 0 and now >= self._spill_retry_at:
            over = len(self.memory) - self.capacity
            n = over + self._spill_chunk - 1 if over > 0 else 0
            if self.memory.accepted_before(now - self._spool_after_s):  # the oldest waited too long
                n = max(n, self.memory.accepted_before(now - self._spool_after_s / 2))
            if n and full:  # one entry probes whether space came back; the rest waits in memory
                n, self._spill_retry_at = 1, now + self._spool_after_s
            if n:
                self._spill(spool, n, now)
        failing = full or now < self._spill_retry_at
        bound, reason = (self.capacity, SPOOL_FULL) if failing else (2 * self.capacity, BUFFER_FULL)
        while len(self.memory) > bound and self._drop_one(drops, reason):
            pass
        if self._head and not self._from_spool and spool.size_bytes > spool.max_bytes:
            self._forget_head()  # an entry stuck at the head must not block the cap
        if not self._head and not self._from_spool:
            _add(drops, spool.trim(), SPOOL_FULL)
        return drops

    def _spill(self, spool: Spool, n: int, now: float) -> None:
        """Move the oldest n entries to the spool; kept in memory (retried later) when it cannot take them."""
        slots = self.memory.take_oldest(n)
        for slot in slots:
            self._assign_id(slot)
        try:
            spool.append([_spool_record(s) for s in slots])
        except OSError as exc:
            self.memory.restore(slots)
            self._spill_retry_at = now + self._spool_after_s
            quiet = exc.errno in NO_SPACE or (exc.errno == errno.EAGAIN and spool.disk_full)
            if not quiet and self._spool_errors.allow() is not None:
                log.error("spool_write_failed", directory=str(spool.directory), reason=str(exc))

    def _drop_one(self, drops: Drops, reason: DropReason) -> bool:
        dropped = self.memory.drop_oldest_idle()
        if dropped is None:  # everything is in flight: settle() enforces the bound again
            return False
        key = (dropped.camera_id, reason)
        drops[key] = drops.get(key, 0) + 1
        return True

    def shut(self) -> tuple[int, Drops, list[FrameResult]]:
        """Spill memory to the spool and close it: (spilled, dropped over the cap, not spooled)."""
        slots = self.memory.take_all()
        spool, self.spool = self.spool, None
        if spool is None:
            return 0, {}, [s.item for s in slots]
        try:
            self._forget_head()
            for slot in slots:
                self._assign_id(slot)
            spool.append([_spool_record(s) for s in slots])
            spool.flush()  # on disk before the process ends (blocks: shutdown only)
            drops: Drops = {}
            _add(drops, spool.trim(), SPOOL_FULL)
            return len(slots), drops, []
        except OSError as exc:
            log.error("spool_write_failed", directory=str(spool.directory), reason=str(exc))
            return 0, {}, [s.item for s in slots]
        finally:
            spool.close()


def _add(drops: Drops, per_camera: dict[str, int], reason: DropReason) -> None:
    for camera, n in per_camera.items():
        drops[(camera, reason)] = drops.get((camera, reason), 0) + n


def _spool_record(slot: Slot[FrameResult]) -> SpoolRecord:
    if slot.entry_id is None:
        raise ValueError("an entry must have its stream ID before it is spooled")
    return SpoolRecord(slot.item, slot.entry_id)
