"""Settings: the whole configuration, one field per section (each section's model in its own
module, `extra="forbid"` everywhere), and `load_settings`, which reads it.

Sources, highest priority first: environment (`BELTSIGHT_` prefix, `__` between levels,
e.g. `BELTSIGHT_REDIS__URL`), the TOML file, defaults. This module is the only place the
environment is read. Secrets may come from files (`*_file` keys, e.g. systemd credentials).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Self

from pydantic import (
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from daemon.config.base import Seconds
from daemon.config.bridge import BridgeConfig
from daemon.config.cameras import CameraConfig
from daemon.config.cameras_dropin import CamerasInvalidError
from daemon.config.cameras_dropin import with_dropins as with_camera_dropins
from daemon.config.capture import CaptureConfig
from daemon.config.clips import ClipsConfig
from daemon.config.engine import EngineConfig
from daemon.config.health import HealthConfig
from daemon.config.lines_dropin import LinesInvalidError, with_dropins
from daemon.config.logging import LoggingConfig
from daemon.config.models import ModelConfig
from daemon.config.models_dropin import ModelsDropinInvalidError, Resolved, resolve
from daemon.config.models_dropin import read as read_models_dropin
from daemon.config.redis import RedisConfig
from daemon.config.review import ReviewConfig
from daemon.config.sharding import InstanceConfig, runs
from daemon.config.snapshots import SnapshotsConfig
from daemon.config.thermal import ThermalConfig
from daemon.config.tracking import TrackingConfig
from daemon.core.frames import MODEL_SIZES
from daemon.core.redaction import redact_url

DEFAULT_CONFIG_PATH = Path("/etc/beltsight/beltsight.toml")
CONFIG_ENV_VAR = "BELTSIGHT_CONFIG"
EX_CONFIG = 78


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="BELTSIGHT_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    redis: RedisConfig = RedisConfig()
    """The `[redis]` section: the connection, stream names, buffering through an outage."""
    models: dict[int, ModelConfig] = Field(default_factory=dict)
    """Model input size -> ONNX file, plain (`640 = "file.onnx"`) or a `[models.640]` table with
    its layout and input convention (`daemon.config.models`); relative paths are relative to
    the config file."""
    engine: EngineConfig = EngineConfig()
    """The `[engine]` section: execution providers, batching, threads, thresholds."""
    logging: LoggingConfig = LoggingConfig()
    """The `[logging]` section: log format and level."""
    health: HealthConfig = HealthConfig()
    """The `[health]` section: the HTTP endpoint for /healthz, /metrics and the live view."""
    thermal: ThermalConfig = ThermalConfig()
    """Thermal throttling: sensors, the limit held, the pause (see daemon/thermal/governor.py)."""
    tracking: TrackingConfig = TrackingConfig()
    """Tracker defaults for every camera (daemon/tracking); lines and gates are per camera."""
    snapshots: SnapshotsConfig = SnapshotsConfig()
    """The `[snapshots]` section: a JPEG per line crossing (daemon/publish/snapshots)."""
    clips: ClipsConfig = ClipsConfig()
    """The `[clips]` section: a video clip around each line crossing, remuxed (daemon/publish/clips)."""
    capture: CaptureConfig = CaptureConfig()
    """The `[capture]` section: frames the model is unsure of, as a YOLO dataset (daemon/publish/capture)."""
    review: ReviewConfig = ReviewConfig()
    """The `[review]` section: one record per crossing, its APIs and the review page (daemon/ops/review)."""
    cameras: list[CameraConfig] = Field(default_factory=list)
    """The `[[cameras]]` entries, one per camera (ids unique)."""
    cameras_dir: Path = Path("/var/lib/beltsight/cameras")
    """Where cameras added, replaced or removed live (`PUT`/`DELETE /api/cameras/{id}`) are kept: one
    `<camera>.toml` per camera with the keys of its `[[cameras]]` table, which replaces or adds that
    camera, and a `<camera>.removed` mark per camera removed, which takes it out of this file's list
    (`daemon.config.cameras_dropin`), so this file is never rewritten."""
    bridge: BridgeConfig = BridgeConfig()
    """The `[bridge]` section: the PLC bridge (`beltsight bridge`), OPC UA and Modbus TCP."""
    instance: InstanceConfig = InstanceConfig()
    """Which share of the cameras this instance runs (see daemon.config.sharding)."""
    shutdown_grace_s: Seconds = 10.0
    """On SIGTERM/SIGINT: the time to finish in-flight batches and flush Redis (or spill to the
    spool) before exiting; what is left is logged as `unflushed`. `beltsight bridge`: the time to
    serve and acknowledge its batch in flight (`bridge_drain_overdue` past it). Keep it well under
    the systemd units' `TimeoutStopSec` (30 s in beltsight.service, beltsight@.service and
    beltsight-bridge.service; raise it there with a drop-in for a longer grace): past that, systemd
    kills the process mid-drain."""
    _models_resolved: Resolved | None = PrivateAttr(None)
    _camera_sources: dict[str, str] = PrivateAttr(default_factory=dict)

    @property
    def camera_sources(self) -> dict[str, str]:
        """Where each camera comes from: `the config file` (the default) or `drop-in <path>`."""
        return {c.id: self._camera_sources.get(c.id, "the config file") for c in self.cameras}

    @property
    def models_resolved(self) -> Resolved:
        """Where each of `models` comes from: the config file or the models drop-in (`load_settings`
        sets it; settings built otherwise, or copied with other models, have every model from the file)."""
        resolved = self._models_resolved
        if resolved is None or resolved.models != self.models:
            return Resolved(dict(self.models), dict(self.models))
        return resolved

    @field_validator("models")
    @classmethod
    def _check_models(cls, v: dict[int, ModelConfig]) -> dict[int, ModelConfig]:
        bad = sorted(k for k in v if k not in MODEL_SIZES)
        if bad:
            raise ValueError(f"model sizes {bad} are not supported; use {list(MODEL_SIZES)}")
        return v

    @model_validator(mode="after")
    def _check_cameras(self) -> Self:
        seen: set[str] = set()
        for cam in self.cameras:
            if cam.id in seen:
                raise ValueError(f"camera id {cam.id!r} is used twice")
            seen.add(cam.id)
            if (problem := self.camera_problem(cam)) is not None:
                raise ValueError(f"camera {cam.id!r} {problem}")
        if not self.models:
            raise ValueError("[models] is empty: configure at least one of 416, 640, 800")
        return self

    def camera_problem(self, cam: CameraConfig) -> str | None:
        """What these settings have against `cam` beyond its own model (its `model` size, its `shard`)."""
        if cam.model is not None and cam.model not in self.models:
            return f"asks for model {cam.model}, which [models] lacks"
        if cam.shard is not None and cam.shard >= self.instance.shards:
            return f"is pinned to shard {cam.shard}; [instance] shards is {self.instance.shards}"
        return None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, then the environment (no .env, no secrets dir); `load_settings` adds the file."""
        return init_settings, env_settings

    def enabled_cameras(self) -> list[CameraConfig]:
        return [c for c in self.cameras if c.enabled]

    def instance_cameras(self) -> list[CameraConfig]:
        """The enabled cameras this instance runs (`[instance]`, daemon.config.sharding)."""
        return [c for c in self.enabled_cameras() if runs(c.id, self.instance, c.shard)]

    def redacted(self) -> dict[str, Any]:
        """The effective config as plain data with every secret replaced (for check-config)."""
        data = self.model_dump(mode="json", by_alias=True)  # keys as written in TOML (`register`)
        data["redis"]["url"] = redact_url(self.redis.url.get_secret_value())
        for cam_data, cam in zip(data["cameras"], self.cameras, strict=True):
            cam_data["url"] = cam.safe_url()
        return data


