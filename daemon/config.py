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
from urllib.parse import quote, urlsplit, urlunsplit

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

from daemon.config_engine import EngineConfig, Seconds, Section
from daemon.frames import MODEL_SIZES
from daemon.redaction import SECRETS, redact_url

DEFAULT_CONFIG_PATH = Path("/etc/beltsight/beltsight.toml")
CONFIG_ENV_VAR = "BELTSIGHT_CONFIG"
EX_CONFIG = 78

def _read_secret_file(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ValueError(f"cannot read secret file {path}: {exc.strerror}") from None


def _with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    user = parts.username or ""
    netloc = f"{user}:{quote(password, safe='')}@{host}"
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


class RedisConfig(Section):
    url: SecretStr = SecretStr("redis://127.0.0.1:6379/0")
    """redis://, rediss:// or unix://; a password in the URL is treated as a secret."""
    password_file: Path | None = None
    """File holding the password (overrides one in the URL), e.g. a systemd credential."""
    stream: str = "beltsight:detections:{camera}"
    events_stream: str = "beltsight:events"
    maxlen: int = Field(100_000, gt=0)
    """Approximate per-stream cap (XADD MAXLEN ~)."""
    events_maxlen: int = Field(10_000, gt=0)
    buffer_max: int = Field(50_000, gt=0)
    """Entries accepted but not yet published that are kept in memory through an outage."""
    spool_dir: Path | None = None
    """Optional on-disk spool for outages longer than the memory buffer allows."""
    spool_max_mb: int = Field(512, gt=0)
    publish_batch: int = Field(256, gt=0)
    """Most entries sent in one pipeline."""
    connect_timeout_s: Seconds = 2.0
    socket_timeout_s: Seconds = 5.0

    @field_validator("url")
    @classmethod
    def _check_url(cls, v: SecretStr) -> SecretStr:
        url = v.get_secret_value()
        scheme = urlsplit(url).scheme
        if scheme not in ("redis", "rediss", "unix"):
            raise ValueError(f"must start with redis://, rediss:// or unix:// (got {redact_url(url)!r})")
        SECRETS.add_from_url(url)
        return v

    @field_validator("stream")
    @classmethod
    def _check_stream(cls, v: str) -> str:
        if "{camera}" not in v:
            raise ValueError("must contain '{camera}' (one stream per camera)")
        return v

    def effective_url(self) -> str:
        url = self.url.get_secret_value()
        if self.password_file is not None:
            password = _read_secret_file(self.password_file)
            SECRETS.add(password)
            url = _with_password(url, password)
        return url

    def stream_for(self, camera_id: str) -> str:
        return self.stream.replace("{camera}", camera_id)


class LoggingConfig(Section):
    format: Literal["auto", "json", "console"] = "auto"
    """auto: console renderer on a terminal, JSON lines otherwise (journald)."""
    level: Literal["debug", "info", "warning", "error"] = "info"


class HealthConfig(Section):
    listen: str | None = "127.0.0.1:9108"
    """host:port for /healthz and /metrics; empty to disable."""

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
    models: dict[int, Path] = Field(default_factory=dict)
    """Model input size -> ONNX file (relative paths are relative to the config file)."""
    engine: EngineConfig = EngineConfig()
    logging: LoggingConfig = LoggingConfig()
    health: HealthConfig = HealthConfig()
    cameras: list[CameraConfig] = Field(default_factory=list)
    shutdown_grace_s: Seconds = 10.0

    @field_validator("models")
    @classmethod
    def _check_models(cls, v: dict[int, Path]) -> dict[int, Path]:
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
    models = {size: (p if p.is_absolute() else (base / p).resolve()) for size, p in settings.models.items()}
    return settings.model_copy(update={"models": models})
