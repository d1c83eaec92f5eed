"""The camera set that runs: what the cameras API shows and changes, and what a reload applies.

`CamerasControl` holds every configured camera (enabled or not) and applies a change to ONE camera
between frames, on the event loop, without touching the others (their readers, connections, `seq`,
trackers and slots stay as they are):

- added (or enabled, or moved onto this instance's shard): its tracker (continuing the ids and
  counts it had when removed earlier in this process, else those of its objects stream, as after a
  restart), its lines, its post-processing rules and its route are set up, then its reader starts
  and its frames join the batching hub; a size no lane serves yet gets its lane built on its first
  frame (`daemon.pipeline`'s lanes on demand);
- changed: a key the reader uses (`url`, `password_file`, `transport`, timeouts, `model`, `gige` ...)
  reopens its reader alone (its tracker, slot and counts stay); `lines`, `mm_per_px`,
  `conf_threshold`, `classes` and `tracking` are applied without reopening;
- removed (or disabled, or moved to another shard): its reader stops and is joined, then the drain:
  the frame it left in the hub is batched as any other and every batch taken so far is published
  (`Lanes.settled`), so its buffered frames and events are published exactly once; then its tracker
  ends (its ids and counts kept for its return), its lines, live view, slot and metric series go.

Each change is audited: a `camera_added` / `camera_changed` / `camera_removed` log line and the entry
of that kind in `beltsight:events` (`detail`: the user and the names of the keys changed, never a
value, so no password). The API persists first (`daemon.config.cameras_dropin`, off the loop): a
change that cannot be written is not applied. Changes are serialised (one lock for the set), and a
write with a precondition (the API's `If-Match`) is checked under it (`StaleError`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from daemon.batching.hub import FrameHub
from daemon.batching.router import ModelRouter
from daemon.config import lines_dropin
from daemon.config.cameras import CameraConfig
from daemon.config.cameras_dropin import FILE, CamerasInvalidError, remove, write
from daemon.config.lines_dropin import CameraLines
from daemon.config.settings import Settings
from daemon.config.sharding import runs
from daemon.core.clock import SYSTEM_CLOCK, time_ms
from daemon.core.frames import StatusEvent
from daemon.core.metrics import Metrics
from daemon.core.objects import ObjectsResume
from daemon.inference.lanes import Lanes
from daemon.ingest.sources import CameraSource
from daemon.ops.lines import LinesControl
from daemon.ops.liveview import LiveView
from daemon.tracking.stage import TrackingStage

log = structlog.get_logger("beltsight.cameras")

LIVE_KEYS = frozenset({"lines", "mm_per_px", "conf_threshold", "classes", "tracking", "enabled", "shard"})
"""A camera's keys applied without reopening its reader; any other key changed reopens it."""
DRAIN_TIMEOUT_S = 10.0
"""The longest wait for a removed camera's last frame to be batched and its batches published."""
RESUME_TIMEOUT_S = 5.0

Precondition = Callable[[dict[str, Any]], bool]
"""Whether a write may replace the camera as it stands (given its view, None-free); see `put`."""
Resume = Callable[[dict[str, set[tuple[str, str]]], float], Awaitable[tuple[dict[str, ObjectsResume], bool]]]


class StaleError(Exception):
    """A write whose precondition no longer holds: nothing changed; `current` is the camera's view (or None)."""

    def __init__(self, current: dict[str, Any] | None) -> None:
        self.current = current
        super().__init__("the camera changed since it was read")


@dataclass(frozen=True, slots=True)
class CameraParts:
    """The stages a camera change reaches (wired by `daemon.pipeline`)."""

    sources: list[CameraSource]
    """The running readers (the pipeline's list, changed in place)."""
    make_source: Callable[[CameraConfig], CameraSource]
    hub: FrameHub
    router: ModelRouter
    tracking: TrackingStage
    lines: LinesControl
    liveview: LiveView
    lanes: Lanes
    set_rules: Callable[[Settings], None]
    labels: Callable[[], dict[int, tuple[str, ...]]]
    """Each served size's class labels (a camera's `classes` must name some)."""
    metrics: Metrics
    on_event: Callable[[StatusEvent], None]
    resume: Resume | None = None


