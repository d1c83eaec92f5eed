"""The recorder: reads every `crossed` entry of this instance's objects streams and records it.

Off the hot path: it reads what the sink already published, as any consumer of the streams does
(plain XREAD from its own positions, no consumer group: nothing in Redis changes), and writes the
SQLite file on a thread of its own, so a slow disk delays the record, never a frame or an event.

- Positions: each stream's last entry ID read is kept in the file, in the transaction of the rows
  read up to it (`daemon.ops.review.store`): after a crash the record continues there; with the file
  deleted it starts at each stream's first entry and rebuilds what the streams still hold
  (`[redis] maxlen`), skipping what the retention has removed. Rows are keyed by their entry ID, so
  nothing is recorded twice.
- The box: the part's box on the frame the crossing was found on, read from that frame's entry in
  the detections stream (the object entry's ID names it: `daemon.publish.sink.objects`); None when
  that entry was trimmed already.
- Redis down: retried with capped exponential backoff and full jitter, one log line per interval.
  A malformed entry is skipped (logged at most once per interval) and read past.
- Retention: every `PRUNE_INTERVAL_S` the crossings older than the retention are removed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import time
from typing import Any, TypeVar

import structlog
from redis.exceptions import RedisError

from daemon.config.redis import RedisConfig
from daemon.config.review import ReviewConfig
from daemon.config.settings import Settings
from daemon.config.tracking import LineConfig
from daemon.core.backoff import Backoff
from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.core.ratelimit import RateLimited
from daemon.core.shifts import Bucket, parse_shifts
from daemon.ops.review.store import Crossing, Cursor, Filters, Store
from daemon.publish.redis_conn import Connector, RedisClient, as_text, slot_groups
from daemon.publish.schema import EntryId
from daemon.publish.sink.objects import EVENTS_PER_FRAME

log = structlog.get_logger("beltsight.review")

READ_COUNT = 500
BLOCK_MS = 1000
PRUNE_INTERVAL_S = 60.0
LOG_INTERVAL_S = 60.0
DAY_MS = 86_400_000
T = TypeVar("T")
LineOf = Callable[[str, str], LineConfig | None]


def retention_days(settings: Settings) -> float:
    """`[review] retention_days`, else the clips' (where `[clips]` is on), else the snapshots'."""
    if settings.review.retention_days is not None:
        return settings.review.retention_days
    if settings.clips.enabled:
        return float(settings.clips.retention_days)
    return settings.snapshots.retain_days


def crossing_of(entry_id: str, fields: dict[str, str]) -> Crossing | None:
    """The crossing a `crossed` entry records; None for another kind. ValueError/KeyError when malformed."""
    if fields.get("event") != "crossed":
        return None
    entry = EntryId.parse(entry_id)
    direction = fields["direction"]
    if direction not in ("in", "out"):
        raise ValueError(f"direction: {direction!r}")
    eta = fields.get("eta")
    if eta is not None:
        json.loads(eta)
    return Crossing(
        camera=fields["camera"],
        entry_ms=entry.ms,
        entry_seq=entry.seq,
        at_ms=int(fields["at_ms"]),
        line=fields["line"],
        direction=direction,
        label=fields["label"],
        cls=int(fields.get("cls", "0")),
        score=float(fields["score"]),
        track=int(fields["track"]),
        count=int(fields["count"]),
        speed_px_s=_number(fields.get("speed_px_s"), float),
        speed_mm_s=_number(fields.get("speed_mm_s"), float),
        eta=eta,
        snapshot=fields.get("snapshot") or None,
        clip=fields.get("clip") or None,
        clip_offset_ms=_number(fields.get("clip_offset_ms"), int),
    )


def _number(text: str | None, kind: Callable[[str], T]) -> T | None:
    return None if text is None or text == "" else kind(text)


def frame_entry_id(crossing: Crossing) -> str:
    """The ID of the detections entry of the frame the crossing was found on."""
    return str(EntryId(crossing.entry_ms, crossing.entry_seq // EVENTS_PER_FRAME))


class Recorder:
    """The record of one daemon: `run()` is its task; `page()` and `counts()` answer the API."""

    def __init__(
        self,
        cfg: ReviewConfig,
        redis: RedisConfig,
        cameras: Sequence[str],
        retention_days: float,
        *,
        line_of: LineOf | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        """`line_of(camera, line)`: the line as it runs now (its start and end are kept with each crossing)."""
        self.path = cfg.db
        self.shifts: tuple[time, ...] = parse_shifts(cfg.shifts)
        self.retention_days = retention_days
        self._redis = redis
        self._streams = {redis.objects_stream_for(c): c for c in cameras}
        self._clock = clock
        self._line_of = line_of
        self._writer = ThreadPoolExecutor(1, "beltsight-review-write")
        self._reader = ThreadPoolExecutor(1, "beltsight-review-read")
        self._write_store: Store | None = None
        self._read_store: Store | None = None
        self._limits = RateLimited(LOG_INTERVAL_S, clock)
        self.recorded = 0
        """Crossings recorded by this process (new rows)."""
        self.malformed = 0

    # -- the task --------------------------------------------------------------------------
    async def run(self) -> None:
        """Read, record and prune until cancelled (see the module docstring for the policy)."""
        positions = await self._write(self._open_writer)
        log.info("review_started", db=str(self.path), streams=len(self._streams), retention_days=self.retention_days)
        pos = {s: positions.get(s, "0-0") for s in self._streams}
        connect = Connector(self._redis)
        backoff = Backoff(0.2, 10.0)
        next_prune = 0.0
        client: RedisClient | None = None
        try:
            while True:
                if self._clock.monotonic() >= next_prune:
                    await self._write(self._prune)
                    next_prune = self._clock.monotonic() + PRUNE_INTERVAL_S
                try:
                    client = client or connect()
                    await self._read_once(client, pos)
                    backoff.succeeded()
                except (RedisError, OSError) as exc:
                    if (held := self._limits.allow("read")) is not None:
                        log.warning("review_read_failed", error=f"{type(exc).__name__}: {exc}", held_back=held)
                    if client is not None:
                        await client.aclose()
                        client = None
                    await asyncio.sleep(backoff.failed())
        finally:
            if client is not None:
                await client.aclose()

    async def _read_once(self, client: RedisClient, pos: dict[str, str]) -> None:
        groups = slot_groups(client, list(pos))
        replies = await asyncio.gather(
            *(client.xread({s: pos[s] for s in g}, count=READ_COUNT, block=BLOCK_MS) for g in groups)
        )
        crossings: list[Crossing] = []
        moved: dict[str, str] = {}
        for stream, entries in (pair for reply in replies for pair in _by_stream(reply)):
            for entry_id, fields in entries:
                moved[stream] = entry_id
                try:
                    crossing = crossing_of(entry_id, as_text(fields))
                except (ValueError, KeyError) as exc:
                    self._malformed(stream, entry_id, exc)
                    continue
                if crossing is not None:
                    crossings.append(crossing)
        if not moved:
            return
        crossings = [self._with_line(c) for c in await self._with_boxes(client, crossings)]
        self.recorded += await self._write(self._record, crossings, moved)
        pos.update(moved)

    async def _with_boxes(self, client: RedisClient, crossings: list[Crossing]) -> list[Crossing]:
        """Each crossing with its part's box on its frame (from the detections stream), where it is still there."""
        if not crossings:
            return crossings
        async with client.pipeline(transaction=False) as pipe:  # one round trip, one connection
            for c in crossings:
                pipe.xrange(self._redis.stream_for(c.camera), frame_entry_id(c), frame_entry_id(c), count=1)
            frames = await pipe.execute()
        return [_boxed(c, entries[0][1] if entries else None) for c, entries in zip(crossings, frames, strict=True)]

    def _with_line(self, crossing: Crossing) -> Crossing:
        line = None if self._line_of is None else self._line_of(crossing.camera, crossing.line)
        if line is None:
            return crossing
        return replace(crossing, line_xy=json.dumps([list(line.start), list(line.end)]))

    def _malformed(self, stream: str, entry_id: str, exc: Exception) -> None:
        self.malformed += 1
        if (held := self._limits.allow("malformed")) is not None:
            log.warning("review_entry_malformed", stream=stream, entry=entry_id, reason=repr(exc), held_back=held)

    # -- the writer thread -----------------------------------------------------------------
    async def _write(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._writer, fn, *args)

    def _open_writer(self) -> dict[str, str]:
        self._write_store = Store(self.path)
        return self._write_store.positions()

    def _record(self, crossings: list[Crossing], positions: dict[str, str]) -> int:
        assert self._write_store is not None
        cutoff = self._cutoff_ms()
        return self._write_store.record([c for c in crossings if c.at_ms >= cutoff], positions)

    def _prune(self) -> int:
        assert self._write_store is not None
        return self._write_store.prune(self._cutoff_ms())

    def _cutoff_ms(self) -> int:
        cutoff = int(self._clock.time() * 1000 - self.retention_days * DAY_MS)
        return cutoff - cutoff % 60_000  # the store prunes whole minutes

    # -- the API's reads (the reader thread) -----------------------------------------------
    async def page(self, filters: Filters, limit: int, after: Cursor | None) -> list[Crossing]:
        """Up to `limit` crossings of `filters`, newest first, after the cursor."""
        return await self._read(lambda store: store.crossings(filters, limit, after))

    async def counts(self, filters: Filters, bucket: Bucket) -> list[tuple[int, dict[str, int]]]:
        """Crossings per bucket and direction (`Store.counts`), with the configured shifts."""
        return await self._read(lambda store: store.counts(filters, bucket, self.shifts))

    async def lines(self) -> list[tuple[str, str]]:
        """The (camera, line) pairs on record."""
        return await self._read(lambda store: store.lines())

    async def _read(self, fn: Callable[[Store], T]) -> T:
        def call() -> T:
            if self._read_store is None:
                self._read_store = Store(self.path)
            return fn(self._read_store)

        return await asyncio.get_running_loop().run_in_executor(self._reader, call)

    def close(self) -> None:
        """Close the file (after `run()` ended); waits for a write in progress."""
        for pool, attr in ((self._writer, "_write_store"), (self._reader, "_read_store")):
            store: Store | None = getattr(self, attr)
            if store is not None:
                pool.submit(store.close).result()
                setattr(self, attr, None)
            pool.shutdown(wait=True)


def _boxed(crossing: Crossing, frame: dict[Any, Any] | None) -> Crossing:
    if frame is None:
        return crossing
    try:
        fields = as_text(frame)
        dets = json.loads(fields["dets"])
        box = next((d["box"] for d in dets if d.get("track") == crossing.track), None)
        return replace(
            crossing,
            box=None if box is None else json.dumps([round(float(v), 1) for v in box]),
            frame_w=int(fields["w"]),
            frame_h=int(fields["h"]),
        )
    except (KeyError, ValueError, TypeError):
        return crossing


def _by_stream(reply: Any) -> list[tuple[str, list[tuple[str, dict[str, str]]]]]:
    """XREAD replies as (stream, entries), for both RESP2 (list) and RESP3 (dict)."""
    if not reply:
        return []
    if isinstance(reply, dict):
        return [(k, v[0] if v and isinstance(v[0], list) else v) for k, v in reply.items()]
    return [(stream, entries) for stream, entries in reply]


__all__ = ["Recorder", "crossing_of", "frame_entry_id", "retention_days"]
