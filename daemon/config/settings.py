"""Settings: one pydantic model per config section, `extra="forbid"` everywhere.

Sources, highest priority first: environment (`BELTSIGHT_` prefix, `__` between levels,
e.g. `BELTSIGHT_REDIS__URL`), the TOML file, defaults. This module is the only place the
environment is read. Secrets may come from files (`*_file` keys, e.g. systemd credentials).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal, Self
from urllib.parse import urlsplit

from pydantic import (
    Field,
    SecretStr,
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

from daemon.config.engine import EngineConfig, Seconds, Section
from daemon.config.models import ModelConfig
from daemon.config.redis import RedisConfig as RedisConfig  # noqa: PLC0414 - re-exported: daemon.config.settings.RedisConfig
from daemon.config.redis import read_secret_file as _read_secret_file
from daemon.config.redis import with_password as _with_password
from daemon.config.sharding import InstanceConfig, runs
from daemon.config.thermal import ThermalConfig as ThermalConfig  # noqa: PLC0414 - re-exported
from daemon.core.frames import MODEL_SIZES
from daemon.core.redaction import SECRETS, redact_url

DEFAULT_CONFIG_PATH = Path("/etc/beltsight/beltsight.toml")
CONFIG_ENV_VAR = "BELTSIGHT_CONFIG"
EX_CONFIG = 78


class LoggingConfig(Section):
    format: Literal["auto", "json", "console"] = "auto"
    """auto: console renderer on a terminal, JSON lines otherwise (journald)."""
    level: Literal["debug", "info", "warning", "error"] = "info"


class HealthConfig(Section):
    listen: str | None = "127.0.0.1:9108"
    """host:port for /healthz, /metrics and the live view (`/`); empty to disable. Loopback by
    default: expose it off the box only behind a reverse proxy with auth or an SSH tunnel."""
    max_connections: int = Field(64, ge=1, le=4096)
    """Connections open at once; beyond it the oldest idle one is closed, or the new one refused."""
    request_timeout_s: Seconds = 5.0
    """Deadline for a whole connection, from accept to the end of the response."""
    snapshot_min_interval_s: float = Field(1.0, ge=0.0, le=60.0)
    """A camera's live-view JPEG is drawn and encoded at most once per interval (shared by all viewers)."""

    @field_validator("listen")
    @classmethod
    def _check_listen(cls, v: str | None) -> str | None:
        if not v:
            return None
        _host, sep, port = v.rpartition(":")
        if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError("must be host:port, e.g. 127.0.0.1:9108")
        return v


