"""Per-stream isolation: a camera whose stream key (or its Cluster slot or node) fails is held
apart, the others go on.

A fault that concerns one key (`daemon.publish.sink.faults.stream_fault`: WRONGTYPE, NOPERM on a
key; in a Cluster CLUSTERDOWN, TRYAGAIN, MOVED/ASK for the key's slot; NODE_DOWN for a master that
does not answer, `faults.isolate`) holds only the cameras whose detection or objects stream it is:
their entries leave the shared backlog (memory and spool) for a hold of their own, in order, and
every later entry of the camera joins it. The camera is the unit: a frame leaves a hold only once
its entry and all its object events are stored, so each stream keeps its order; a camera's objects
may run ahead of its detections by at most the batch in flight when the refusal came, never the
other way. Each hold is tried again (its oldest entries, in a pipeline of its own beside the sink's
batches, so that a master still down delays no other camera) with capped exponential backoff; once
empty the camera is released. The events stream is held the same way (`EventsHold`).

Bounds: without a spool a hold keeps up to `capacity` entries in memory; with one its entries go
to a spool of their own, `<spool_dir>/held/<camera as hex>`, capped at a quarter of the spool's cap.
A daemon stopped while a camera is held leaves that spool (`shut` writes the hold's memory to it);
the next run, as its sink opens (`open`), holds the camera again from its oldest entry and tries it
at once, so every entry is delivered once, in order (their entry IDs stick: a replay finds what is
already stored). Beyond the bound the camera's oldest held entries are dropped, counted
`dropped{camera, stream_refused}`.
Refusals of the whole server (OOM, READONLY, MISCONF, LOADING, BUSY, auth) and faults of the whole
connection are not held here: the sink backs off as a whole.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from prometheus_client import Gauge

from daemon.core.backoff import Backoff
from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.core.drop_reasons import DropReason
from daemon.core.frames import FrameResult, StatusEvent
from daemon.core.ratelimit import RateLimited
from daemon.publish.sink.backlog import Drops, Slot
from daemon.publish.sink.faults import HINTS, EventsHold, StreamRefusedError, stream_fault
from daemon.publish.spool.record import SpoolFormatError, SpoolRecord
from daemon.publish.spool.store import Spool

log = structlog.get_logger("beltsight.sink")

STREAM_REFUSED: DropReason = "stream_refused"
"""The drop reason of a held entry beyond its hold's bound."""
HELD_LOG_INTERVAL_S = 300.0
"""A hold that lasts is logged again (with what it holds) at most this often, per key and cause."""


@dataclass(eq=False)
class Hold:
    """One held camera: the refused key and cause, its entries (spool first, then memory)."""

    camera: str
    stream: str
    code: str
    since: float
    backoff: Backoff
    spool: Spool | None = None
    memory: deque[Slot[FrameResult]] = field(default_factory=deque)
    probing: list[Slot[FrameResult]] = field(default_factory=list)
    from_spool: int = 0  # how many of `probing` were read from the spool
    retry_at: float = 0.0

    def __len__(self) -> int:
        return len(self.memory) + (len(self.spool) if self.spool is not None else 0)


