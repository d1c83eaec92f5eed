"""A reload (SIGHUP, `systemctl reload beltsight`): re-read the config and the lines drop-ins, apply what
can change live, name the rest.

Live, from the next frame or batch on: the camera set (cameras added to, removed from or changed in
the file or `cameras_dir`, each alone and between frames: `daemon.ops.cameras.CamerasControl.apply_set`;
the others keep their connections), each camera's `mm_per_px`, lines and gates (`LinesControl.apply`,
kept lines keep their counts), each camera's `conf_threshold` and `[engine] conf_threshold` (the lanes'
rules), the `[tracking]` knobs (tracks, ids and counts stay), `[logging] level`, `[health]
basic_auth_users`. A size whose `[models.<size>]` (with the models drop-in over it,
`daemon.config.models_dropin`) is not the entry that serves now (a new path, or its layout and labels)
is swapped to it without stopping the line (`daemon.ops.models.ModelsControl.reload`: the comparison is
against what serves, a swap through the API included, not against the file at start) and named below
when the swap is refused. Sizes added to `[models]` are served (their files checked, cameras routed
to them from their next connection on, each lane built on its first frame: `CamerasControl.add_models`).
Everything else that differs from what the daemon started with (models removed, Redis, the engine,
the endpoint's address, `[instance]` ...) is named in one `config_restart_needed` line and left as it
runs until a restart. A file that does not load (the config or a drop-in invalid, a camera's classes
or an added model unknown) changes nothing: `config_reload_failed` with every problem.

The file is read off the event loop; the changes are applied on it (between two frames of each camera).
Reloads run one at a time: requests that arrive during one are folded into the next.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from daemon.config.cameras import CameraConfig
from daemon.config.lines_dropin import CameraLines
from daemon.config.settings import ConfigError, Settings, load_settings
from daemon.config.tracking import TrackingConfig
from daemon.inference.model_file import ModelInfo
from daemon.ops.cameras import CamerasControl
from daemon.ops.http import HealthServer
from daemon.ops.lines import LinesControl
from daemon.ops.models import ModelsControl
from daemon.tracking.stage import TrackingStage

log = structlog.get_logger("beltsight.reload")

_SECTIONS = ("redis", "models", "engine", "health", "thermal", "bridge", "instance", "logging", "tracking", "clips")
_LIVE_KEYS = {
    "engine": {"conf_threshold"},
    "health": {"basic_auth_users", "allowed_hosts", "allowed_origins"},
    "logging": {"level"},
    "tracking": set(TrackingConfig.model_fields) - {"enabled"},
}


def _dump(value: Any) -> Any:
    return value.model_dump(mode="python") if hasattr(value, "model_dump") else value


def restart_needed(started: Settings, new: Settings) -> list[str]:
    """The keys that differ between the settings the daemon started with and `new`, and that a reload
    does not apply (`section.key`, `models` for sizes removed; added ones are compared after the
    reloader served them); `models.<size>` for a changed
    model, which a reload tries to swap. Cameras are all applied live (`daemon.ops.cameras`)."""
    out = []
    for section in _SECTIONS:
        was, now = _dump(getattr(started, section)), _dump(getattr(new, section))
        if section == "models":
            out += [section] if set(was) != set(now) else []
            out += [f"models.{size}" for size in sorted(was.keys() & now.keys()) if was[size] != now[size]]
            continue
        if not isinstance(was, dict):
            out += [section] if was != now else []
            continue
        live = _LIVE_KEYS.get(section, set())
        out += [f"{section}.{k}" for k in sorted(set(was) | set(now)) if k not in live and was.get(k) != now.get(k)]
    if started.shutdown_grace_s != new.shutdown_grace_s:
        out.append("shutdown_grace_s")
    return sorted(out)


def rules_settings(started: Settings, new: Settings) -> Settings:
    """What the lanes' rules are computed from after a reload: the cameras the daemon runs, with the
    thresholds and tracking floor of `new`."""
    thresholds = {c.id: c.conf_threshold for c in new.cameras}

    def camera(c: CameraConfig) -> CameraConfig:
        return c.model_copy(update={"conf_threshold": thresholds.get(c.id, c.conf_threshold)})

    engine = started.engine.model_copy(update={"conf_threshold": new.engine.conf_threshold})
    return started.model_copy(
        update={"engine": engine, "tracking": new.tracking, "cameras": [camera(c) for c in started.cameras]}
    )


def set_log_level(level: str) -> None:
    """Log at `level` from now on (the handler, its format and its library filter stay)."""
    number = logging.getLevelNamesMapping()[level.upper()]
    logging.getLogger().setLevel(number)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(number))


class Reloader:
    """Applies a re-read configuration to the running stages (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        *,
        tracking: TrackingStage,
        lines: LinesControl,
        health: HealthServer | None,
        set_rules: Callable[[Settings], None],
        models: ModelsControl | None = None,
        cameras: CamerasControl | None = None,
    ) -> None:
        self._started = settings
        self._live = settings
        self._tracking = tracking
        self._lines = lines
        self._health = health
        self._set_rules = set_rules
        self._models = models
        self._cameras = cameras

    async def reload(self, path: Path) -> bool:
        """Re-read `path` (and the drop-ins) and apply it; False when it is invalid (nothing changed)."""
        try:
            new = await asyncio.get_running_loop().run_in_executor(None, load_settings, path)
        except ConfigError as exc:
            log.error("config_reload_failed", path=str(path), problems=exc.errors)
            return False
        loaded, problems = ({}, []) if self._cameras is None else await self._cameras.load_models(new)
        problems += [] if self._cameras is None else self._cameras.check_set(new)
        if problems:
            log.error("config_reload_failed", path=str(path), problems=problems)
            return False
        changed = self.add_models(loaded, new) + await self.apply_cameras(new)
        changed += self.apply(new) + await self.swap_models(new)
        restart = restart_needed(self._started, new)
        if restart:
            log.warning("config_restart_needed", changed=restart)
        log.info("config_reloaded", path=str(path), changed=changed, restart_needed=restart)
        return True

    def add_models(self, loaded: dict[int, ModelInfo], new: Settings) -> list[str]:
        """Serve the sizes `new` adds to `[models]` (loaded and checked: `CamerasControl.load_models`)."""
        if self._cameras is None or not loaded:
            return []
        added = self._cameras.add_models(loaded, new)
        for size in loaded:
            if self._models is not None:
                self._models.add(size, new.models[size])
        models = {**self._started.models, **{size: new.models[size] for size in loaded}}
        self._started = self._started.model_copy(update={"models": models})
        return added

    async def apply_cameras(self, new: Settings) -> list[str]:
        """Apply `new`'s camera set (`cameras.<id> added`, `removed`, `changed` for each)."""
        if self._cameras is None:
            return []
        changed = await self._cameras.apply_set(new)
        self._cameras.follow(new)
        self._started = self._started.model_copy(update={"cameras": list(new.cameras)})
        return changed

    async def swap_models(self, new: Settings) -> list[str]:
        """Swap each size whose entry in `new` is not the one that serves (`models.<size>` for each
        swapped); one refused stays as it serves and is named as needing a restart."""
        if self._models is None:
            return []
        swapped = await self._models.reload(new)
        self._started = self._started.model_copy(update={"models": self._models.running()})
        return swapped

    def apply(self, new: Settings) -> list[str]:
        """Apply what changed live between what runs and `new`; the names of what changed."""
        was, changed = self._live, []
        after = {c.id: c for c in new.cameras}
        for camera_id in self._lines.camera_ids:
            camera = after.get(camera_id)
            if camera is not None and self._lines.apply(camera_id, CameraLines.of(camera), "reload"):
                changed.append(f"cameras.{camera_id}.lines")
        self._lines.lines_dir = new.tracking.lines_dir
        before = {c.id: c.conf_threshold for c in was.cameras}
        thresholds = [
            f"cameras.{c.id}.conf_threshold"
            for c in new.cameras
            if before.get(c.id, c.conf_threshold) != c.conf_threshold
        ]
        if new.engine.conf_threshold != was.engine.conf_threshold:
            thresholds.append("engine.conf_threshold")
        tracking_changed = new.tracking.model_dump(exclude={"lines_dir", "enabled"}) != was.tracking.model_dump(
            exclude={"lines_dir", "enabled"}
        )
        if thresholds or tracking_changed:
            self._set_rules(rules_settings(self._started, new))
        if tracking_changed:
            self._tracking.set_params(new.tracking)
            changed.append("tracking")
        if new.logging.level != was.logging.level:
            set_log_level(new.logging.level)
            changed.append("logging.level")
        if new.health.basic_auth_users != was.health.basic_auth_users and self._health is not None:
            self._health.set_users(new.health.basic_auth_users)
            changed.append("health.basic_auth_users")
        browser = ("allowed_hosts", "allowed_origins")
        if new.health.model_dump(include=set(browser)) != was.health.model_dump(include=set(browser)):
            if self._health is not None:
                self._health.set_browser_policy(new.health.allowed_hosts, new.health.allowed_origins)
            changed.extend(f"health.{key}" for key in browser if getattr(new.health, key) != getattr(was.health, key))
        self._live = new
        return changed + thresholds


async def serve_reloads(reloader: Reloader, requested: asyncio.Event, path: Path | None) -> None:
    """Run a reload each time `requested` is set (a SIGHUP), one at a time; without a config path
    (the daemon was given settings, not a file) a request is logged as failed."""
    while True:
        await requested.wait()
        requested.clear()
        if path is None:
            log.error("config_reload_failed", path=None, problems=["the daemon was not started from a config file"])
            continue
        await reloader.reload(path)


__all__ = ["Reloader", "restart_needed", "rules_settings", "serve_reloads", "set_log_level"]
