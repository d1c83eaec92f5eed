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
from functools import partial
from pathlib import Path
from typing import Any

import structlog

from daemon.config import lines_dropin
from daemon.config.cameras import CameraConfig
from daemon.config.cameras_dropin import FILE, CamerasInvalidError, remove, write
from daemon.config.lines_dropin import CameraLines
from daemon.config.settings import Settings
from daemon.config.sharding import runs
from daemon.core.clock import SYSTEM_CLOCK, time_ms
from daemon.core.frames import StatusEvent
from daemon.core.status_kinds import StatusKind
from daemon.core.tasks import Tracked
from daemon.inference.model_file import ModelError, ModelInfo, load_model_info
from daemon.ops.camera_runner import CameraParts, CameraRunner, changed_keys

log = structlog.get_logger("beltsight.cameras")

API_WAIT_S = 2.5
"""The longest an API write waits for its change to be applied once it is recorded (the endpoint's
request deadline is 5 s by default); the apply goes on after it."""

Precondition = Callable[[dict[str, Any]], bool]
"""Whether a write may replace the camera as it stands (given its view, None-free); see `put`."""
Record = Callable[[], Awaitable[tuple[CameraConfig | None, CameraConfig | None]]]


class StaleError(Exception):
    """A write whose precondition no longer holds: nothing changed; `current` is the camera's view (or None)."""

    def __init__(self, current: dict[str, Any] | None) -> None:
        self.current = current
        super().__init__("the camera changed since it was read")