class HeldStreams:
    """The holds of one sink; event-loop only."""

    def __init__(
        self,
        capacity: int,
        spool_cap_bytes: int,
        assign_id: Callable[[Slot[FrameResult]], None],
        *,
        clock: Clock = SYSTEM_CLOCK,
        backoff_s: tuple[float, float] = (0.2, 5.0),
    ) -> None:
        self.capacity = capacity
        self._root: Path | None = None  # the holds' spools' directory, once `open` found it
        self._cap_bytes = max(1, spool_cap_bytes // 4)
        self._assign_id = assign_id
        self._clock = clock
        self._backoff_s = backoff_s
        self._holds: dict[str, Hold] = {}
        # the spools of holds released in this run: their last commit (the segments' deletion) may
        # still be on the writer thread; closed (waited for) before the camera's spool is opened
        # again, and at shutdown, so the next run does not find what was delivered
        self._released: dict[str, Spool] = {}
        self._tickets = itertools.count(-(1 << 40), -1)  # never a backlog ticket
        self._lines = RateLimited(HELD_LOG_INTERVAL_S, clock)
        self._reported: set[str] = set()
        self.events = EventsHold(clock, backoff_s)

    # -- sizes ---------------------------------------------------------------------------------

    def __len__(self) -> int:
        return sum(len(h) for h in self._holds.values())

    @property
    def spooled(self) -> int:
        return sum(len(h.spool) for h in self._holds.values() if h.spool is not None)

    def report(self, gauge: Gauge) -> None:
        """Set `gauge{camera}` to each held camera's count, 0 for those released since."""
        counts = {camera: len(h) for camera, h in self._holds.items()}
        for camera in self._reported - counts.keys():
            gauge.labels(camera=camera).set(0)
        for camera, n in counts.items():
            gauge.labels(camera=camera).set(n)
        self._reported = set(counts)

    def held(self, camera: str) -> bool:
        return camera in self._holds

    def spooled_results(self) -> list[FrameResult]:
        """Every result in the holds' spools, oldest first per camera (startup only)."""
        out: list[FrameResult] = []
        for hold in self._holds.values():
            if hold.spool is not None and not hold.probing:
                out += [r.result for r in hold.spool.read(len(hold.spool))]
                hold.spool.rewind()
        return out

    # -- holding -------------------------------------------------------------------------------

    def hold(self, slots: Iterable[Slot[FrameResult]], refused: StreamRefusedError) -> Drops:
        """Hold `slots` (in order) because Redis refused `refused.stream`; their cameras are held
        from now on. Slots already held (a failed probe) stay where they are."""
        code = refused.code
        now = self._clock.monotonic()
        drops: Drops = {}
        retried: set[str] = set()
        changed: list[Hold] = []
        for slot in slots:
            camera = slot.item.camera_id
            hold = self._holds.get(camera)
            if hold is None:
                hold = self._holds[camera] = self._new_hold(camera, refused.stream, code, now)
                changed.append(hold)
            elif hold.stream != refused.stream or hold.code != code:
                hold.stream, hold.code = refused.stream, code
                changed.append(hold)
            if slot.ticket not in {s.ticket for s in hold.probing}:
                self._add(hold, slot, drops)
            elif camera not in retried:  # a failed probe: try again later
                retried.add(camera)
                hold.retry_at = now + hold.backoff.failed()
        for hold in changed:
            self._log_held(hold, refused.cause)
        return drops

    def events_failed(self, stream: str, exc: BaseException, code: str) -> None:
        """The events stream failed with `code` (its events stay in their own buffer): held apart."""
        new = self.events.failed(code)
        repeats = self._lines.allow((stream, code))
        if new or repeats is not None:
            log.error("sink_stream_held", camera=None, stream=stream, code=code, reason=str(exc), hint=HINTS[code])

    def events_written(self, stream: str) -> None:
        """An event reached the events stream: a hold of it ends."""
        code = self.events.code
        if self.events.succeeded() and code is not None:
            self._lines.reset((stream, code))
            log.info("sink_stream_released", camera=None, stream=stream, held_s=None)

    def next_due_s(self) -> float | None:
        """Seconds until the next hold not being tried is due a try (None: none)."""
        now = self._clock.monotonic()
        due = [max(0.0, h.retry_at - now) for h in self._holds.values() if not h.probing]
        events = self.events.next_due_s()
        return min([*due, events] if events is not None else due) if due or events is not None else None

    def cameras_due(self) -> bool:
        """A held camera not being tried is due a try now."""
        now = self._clock.monotonic()
        return any(h.retry_at <= now and not h.probing for h in self._holds.values())

    def divert(self, slots: list[Slot[FrameResult]]) -> tuple[list[Slot[FrameResult]], set[int], Drops]:
        """(slots of cameras not held, tickets of those now held: done for the backlog, drops)."""
        kept: list[Slot[FrameResult]] = []
        moved: set[int] = set()
        drops: Drops = {}
        for slot in slots:
            hold = self._holds.get(slot.item.camera_id)
            if hold is None:
                kept.append(slot)
            else:
                self._add(hold, slot, drops)
                moved.add(slot.ticket)
        return kept, moved, drops

    def due(self, n: int) -> list[Slot[FrameResult]]:
        """The oldest entries (up to n each) of the holds whose next try is due, marked in flight."""
        now = self._clock.monotonic()
        out: list[Slot[FrameResult]] = []
        for hold in self._holds.values():
            if hold.retry_at > now or hold.probing:
                continue
            records = hold.spool.read(n) if hold.spool is not None else []
            hold.from_spool = len(records)
            hold.probing = [Slot(next(self._tickets), r.result, entry_id=r.entry_id) for r in records]
            hold.probing += list(itertools.islice(hold.memory, n - len(records)))
            out += hold.probing
        return out

    def settle(self, done: set[int], probed: AbstractSet[int] = frozenset(), *, failed: bool = False) -> Drops:
        """End the probes of `probed` (tickets of one batch; `failed`: it failed as a whole, tried
        again after backoff): drop what was published, release the holds left empty. The holds
        another batch is trying are left alone."""
        drops: Drops = {}
        now = self._clock.monotonic()
        for camera, hold in list(self._holds.items()):
            if hold.probing and not probed.isdisjoint(s.ticket for s in hold.probing):
                published = [s.ticket in done for s in hold.probing]
                if hold.spool is not None:
                    hold.spool.commit(_prefix(published[: hold.from_spool]))
                    hold.spool.rewind()
                tickets = {s.ticket for s in hold.probing[hold.from_spool :] if s.ticket in done}
                hold.memory = deque(s for s in hold.memory if s.ticket not in tickets)
                if all(published) and hold.retry_at <= now:
                    hold.backoff.succeeded()
                elif failed and hold.retry_at <= now:
                    hold.retry_at = now + hold.backoff.failed()
                hold.probing, hold.from_spool = [], 0
                self._bound(hold, drops)  # entries that joined while it was tried
            elif hold.probing:
                continue
            if len(hold) == 0:
                self._release(camera, hold)
            elif hold.spool is not None:
                _count(drops, hold.spool.trim(), STREAM_REFUSED)
        return drops

    def shut(self) -> tuple[int, list[FrameResult]]:
        """Spool what the holds keep in memory and close their spools: (spilled, not spooled)."""
        spilled, lost = 0, []
        for spool in self._released.values():
            spool.close()
        self._released.clear()
        for hold in self._holds.values():
            slots, hold.memory = list(hold.memory), deque()
            if hold.spool is None:
                lost += [s.item for s in slots]
                continue
            try:
                hold.spool.append([_record(s) for s in slots])
                hold.spool.flush()
                spilled += len(slots)
            except OSError as exc:
                log.error("spool_write_failed", directory=str(hold.spool.directory), reason=str(exc))
                lost += [s.item for s in slots]
            hold.spool.close()
        return spilled, lost

    # -- inside --------------------------------------------------------------------------------

    def _new_hold(self, camera: str, stream: str, code: str, now: float) -> Hold:
        backoff = Backoff(*self._backoff_s, healthy_reset_s=1e9, clock=self._clock)
        hold = Hold(camera, stream, code, now, backoff, spool=self._open_spool(camera))
        hold.retry_at = now + backoff.failed()
        return hold

    def _add(self, hold: Hold, slot: Slot[FrameResult], drops: Drops) -> None:
        if hold.spool is not None and not hold.memory:
            self._assign_id(slot)
            try:
                hold.spool.append([_record(slot)])
                return
            except OSError as exc:  # kept in memory instead, after what the spool holds
                if self._lines.allow(("spool", hold.camera)) is not None:
                    log.error("spool_write_failed", directory=str(hold.spool.directory), reason=str(exc))
        hold.memory.append(slot)
        self._bound(hold, drops)

    def _bound(self, hold: Hold, drops: Drops) -> None:
        """Drop the oldest entries in memory beyond `capacity`; while some are being tried, once
        that try has ended (`settle`), so that what is dropped is always the oldest."""
        while len(hold.memory) > self.capacity and not hold.probing:
            hold.memory.popleft()
            _count(drops, {hold.camera: 1}, STREAM_REFUSED)

    def _log_held(self, hold: Hold, cause: BaseException) -> None:
        repeats = self._lines.allow((hold.stream, hold.code))
        if repeats is not None:
            log.error(
                "sink_stream_held",
                camera=hold.camera,
                stream=hold.stream,
                code=hold.code,
                reason=str(cause),
                hint=HINTS[hold.code],
                held=len(hold),
                repeats=repeats,
            )

    def _release(self, camera: str, hold: Hold) -> None:
        del self._holds[camera]
        if hold.spool is not None:
            self._released[camera] = hold.spool
        self._lines.reset((hold.stream, hold.code))
        held_s = round(self._clock.monotonic() - hold.since, 3)
        log.info("sink_stream_released", camera=camera, stream=hold.stream, held_s=held_s)

    def _open_spool(self, camera: str) -> Spool | None:
        if self._root is None:
            return None
        released = self._released.pop(camera, None)
        if released is not None:
            released.close()  # blocks for its last writes (rare: the same camera held again)
        try:
            return Spool.open(self._root / camera.encode().hex(), self._cap_bytes)
        except (SpoolFormatError, OSError) as exc:
            log.error("spool_disabled", directory=str(self._root), reason=str(exc), hint="held entries kept in memory")
            return None

    def open(self, root: Path) -> None:
        """Keep holds' spools in `root` from now on; the holds a previous run left there are held
        again, tried at once (recovered, their writer threads started: blocking, once, at start-up)."""
        self._root = root
        if not root.is_dir():
            return
        for path in sorted(root.iterdir()):
            try:
                camera = bytes.fromhex(path.name).decode()
            except ValueError:
                continue
            spool = self._open_spool(camera)
            if spool is None or len(spool) == 0:
                if spool is not None:
                    spool.close()
                continue
            backoff = Backoff(*self._backoff_s, healthy_reset_s=1e9, clock=self._clock)
            now = self._clock.monotonic()
            self._holds[camera] = Hold(camera, "", "", now, backoff, spool=spool, retry_at=now)


def refused_cameras(
    stream_for: Callable[[str], str],
    frames: list[Slot[FrameResult]],
    sent: list[Slot[FrameResult]],
    replies: list[str | Exception],
    objects_refused: dict[int, StreamRefusedError],
) -> dict[str, StreamRefusedError]:
    """The cameras one of whose stream keys refused a batch's writes (entries, or object events:
    `objects_refused`, frame ticket -> refusal)."""
    refused = dict(objects_refused)
    for slot, reply in zip(sent, replies, strict=True):
        if isinstance(reply, Exception) and stream_fault(reply):
            refused[slot.ticket] = StreamRefusedError(stream_for(slot.item.camera_id), reply)
    return {s.item.camera_id: refused[s.ticket] for s in frames if s.ticket in refused}


def settle_events(
    held: HeldStreams, stream: str, events: list[Slot[StatusEvent]], replies: list[str | Exception], done: set[int]
) -> Exception | None:
    """Mark the status events written; a fault of the events stream's key or slot alone holds them
    in their own buffer (drop-oldest) without holding any camera. Returns a server-wide refusal."""
    refusal: Exception | None = None
    for ev, reply in zip(events, replies, strict=True):
        if not isinstance(reply, Exception):
            done.add(ev.ticket)
        elif code := stream_fault(reply):
            held.events_failed(stream, reply, code)
        else:
            refusal = refusal or reply
    if done:
        held.events_written(stream)
    return refusal


def _prefix(flags: list[bool]) -> int:
    return next((i for i, ok in enumerate(flags) if not ok), len(flags))


def _count(drops: Drops, per_camera: dict[str, int], reason: DropReason) -> None:
    for camera, n in per_camera.items():
        drops[(camera, reason)] = drops.get((camera, reason), 0) + n


def _record(slot: Slot[FrameResult]) -> SpoolRecord:
    if slot.entry_id is None:
        raise ValueError("an entry must have its stream ID before it is spooled")
    return SpoolRecord(slot.item, slot.entry_id)


__all__ = ["STREAM_REFUSED", "HeldStreams", "StreamRefusedError", "refused_cameras", "settle_events"]
