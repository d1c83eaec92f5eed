"""One camera's change in the running pipeline (`daemon.ops.cameras.CamerasControl` decides, this runs it):
start its reader with its tracker, lines, rules and route; reopen it alone; or stop it and drain it (its
last frame batched, every batch taken so far published, then its tracker, lines, live view, slot and
metric series retired). Event loop only; one change at a time (the control's lock)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from daemon.batching.hub import FrameHub
from daemon.batching.router import ModelRouter
from daemon.config.cameras import CameraConfig
from daemon.config.lines_dropin import CameraLines
from daemon.config.settings import Settings
from daemon.core.clock import SYSTEM_CLOCK
from daemon.core.frames import StatusEvent
from daemon.core.metrics import Metrics
from daemon.core.objects import ObjectsResume
from daemon.inference.lanes import Lanes
from daemon.inference.model_file import ModelInfo
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
Resume = Callable[[dict[str, set[tuple[str, str]]], float], Awaitable[tuple[dict[str, ObjectsResume], bool]]]


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
    models: dict[int, ModelInfo]
    """The served sizes' models (the proved ones, shared with the lanes' builder: a size added by a
    reload is added here); a camera's `classes` must name their labels."""
    metrics: Metrics
    on_event: Callable[[StatusEvent], None]
    resume: Resume | None = None
    capture_threshold: Callable[[str, float | None], None] | None = None
    """The frame capture's per-camera threshold (`Sampler.set_threshold`); None without `[capture]`."""
    forget: tuple[Callable[[str], None], ...] = ()
    """What else holds a camera removed for good (its decoder process's place, its clips' packet ring)."""


def changed_keys(before: CameraConfig, after: CameraConfig) -> list[str]:
    """The keys whose values differ (the URL compared with its secret)."""
    was, now = before.model_dump(), after.model_dump()
    was["url"], now["url"] = before.url.get_secret_value(), after.url.get_secret_value()
    return sorted(k for k in was if was[k] != now[k])


class CameraRunner:
    """Runs one camera's start, reopen or stop (see the module docstring)."""

    def __init__(self, parts: CameraParts, settings: Callable[[], Settings]) -> None:
        """`settings`: the daemon's settings with the camera set as it is now (for the lanes' rules)."""
        self._parts = parts
        self._settings = settings
        self._retained: set[str] = set()

    async def start(self, camera: CameraConfig) -> None:
        p = self._parts
        self._rules(camera.id, camera)
        p.router.set_override(camera.id, camera.model)
        p.tracking.add_camera(camera, await self._resume_point(camera))
        p.lines.add(camera)
        source = p.make_source(camera)
        p.sources.append(source)
        self._count_running()
        source.start()

    async def change(self, before: CameraConfig, after: CameraConfig, user: str) -> None:
        p = self._parts
        keys = set(changed_keys(before, after))
        self._rules(after.id, after)
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

    def _rules(self, camera_id: str, camera: CameraConfig | None) -> None:
        """The lanes' rules of the set as it is now, and the frame capture's threshold of this camera."""
        settings = self._settings()
        self._parts.set_rules(settings)
        if self._parts.capture_threshold is not None:
            own = None if camera is None else camera.conf_threshold
            threshold = settings.engine.conf_threshold if own is None else own
            self._parts.capture_threshold(camera_id, None if camera is None else threshold)

    async def stop(self, camera_id: str) -> None:
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
        self._rules(camera_id, None)
        self._count_running()
        p.metrics.retire_camera(camera_id)
        for forget in p.forget:
            forget(camera_id)
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
        if not camera.tracked(self._settings().tracking):
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
        inst = self._settings().instance
        gauge = self._parts.metrics.instance_cameras.labels(shard=str(inst.shard), shards=str(inst.shards))
        gauge.set(len(self._parts.sources))


__all__ = ["LIVE_KEYS", "CameraParts", "CameraRunner", "changed_keys"]