class CamerasControl:
    """The configured cameras and the running part of them (event loop only; see the module docstring)."""

    def __init__(self, settings: Settings, parts: CameraParts) -> None:
        self._settings = settings
        self._parts = parts
        self._configured = {c.id: c for c in settings.cameras}
        self._sources_of = dict(settings.camera_sources)
        self.cameras_dir = settings.cameras_dir
        self._lock = asyncio.Lock()
        self._runner = CameraRunner(parts, lambda: self._settings)
        self._changes = Tracked(_change_failed)  # the applies still running (`_write`)

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
        for size, names in sorted((size, info.names) for size, info in self._parts.models.items()):
            unknown = sorted(set(camera.classes or ()) - set(names))
            if unknown:
                out.append(f"classes: {unknown} not in model {size}'s labels {list(names)}")
        return out

    # -- the API's writes ----------------------------------------------------------------
    async def put(self, camera: CameraConfig, user: str, precondition: Precondition | None = None) -> bool:
        """Persist `camera` as its drop-in, then apply it; True when it was added (not replaced).
        CamerasInvalidError (nothing changed), OSError (not written: nothing changed), StaleError.
        Returns once the change is recorded and has been applied, or after `API_WAIT_S` of its apply
        (a drain can take seconds; it goes on, still holding the set's lock)."""
        if problems := self.problems(camera):
            raise CamerasInvalidError(problems)

        async def record() -> tuple[CameraConfig | None, CameraConfig | None]:
            self._check(camera.id, precondition)
            before, after = self._configured.get(camera.id), camera
            running = self._parts.lines.current(camera.id) if camera.id in self._parts.lines.camera_ids else None
            if running is not None and not ({"lines", "mm_per_px"} & camera.model_fields_set):
                after = camera.model_copy(update=dict(running))  # keep what the line editor set
            path = await asyncio.get_running_loop().run_in_executor(None, self._persist, after)
            self._sources_of[camera.id] = f"drop-in {path}"
            return before, after

        before, _after = await self._write(camera.id, record, user)
        return before is None

    async def delete(self, camera_id: str, user: str, precondition: Precondition | None = None) -> bool:
        """Record the removal, then remove the camera; False when there is no such camera (nothing done).
        Returns as `put` does."""

        async def record() -> tuple[CameraConfig | None, CameraConfig | None]:
            before = self._configured.get(camera_id)
            if before is None:
                return None, None
            self._check(camera_id, precondition)
            await asyncio.get_running_loop().run_in_executor(None, remove, self.cameras_dir, camera_id)
            self._sources_of.pop(camera_id, None)
            return before, None

        before, _after = await self._write(camera_id, record, user)
        return before is not None

    async def _write(
        self, camera_id: str, record: Record, user: str
    ) -> tuple[CameraConfig | None, CameraConfig | None]:
        """Under the set's lock: `record` (check, persist: its exceptions are the caller's), then the
        apply, in a task the caller waits for at most `API_WAIT_S` once the change is recorded."""
        decided: asyncio.Future[tuple[CameraConfig | None, CameraConfig | None]] = (
            asyncio.get_running_loop().create_future()
        )

        async def run() -> None:
            async with self._lock:
                try:
                    before, after = await record()
                except BaseException as exc:
                    decided.set_exception(exc)
                    return
                self._record(camera_id, after)
                decided.set_result((before, after))
                if before is not None or after is not None:
                    await self._apply(camera_id, before, after, user)

        task = self._changes.start(run(), f"camera-change-{camera_id}")
        result = await decided
        await asyncio.wait({task}, timeout=API_WAIT_S)
        return result

    async def close(self) -> None:
        """At shutdown: end the changes still being applied (the daemon stops every reader next)."""
        await self._changes.close()

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
    async def load_models(self, new: Settings) -> tuple[dict[int, ModelInfo], list[str]]:
        """The models of the sizes `new` adds to `[models]`, read and checked (off the loop), and the
        problems (a file that is not a model of its size, class names other than the served models')."""
        loaded: dict[int, ModelInfo] = {}
        problems: list[str] = []
        names = {info.names for info in self._parts.models.values()}
        for size in sorted(new.models.keys() - self._parts.models.keys()):
            model = new.models[size]
            call = partial(load_model_info, model.path, expected_size=size, overrides=model.overrides())
            try:
                info = await asyncio.get_running_loop().run_in_executor(None, call)
            except ModelError as exc:
                problems.append(f"models.{size}: {exc}")
                continue
            if names and info.names not in names:
                problems.append(f"models.{size}: class names {list(info.names)} differ from the served models'")
                continue
            loaded[size] = info
        return loaded, problems

    def add_models(self, loaded: dict[int, ModelInfo], new: Settings) -> list[str]:
        """Serve the sizes loaded (`load_models`): cameras are routed to them from their next connection
        or resolution change on, each size's lane built on its first frame. `models.<size> added` each."""
        for size, info in loaded.items():
            self._parts.models[size] = info
        self._parts.router.add_sizes(loaded)
        models = {**self._settings.models, **{size: new.models[size] for size in loaded}}
        self._settings = self._settings.model_copy(update={"models": models})
        return [f"models.{size} added" for size in sorted(loaded)]

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
        self._record(camera_id, after)
        ran = before is not None and self.runs_here(before)
        run = after is not None and self.runs_here(after)
        if ran and not run:
            await self._runner.stop(camera_id)
        elif run and not ran:
            assert after is not None
            await self._runner.start(after)
        elif run and ran:
            assert before is not None and after is not None
            await self._runner.change(before, after, user)
        kind: StatusKind
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

    def _record(self, camera_id: str, after: CameraConfig | None) -> None:
        """`after` is the camera's configuration from now on (what the API answers; None: absent)."""
        if after is None:
            self._configured.pop(camera_id, None)
        else:
            self._configured[camera_id] = after
        self._settings = self._settings.model_copy(update={"cameras": list(self._configured.values())})

    def _audit(self, kind: StatusKind, camera_id: str, user: str, keys: list[str]) -> None:
        if kind == "camera_added":
            log.info("camera_added", camera=camera_id, user=user, changed=keys)
        elif kind == "camera_removed":
            log.info("camera_removed", camera=camera_id, user=user, changed=keys)
        else:
            log.info("camera_changed", camera=camera_id, user=user, changed=keys)
        detail = json.dumps({"user": user, "changed": keys}, separators=(",", ":"))
        self._parts.on_event(StatusEvent(kind, detail, camera_id, time_ms(SYSTEM_CLOCK)))


def _change_failed(change: str, exc: BaseException) -> None:
    log.error("camera_change_failed", change=change, error=f"{type(exc).__name__}: {exc}")


__all__ = ["CameraParts", "CamerasControl", "Precondition", "StaleError", "changed_keys"]