def changed_keys(before: CameraConfig, after: CameraConfig) -> list[str]:
    """The keys whose values differ (the URL compared with its secret)."""
    was, now = before.model_dump(), after.model_dump()
    was["url"], now["url"] = before.url.get_secret_value(), after.url.get_secret_value()
    return sorted(k for k in was if was[k] != now[k])


class CamerasControl:
    """The configured cameras and the running part of them (event loop only; see the module docstring)."""

    def __init__(self, settings: Settings, parts: CameraParts) -> None:
        self._settings = settings
        self._parts = parts
        self._configured = {c.id: c for c in settings.cameras}
        self._sources_of = dict(settings.camera_sources)
        self.cameras_dir = settings.cameras_dir
        self._lock = asyncio.Lock()
        self._retained: set[str] = set()

    # -- what is configured ----------------------------------------------------------------
    @property
    def settings(self) -> Settings:
        """The settings the daemon started with, with the camera set as it runs now."""
        return self._settings

    def camera(self, camera_id: str) -> CameraConfig | None:
        return self._configured.get(camera_id)

    def runs_here(self, camera: CameraConfig) -> bool:
        return camera.enabled and runs(camera.id, self._settings.instance, camera.shard)

    def view(self, camera_id: str) -> dict[str, Any] | None:
        """The camera's settings as the API shows them: URL redacted, its source; None when unknown."""
        camera = self._configured.get(camera_id)
        if camera is None:
            return None
        data = camera.model_dump(mode="json")
        data["url"] = camera.safe_url()
        data["source"] = self._sources_of.get(camera_id, FILE)
        data["runs"] = self.runs_here(camera)
        return data

    def listing(self) -> dict[str, dict[str, Any]]:
        """What `/api/cameras` adds to each camera's running state (the live view's listing)."""
        return {
            cid: {
                "enabled": c.enabled,
                "model": c.model,
                "url": c.safe_url(),
                "source": self._sources_of.get(cid, FILE),
            }
            | {"size": "unknown", "fps": 0.0, "frames": 0}
            for cid, c in sorted(self._configured.items())
        }

    def problems(self, camera: CameraConfig) -> list[str]:
        """What the running daemon has against `camera` beyond its own model (its size, shard, labels)."""
        out = []
        problem = self._settings.camera_problem(camera)
        if problem is not None:
            out.append(f"{'model' if problem.startswith('asks') else 'shard'}: {problem}")
        for size, names in sorted(self._parts.labels().items()):
            unknown = sorted(set(camera.classes or ()) - set(names))
            if unknown:
                out.append(f"classes: {unknown} not in model {size}'s labels {list(names)}")
        return out

    # -- the API's writes ----------------------------------------------------------------
    async def put(self, camera: CameraConfig, user: str, precondition: Precondition | None = None) -> bool:
        """Persist `camera` as its drop-in, then apply it; True when it was added (not replaced).
        CamerasInvalidError (nothing changed), OSError (not written: nothing changed), StaleError."""
        if problems := self.problems(camera):
            raise CamerasInvalidError(problems)
        async with self._lock:
            self._check(camera.id, precondition)
            before = self._configured.get(camera.id)
            running_lines = self._parts.lines.current(camera.id) if camera.id in self._parts.lines.camera_ids else None
            if running_lines is not None and not ({"lines", "mm_per_px"} & camera.model_fields_set):
                camera = camera.model_copy(update=dict(running_lines))  # keep what the line editor set
            loop = asyncio.get_running_loop()
            path = await loop.run_in_executor(None, self._persist, camera)
            self._sources_of[camera.id] = f"drop-in {path}"
            await self._apply(camera.id, before, camera, user)
        return before is None

    async def delete(self, camera_id: str, user: str, precondition: Precondition | None = None) -> bool:
        """Record the removal, then remove the camera; False when there is no such camera (nothing done)."""
        async with self._lock:
            before = self._configured.get(camera_id)
            if before is None:
                return False
            self._check(camera_id, precondition)
            await asyncio.get_running_loop().run_in_executor(None, remove, self.cameras_dir, camera_id)
            self._sources_of.pop(camera_id, None)
            await self._apply(camera_id, before, None, user)
        return True

    def _persist(self, camera: CameraConfig) -> Path:
        """The camera's drop-in; and its lines drop-in where it has one, so a restart runs the same lines."""
        path = write(self.cameras_dir, camera)
        lines_dir = self._parts.lines.lines_dir
        if lines_dropin.path_for(lines_dir, camera.id).is_file():
            lines_dropin.write(lines_dir, camera.id, CameraLines.of(camera))
        return path

    def _check(self, camera_id: str, precondition: Precondition | None) -> None:
        view = self.view(camera_id)
        if precondition is not None and not precondition(view or {}):
            raise StaleError(view)

    # -- a reload's ------------------------------------------------------------------------
    def follow(self, new: Settings) -> None:
        """The engine's and tracking's settings of a reload, for the rules of cameras changed from now on."""
        self._settings = self._settings.model_copy(update={"engine": new.engine, "tracking": new.tracking})

    def check_set(self, new: Settings) -> list[str]:
        """The problems of `new`'s cameras the config's own validation cannot see (their class labels)."""
        return [f"cameras.{c.id}.{p}" for c in new.cameras for p in self.problems(c) if p.startswith("classes")]

    async def apply_set(self, new: Settings, user: str = "reload") -> list[str]:
        """Apply `new`'s camera set (each camera added, changed or removed, one at a time); what changed."""
        async with self._lock:
            self.cameras_dir = new.cameras_dir
            self._sources_of = dict(new.camera_sources)
            after = {c.id: c for c in new.cameras}
            done = []
            for camera_id in [*self._configured, *(cid for cid in after if cid not in self._configured)]:
                before, now = self._configured.get(camera_id), after.get(camera_id)
                if before is None or now is None or changed_keys(before, now):
                    done.append(await self._apply(camera_id, before, now, user))
            return [d for d in done if d]

    # -- one camera ------------------------------------------------------------------------
    async def _apply(self, camera_id: str, before: CameraConfig | None, after: CameraConfig | None, user: str) -> str:
        """Run `after` in place of `before` (None: absent); the change's name ('' when none)."""
        if after is None:
            self._configured.pop(camera_id, None)
        else:
            self._configured[camera_id] = after
        self._settings = self._settings.model_copy(update={"cameras": list(self._configured.values())})
        ran = before is not None and self.runs_here(before)
        run = after is not None and self.runs_here(after)
        if ran and not run:
            await self._stop(camera_id)
        elif run and not ran:
            assert after is not None
            await self._start(after)
        elif run and ran:
            assert before is not None and after is not None
            await self._change(before, after, user)
        if before is None:
            kind, keys = "camera_added", sorted(after.model_fields_set if after is not None else ())
        elif after is None:
            kind, keys = "camera_removed", []
        else:
            kind, keys = "camera_changed", changed_keys(before, after)
            if not keys:
                return ""
        self._audit(kind, camera_id, user, keys)
        return f"cameras.{camera_id} {kind.removeprefix('camera_')}"

    async def _start(self, camera: CameraConfig) -> None:
        p = self._parts
        p.set_rules(self._settings)
        p.router.set_override(camera.id, camera.model)
        p.tracking.add_camera(camera, await self._resume_point(camera))
        p.lines.add(camera)
        source = p.make_source(camera)
        p.sources.append(source)
        self._count_running()
        source.start()

    async def _change(self, before: CameraConfig, after: CameraConfig, user: str) -> None:
        p = self._parts
        keys = set(changed_keys(before, after))
        p.set_rules(self._settings)
        p.tracking.add_camera(after, await self._resume_point(after))
        if {"lines", "mm_per_px"} & keys:
            p.lines.apply(after.id, CameraLines.of(after), user)
        if keys - LIVE_KEYS:
            old = self._source(after.id)
            p.router.set_override(after.id, after.model)
            if old is not None:
                old.stop()
                await self._join(old)
                p.sources.remove(old)
            source = p.make_source(after)
            p.sources.append(source)
            source.start()

    async def _stop(self, camera_id: str) -> None:
        p = self._parts
        source = self._source(camera_id)
        if source is not None:
            source.stop()
            await self._join(source)
            p.sources.remove(source)
        drained = await self._drain(camera_id)
        p.tracking.remove_camera(camera_id)
        self._retained.add(camera_id)
        p.lines.remove(camera_id)
        p.liveview.forget(camera_id)
        p.router.set_override(camera_id, None)
        p.set_rules(self._settings)
        self._count_running()
        p.metrics.retire_camera(camera_id)
        if not drained:
            log.warning("camera_drain_incomplete", camera=camera_id, timeout_s=DRAIN_TIMEOUT_S)

    async def _drain(self, camera_id: str) -> bool:
        """Its last frame batched and every batch taken so far published; then its slot goes."""
        p = self._parts
        deadline = SYSTEM_CLOCK.monotonic() + DRAIN_TIMEOUT_S
        while p.hub.holds(camera_id):  # a frame handed over by another thread: polled
            if SYSTEM_CLOCK.monotonic() >= deadline:
                break
            await asyncio.sleep(0.01)
        settled = await p.lanes.settled(max(0.0, deadline - SYSTEM_CLOCK.monotonic()))
        left = p.hub.forget(camera_id)
        if left:
            p.metrics.dropped(camera_id, "removed")
        return settled and not left

    async def _join(self, source: CameraSource) -> None:
        c = source.camera
        timeout_s = c.open_timeout_s + 2 * c.read_timeout_s + 1.0
        ended = await asyncio.get_running_loop().run_in_executor(None, source.join, timeout_s)
        if not ended:
            log.warning("camera_reader_slow_to_stop", camera=c.id, waited_s=timeout_s)

    async def _resume_point(self, camera: CameraConfig) -> ObjectsResume | None:
        """Where a tracked camera's ids and counts continue: None for one whose tracker runs or that
        was removed earlier in this process (the stage keeps those); else its objects stream's."""
        p = self._parts
        if self._parts.resume is None or camera.id in self._retained or camera.id in p.tracking.camera_ids:
            return None
        if not camera.tracked(self._settings.tracking):
            return None
        keys = {(line.id, d) for line in camera.lines for d in ("in", "out")}
        found, read = await self._parts.resume({camera.id: keys}, RESUME_TIMEOUT_S)
        start = found.get(camera.id, ObjectsResume())
        if not read and start.next_track_id <= 1:  # as after a restart without the stream: ids from the clock
            start = ObjectsResume(int(SYSTEM_CLOCK.time()) * 1000, start.counts)
        return start

    def _source(self, camera_id: str) -> CameraSource | None:
        return next((s for s in self._parts.sources if s.camera_id == camera_id), None)

    def _count_running(self) -> None:
        inst = self._settings.instance
        gauge = self._parts.metrics.instance_cameras.labels(shard=str(inst.shard), shards=str(inst.shards))
        gauge.set(len(self._parts.sources))

    def _audit(self, kind: str, camera_id: str, user: str, keys: list[str]) -> None:
        log.info(kind, camera=camera_id, user=user, changed=keys)
        detail = json.dumps({"user": user, "changed": keys}, separators=(",", ":"))
        self._parts.on_event(StatusEvent(kind, detail, camera_id, time_ms(SYSTEM_CLOCK)))


__all__ = ["LIVE_KEYS", "CameraParts", "CamerasControl", "Precondition", "StaleError", "changed_keys"]