_CAMERA_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class CameraConfig(Section):
    id: str
    url: SecretStr
    """rtsp://, rtsps:// or a local file path / file:// URL (replay of a recording)."""
    password_file: Path | None = None
    model: int | None = None
    """Model input size override (416/640/800); default: nearest to the frame's longer side."""
    enabled: bool = True
    transport: Literal["tcp", "udp"] = "tcp"
    open_timeout_s: Seconds = 5.0
    read_timeout_s: Seconds = 2.0
    stall_s: Seconds = 5.0
    """No frame for this long on an open connection: the camera is stalled, reconnect."""
    decode_threads: int = Field(1, ge=0, le=16)
    """FFmpeg decoder threads (0: FFmpeg's choice). One is cheapest in CPU for the one-slice
    H.264 most cameras send (4 bench clips decoded side by side: 1.8-1.9 ms of CPU per 640x480
    frame against 2.0-2.1 with FFmpeg's default, and no idle decoder threads); raise it only for
    a stream one core cannot decode in real time (4K at high frame rates)."""
    reconnect_max_s: float = Field(4.0, ge=0.5)
    """Longest wait between reconnect attempts (capped exponential backoff, full jitter). Kept short:
    a camera back after an outage must publish again within seconds (a part on the belt passes
    by), and one connection attempt to a camera costs next to nothing."""
    realtime: bool = True
    """File sources: pace at the file's frame rate. False: replay as fast as the pipeline takes
    frames, waiting instead of dropping (for evaluation: every frame is processed)."""
    loop: bool = False
    """File sources: start again at the end."""
    conf_threshold: float | None = Field(None, ge=0, le=1)
    classes: list[str] | None = None
    """Publish only these labels (default: all)."""
    shard: int | None = Field(None, ge=0)
    """Run this camera on this shard (`[instance] shard`) instead of the rendezvous rule."""

    @field_validator("id")
    @classmethod
    def _check_id(cls, v: str) -> str:
        if not _CAMERA_ID.match(v):
            raise ValueError("must be 1-64 characters of letters, digits, '_', '.', '-'")
        return v

    @field_validator("url")
    @classmethod
    def _check_url(cls, v: SecretStr) -> SecretStr:
        url = v.get_secret_value()
        scheme = urlsplit(url).scheme
        if scheme not in ("rtsp", "rtsps", "file", ""):
            raise ValueError(f"must be rtsp://, rtsps://, file:// or a path (got {redact_url(url)!r})")
        SECRETS.add_from_url(url)
        return v

    @field_validator("model")
    @classmethod
    def _check_model(cls, v: int | None) -> int | None:
        if v is not None and v not in MODEL_SIZES:
            raise ValueError(f"must be one of {list(MODEL_SIZES)}")
        return v

    @property
    def is_file(self) -> bool:
        return urlsplit(self.url.get_secret_value()).scheme in ("file", "")

    def effective_url(self) -> str:
        url = self.url.get_secret_value()
        if self.password_file is not None and not self.is_file:
            password = _read_secret_file(self.password_file)
            SECRETS.add(password)
            url = _with_password(url, password)
        if urlsplit(url).scheme == "file":
            url = urlsplit(url).path
        return url

    def safe_url(self) -> str:
        return redact_url(self.url.get_secret_value())


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="BELTSIGHT_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    redis: RedisConfig = RedisConfig()
    models: dict[int, ModelConfig] = Field(default_factory=dict)
    """Model input size -> ONNX file, plain (`640 = "file.onnx"`) or a `[models.640]` table with
    its layout and input convention (`daemon.config.models`); relative paths are relative to
    the config file."""
    engine: EngineConfig = EngineConfig()
    logging: LoggingConfig = LoggingConfig()
    health: HealthConfig = HealthConfig()
    thermal: ThermalConfig = ThermalConfig()
    """Thermal throttling: sensors, the limit held, the pause (see daemon/thermal/governor.py)."""
    cameras: list[CameraConfig] = Field(default_factory=list)
    instance: InstanceConfig = InstanceConfig()
    """Which share of the cameras this instance runs (see daemon.config.sharding)."""
    shutdown_grace_s: Seconds = 10.0

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
            if cam.model is not None and cam.model not in self.models:
                raise ValueError(f"camera {cam.id!r} asks for model {cam.model}, which [models] lacks")
            if cam.shard is not None and cam.shard >= self.instance.shards:
                raise ValueError(
                    f"camera {cam.id!r} is pinned to shard {cam.shard}; [instance] shards is {self.instance.shards}"
                )
        if not self.models:
            raise ValueError("[models] is empty: configure at least one of 416, 640, 800")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_path = _TOML_PATH.get("path")
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml_path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_path))
        return tuple(sources)

    def enabled_cameras(self) -> list[CameraConfig]:
        return [c for c in self.cameras if c.enabled]

    def instance_cameras(self) -> list[CameraConfig]:
        """The enabled cameras this instance runs (`[instance]`, daemon.config.sharding)."""
        return [c for c in self.enabled_cameras() if runs(c.id, self.instance, c.shard)]

    def redacted(self) -> dict[str, Any]:
        """The effective config as plain data with every secret replaced (for check-config)."""
        data = self.model_dump(mode="json")
        data["redis"]["url"] = redact_url(self.redis.url.get_secret_value())
        for cam_data, cam in zip(data["cameras"], self.cameras, strict=True):
            cam_data["url"] = cam.safe_url()
        return data


# The TOML path is chosen at load time; pydantic-settings reads sources through a classmethod.
_TOML_PATH: dict[str, Path | None] = {"path": None}


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
    _TOML_PATH["path"] = path
    try:
        settings = Settings()
    except ValidationError as exc:
        raise ConfigError(str(path), [_format_error(e) for e in exc.errors()]) from None
    except (ValueError, OSError) as exc:  # TOML syntax errors surface as ValueError (TOMLDecodeError)
        raise ConfigError(str(path), [f"cannot parse: {redact_url(str(exc))}"]) from None
    finally:
        _TOML_PATH["path"] = None
    return _resolve_relative_paths(settings, path.parent)


def _resolve_relative_paths(settings: Settings, base: Path) -> Settings:
    models = {size: m.resolved(base) for size, m in settings.models.items()}
    return settings.model_copy(update={"models": models})