class ConfigError(Exception):
    """The configuration is invalid; `errors` lists every problem with its key path."""

    def __init__(self, source: str, errors: list[str]) -> None:
        self.source = source
        self.errors = errors
        super().__init__(f"invalid configuration in {source}:\n" + "\n".join(f"  - {e}" for e in errors))


def resolve_config_path(cli_path: str | None) -> Path:
    if cli_path:
        return Path(cli_path)
    env = os.environ.get(CONFIG_ENV_VAR)
    return Path(env) if env else DEFAULT_CONFIG_PATH


def _format_error(err: Any) -> str:
    loc = ".".join(str(part) for part in err["loc"]) or "(top level)"
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    return f"{loc}: {msg}"


def load_settings(path: Path) -> Settings:
    """Load and validate the config file plus environment overrides, or raise ConfigError."""
    if not path.is_file():
        raise ConfigError(str(path), [f"config file not found: {path}"])
    try:
        settings = _read(path)
    except ValidationError as exc:
        raise ConfigError(str(path), [_format_error(e) for e in exc.errors()]) from None
    except (ValueError, OSError) as exc:  # TOML syntax errors surface as ValueError (TOMLDecodeError)
        raise ConfigError(str(path), [f"cannot parse: {redact_url(str(exc))}"]) from None
    try:  # the cameras put or removed live (cameras_dir), then their lines ([tracking] lines_dir), over the file's
        cameras, camera_sources = with_camera_dropins(settings.cameras, settings.cameras_dir)
        problems = [f"cameras.{c.id}: {p}" for c in cameras if (p := settings.camera_problem(c)) is not None]
        if problems:
            raise CamerasInvalidError(problems)
        cameras = with_dropins(cameras, settings.tracking.lines_dir)
    except CamerasInvalidError as exc:
        raise ConfigError(str(path), exc.problems) from None
    except LinesInvalidError as exc:
        raise ConfigError(str(path), exc.problems) from None
    settings = _resolve_relative_paths(settings.model_copy(update={"cameras": cameras}), path.parent)
    try:  # the models swapped through the API ([engine] models_dropin) override the file's, until it changes
        resolved = resolve(settings.models, read_models_dropin(settings.engine.models_dropin))
    except ModelsDropinInvalidError as exc:
        raise ConfigError(str(path), exc.problems) from None
    settings = settings.model_copy(update={"models": resolved.models})
    settings._models_resolved = resolved
    settings._camera_sources = camera_sources
    return settings


def _read(path: Path) -> Settings:
    """Settings from the environment over the TOML file at `path`. pydantic-settings asks a
    classmethod for its sources, so each call makes a subclass that adds this file: concurrent
    loads of different files never see each other's path."""

    class FromFile(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return init_settings, env_settings, TomlConfigSettingsSource(settings_cls, toml_file=path)

    loaded = FromFile()
    return Settings.model_construct(loaded.model_fields_set, **dict(loaded))


def _resolve_relative_paths(settings: Settings, base: Path) -> Settings:
    models = {size: m.resolved(base) for size, m in settings.models.items()}
    return settings.model_copy(update={"models": models})
