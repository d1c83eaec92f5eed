"""The reconciliation at work in `beltsight bridge`: poll the counters, judge, tell everyone.

One task per `[[bridge.reconcile]]` entry (`tasks`, in the bridge's task group) reads its counter
every `poll_s` (daemon.bridge.reference) and feeds the pure `Reconciler` (daemon.bridge.reconcile);
the bridge's reader hands over the newly served crossings (`on_changes`). What the judgement says goes to:

- the events stream (`[redis] events_stream`, the daemon's format: `kind`, `camera`, `detail` as
  compact JSON, `at_ms`): `count_mismatch` / `count_agrees` (detail `line`, `direction`, `vision`,
  `reference`, `drift`, `allowed`, `window`), `reference_down` / `reference_up`, and the counter's
  `reference_wrapped` / `reference_reset` / `reference_jump`. Entries wait in a bounded queue (oldest
  dropped and counted past `EVENTS_QUEUE`) while Redis is down;
- the log (the same names, daemon.ops.logging.events.reconcile);
- the bridge's metrics: `beltsight_count_drift{camera,line}` and friends;
- the listeners (`on_state`): the OPC UA line's state, the Machine Vision condition, Sparkplug;
- the counts store (daemon.bridge.reconcile_counts), flushed every `FLUSH_S`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sqlite3
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge
from redis.exceptions import RedisError

from daemon.bridge.reconcile import CounterNote, Reconciler, State, Verdict, Window
from daemon.bridge.reconcile_counts import CountsStore, evidence_label
from daemon.bridge.reference import Reference, ReferenceReadError
from daemon.bridge.state import Change, Crossing
from daemon.config.reconcile import ReconcileConfig
from daemon.core.frames import StatusEvent
from daemon.core.status_kinds import StatusKind
from daemon.publish.redis_conn import RedisClient
from daemon.publish.schema import encode_event

log = structlog.get_logger("beltsight.bridge.reconcile")

EVENTS_QUEUE = 1000
FLUSH_S = 5.0
RETRY_S = 1.0
STATE_CODES: dict[State, int] = {"unknown": 0, "agrees": 1, "count_mismatch": 2, "reference_down": 3}


@dataclass(frozen=True, slots=True)
class LineVerdict:
    """What the listeners get: a reconciled line's state now and its last drift (camera - reference)."""

    camera: str
    line: str
    direction: str
    state: State
    drift: int


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.drift = Gauge(
            "beltsight_count_drift",
            "Camera count minus the plant counter's over the last judged window (parts)",
            ("camera", "line"),
            registry=registry,
        )
        self.mismatch = Gauge(
            "beltsight_count_mismatch",
            "1 while the line is in count_mismatch, else 0",
            ("camera", "line"),
            registry=registry,
        )
        self.reference_up = Gauge(
            "beltsight_reference_up",
            "1 while the plant counter answers, else 0 (reference_down)",
            ("camera", "line"),
            registry=registry,
        )
        self.read_failures = Counter(
            "beltsight_reference_read_failures",
            "Failed reads of the plant counter",
            ("camera", "line"),
            registry=registry,
        )
        self.events_dropped = Counter(
            "beltsight_reconcile_events_dropped", "Reconcile events dropped from a full queue", registry=registry
        )


class ReconcileService:
    def __init__(
        self,
        entries: list[ReconcileConfig],
        readers: dict[str, Reference],
        store: CountsStore,
        registry: CollectorRegistry,
        redis_client_factory: Callable[[], RedisClient],
        *,
        events_stream: str,
        events_maxlen: int,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        """`readers`: one per entry's key (daemon.bridge.reference.open_reference)."""
        self.entries = entries
        self.readers = readers
        self.store = store
        self.reconcilers = {e.key: Reconciler(e) for e in entries}
        self.metrics = _Metrics(registry)
        self.listeners: list[Callable[[LineVerdict], None]] = []
        self._factory = redis_client_factory
        self._stream = events_stream
        self._maxlen = events_maxlen
        self._clock_ms = clock_ms
        self._events: deque[dict[str, str]] = deque()
        self._wake = asyncio.Event()
        self._stored_until: dict[str, int] = {}
        self._by_line: dict[tuple[str, str, str], str] = {(e.camera, e.line, e.direction): e.key for e in entries}
        self.events_written = 0
        for e in entries:
            self.metrics.reference_up.labels(e.camera, e.line).set(0)
            self.metrics.mismatch.labels(e.camera, e.line).set(0)

    def on_changes(self, changes: list[Change]) -> None:
        """The crossings the bridge just served (in stream order); others are not ours."""
        for change in changes:
            if not isinstance(change, Crossing):
                continue
            key = self._by_line.get((change.camera, change.line, change.direction))
            if key is None:
                continue
            rec = self.reconcilers[key]
            rec.add_crossing(change.at_ms, evidence_label(change), change.speed_mm_s)
            self.store.add(key, change.at_ms + rec.lag_ms, vision=1)

    def tasks(self) -> dict[str, Callable[[], Coroutine[Any, Any, None]]]:
        """Its long-lived tasks by name, run in the bridge's task group: one poll per entry, the events
        writer, the counts' flush; `close` once they ended."""
        tasks: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {
            f"reconcile-{e.key}": functools.partial(self._poll, e) for e in self.entries
        }
        return tasks | {"reconcile-events": self._write_events, "reconcile-flush": self._flush_loop}

    async def close(self) -> None:
        """The counters' connections closed, the counts store flushed (its tasks already ended): a reader
        whose close fails is logged (`reference_close_failed`), the others are closed and the counts
        flushed all the same."""
        try:
            for key, reader in self.readers.items():
                try:
                    await reader.close()
                except Exception as exc:  # closing on the way out: logged, never in the way of the flush
                    log.error("reference_close_failed", key=key, error=f"{type(exc).__name__}: {exc}"[:200])
        finally:
            await asyncio.to_thread(self._flush_quietly)

    async def _poll(self, cfg: ReconcileConfig) -> None:
        rec = self.reconcilers[cfg.key]
        reader = self.readers[cfg.key]
        labels = (cfg.camera, cfg.line)
        next_at = time.monotonic()
        while True:
            try:
                raw = await reader.read()
            except ReferenceReadError as exc:
                self.metrics.read_failures.labels(*labels).inc()
                self.metrics.reference_up.labels(*labels).set(0)
                self._verdict(cfg, rec, rec.reference_failed(self._clock_ms()), error=str(exc))
            else:
                now = self._clock_ms()
                before = rec.counter.total
                note, up = rec.add_reading(raw, now)
                self.metrics.reference_up.labels(*labels).set(1)
                if rec.counter.total > before:
                    self.store.add(cfg.key, now, reference=rec.counter.total - before)
                if note is not None:
                    self._note(cfg, note)
                self._verdict(cfg, rec, up)
                window, verdict = rec.evaluate(now)
                if window is not None:
                    self._judged(cfg, window)
                self._verdict(cfg, rec, verdict)
            next_at += cfg.poll_s
            delay = next_at - time.monotonic()
            if delay < 0:  # a slow read: keep the period, skip the missed ticks
                next_at, delay = time.monotonic(), 0.0
            await asyncio.sleep(delay)

    def _judged(self, cfg: ReconcileConfig, window: Window) -> None:
        self.metrics.drift.labels(cfg.camera, cfg.line).set(window.drift)
        if window.disagrees and window.start_ms >= self._stored_until.get(cfg.key, 0):
            self.store.add_window(cfg.key, window)  # windows that do not overlap: each crossing once
            self._stored_until[cfg.key] = window.end_ms

    def _verdict(self, cfg: ReconcileConfig, rec: Reconciler, verdict: Verdict | None, error: str = "") -> None:
        if verdict is None:  # a failed read while down: counted in the metric, logged once per outage
            return
        detail: dict[str, Any] = {"line": cfg.line, "direction": cfg.direction}
        w = verdict.window
        if w is not None:
            detail |= {
                "vision": w.vision,
                "reference": w.reference,
                "drift": w.drift,
                "allowed": w.allowed,
                "window": {"start_ms": w.start_ms - w.lag_ms, "end_ms": w.end_ms - w.lag_ms, "lag_ms": w.lag_ms},
            }
            self.metrics.mismatch.labels(cfg.camera, cfg.line).set(1 if verdict.kind == "count_mismatch" else 0)
            c, ln, d = cfg.camera, cfg.line, cfg.direction
            if verdict.kind == "count_mismatch":
                log.warning(
                    "count_mismatch",
                    camera=c,
                    line=ln,
                    direction=d,
                    vision=w.vision,
                    reference=w.reference,
                    allowed=w.allowed,
                )
            else:
                log.info(
                    "count_agrees",
                    camera=c,
                    line=ln,
                    direction=d,
                    vision=w.vision,
                    reference=w.reference,
                    allowed=w.allowed,
                )
        elif verdict.kind == "reference_down":
            detail |= {"where": cfg.where(), "error": error[:200]}
            log.warning("reference_down", key=cfg.key, where=cfg.where(), error=error[:200])
        else:
            detail |= {"where": cfg.where()}
            log.info("reference_up", key=cfg.key, where=cfg.where())
        self._event(verdict.kind, cfg.camera, detail, verdict.at_ms)
        drift = rec.last.drift if rec.last is not None else 0
        for listener in self.listeners:
            listener(LineVerdict(cfg.camera, cfg.line, cfg.direction, rec.state, drift))

    def _note(self, cfg: ReconcileConfig, note: CounterNote) -> None:
        if note.kind == "reference_wrapped":
            log.info("reference_wrapped", key=cfg.key, before=note.before, raw=note.raw)
        elif note.kind == "reference_reset":
            log.info("reference_reset", key=cfg.key, before=note.before, raw=note.raw)
        else:
            log.info("reference_jump", key=cfg.key, before=note.before, raw=note.raw)
        detail = {"line": cfg.line, "direction": cfg.direction, "before": note.before, "raw": note.raw}
        self._event(note.kind, cfg.camera, detail, note.at_ms)

    def _event(self, kind: StatusKind, camera: str, detail: dict[str, Any], at_ms: int) -> None:
        text = json.dumps(detail, separators=(",", ":"), sort_keys=True)
        if len(self._events) >= EVENTS_QUEUE:
            self._events.popleft()
            self.metrics.events_dropped.inc()
        self._events.append(encode_event(StatusEvent(kind, text, camera, at_ms), at_ms))
        self._wake.set()

    async def _write_events(self) -> None:
        client: RedisClient | None = None
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._events:
                    try:
                        if client is None:
                            client = self._factory()
                        await client.xadd(self._stream, self._events[0], maxlen=self._maxlen, approximate=True)  # type: ignore[arg-type]
                    except (RedisError, OSError):
                        if client is not None:
                            await client.aclose()
                        client = None
                        await asyncio.sleep(RETRY_S)
                        continue
                    self._events.popleft()
                    self.events_written += 1
        finally:
            if client is not None:
                await client.aclose()

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_S)
            await asyncio.to_thread(self._flush_quietly)

    def _flush_quietly(self) -> None:
        try:
            self.store.flush()
        except (OSError, sqlite3.Error) as exc:  # the counts stay in memory for the next flush
            log.error("reconcile_counts_unwritten", path=str(self.store.path), error=str(exc)[:200])

    def report(self) -> dict[str, Any]:
        """For /healthz and `GET /api/counts`: each line's state and last window."""
        out: dict[str, Any] = {}
        for key, rec in self.reconcilers.items():
            w = rec.last
            out[key] = {
                "state": rec.state,
                "vision": w.vision if w else None,
                "reference": w.reference if w else None,
                "drift": w.drift if w else None,
                "lag_ms": rec.lag_ms,
                "counter_raw": rec.counter.raw,
            }
        return out


__all__ = ["LineVerdict", "ReconcileService"]
