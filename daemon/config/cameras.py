"""A `[[cameras]]` entry: where a camera's stream is, how it is read, and which model takes it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, Self
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator

from daemon.config.base import Seconds, Section, read_secret_file, with_password
from daemon.config.gige import GIGE_SCHEME, GigeConfig, aravis_problem, gige_device
from daemon.config.tracking import LineConfig, TrackingConfig, lines_problem
from daemon.core.frames import MODEL_SIZES
from daemon.core.redaction import SECRETS, redact_url

_CAMERA_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class CameraConfig(Section):
    id: str
    """The camera's name: 1-64 letters, digits, `_`, `.`, `-`, unique; it names the camera's streams
    (`{camera}` in `[redis] stream`, `objects_stream`), its events, metrics and log lines."""
    url: SecretStr
    """rtsp://, rtsps://, a local file path / file:// URL (replay of a recording), or `gige://<device>`:
    a GigE Vision camera read directly (Aravis), `<device>` being its id as Aravis lists it (e.g.
    `Aravis-Fake-GV01`), its serial number or its IP address."""
    password_file: Path | None = None
    """File holding the stream's password (e.g. a systemd credential), read at each connect; it
    replaces a password in `url`. Not used for file sources."""
    model: int | None = None
    """Model input size override (416/640/800); default: nearest to the frame's longer side."""
    enabled: bool = True
    """false: the camera is not run (and the PLC bridge serves no block or nodes for it)."""
    transport: Literal["tcp", "udp"] = "tcp"
    """RTSP media transport (FFmpeg's `rtsp_transport`): RTP interleaved over the TCP connection, or UDP."""
    open_timeout_s: Seconds = 5.0
    """RTSP sources: the longest wait for the stream to open; then the attempt fails and is retried.
    (GigE: Aravis' own control timeouts apply, about 2.5 s for a camera that does not answer.)"""
    read_timeout_s: Seconds = 2.0
    """RTSP sources: the socket read timeout (FFmpeg's `timeout`); a frozen server surfaces as a read
    error after about 2 x this, and the camera reconnects. GigE (free run or software trigger): no
    frame at all (complete or not) for this long ends the connection."""
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
    """Lowest score this camera publishes (None: `[engine] conf_threshold`)."""
    classes: list[str] | None = None
    """Publish only these labels (default: all)."""
    shard: int | None = Field(None, ge=0)
    """Run this camera on this shard (`[instance] shard`) instead of the rendezvous rule."""
    tracking: bool | None = None
    """Track this camera's parts (default: `[tracking] enabled`)."""
    mm_per_px: float | None = Field(None, gt=0, le=1000)
    """Calibration of the belt plane: millimetres per pixel (speeds in mm/s, gate arrival times)."""
    lines: list[LineConfig] = Field(default_factory=list)
    """Counting lines (`[[cameras.lines]]`), normalised coordinates; each may have gates."""
    gige: GigeConfig | None = None
    """`gige://` cameras: the camera's settings (`[cameras.gige]`: frame rate, exposure, gain, pixel
    format, packet size, trigger), applied at open and after every reconnect."""

    @model_validator(mode="after")
    def _check_gige(self) -> Self:
        if self.gige is not None and self.kind != "gige":
            raise ValueError("[cameras.gige] is for gige:// cameras only")
        if self.kind == "gige" and self.password_file is not None:
            raise ValueError("password_file is not used by gige:// cameras")
        return self

    @model_validator(mode="after")
    def _check_lines(self) -> Self:
        problem = lines_problem(self.lines, self.mm_per_px)
        if problem is not None:
            raise ValueError(problem)
        return self

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
        if scheme == GIGE_SCHEME:
            if not gige_device(url):
                raise ValueError("gige:// needs a device: gige://<device id, serial number or IP address>")
            problem = aravis_problem()
            if problem is not None:
                raise ValueError(problem)
            return v
        if scheme not in ("rtsp", "rtsps", "file", ""):
            raise ValueError(f"must be rtsp://, rtsps://, file://, gige:// or a path (got {redact_url(url)!r})")
        SECRETS.add_from_url(url)
        return v

    @field_validator("model")
    @classmethod
    def _check_model(cls, v: int | None) -> int | None:
        if v is not None and v not in MODEL_SIZES:
            raise ValueError(f"must be one of {list(MODEL_SIZES)}")
        return v

    def tracked(self, cfg: TrackingConfig) -> bool:
        """Whether this camera's parts are tracked: its own `tracking`, else `[tracking] enabled`
        (one rule for the inference room, which keeps the tracker's weak detections, and the tracking room)."""
        return cfg.enabled if self.tracking is None else self.tracking

    @property
    def kind(self) -> Literal["rtsp", "file", "gige"]:
        """How the camera is read: RTSP (rtsp://, rtsps://), a recording (file), or GigE Vision."""
        scheme = urlsplit(self.url.get_secret_value()).scheme
        if scheme in ("file", ""):
            return "file"
        return "gige" if scheme == GIGE_SCHEME else "rtsp"

    @property
    def is_file(self) -> bool:
        return self.kind == "file"

    @property
    def gige_device(self) -> str:
        """A gige:// camera's device (id, serial number or address), as Aravis opens it."""
        return gige_device(self.url.get_secret_value())

    @property
    def gige_settings(self) -> GigeConfig:
        """The `[cameras.gige]` settings (defaults where the table is left out)."""
        return self.gige if self.gige is not None else GigeConfig()

    def effective_url(self) -> str:
        url = self.url.get_secret_value()
        if self.password_file is not None and self.kind == "rtsp":
            password = read_secret_file(self.password_file)
            SECRETS.add(password)
            url = with_password(url, password)
        if urlsplit(url).scheme == "file":
            url = urlsplit(url).path
        return url

    def safe_url(self) -> str:
        return redact_url(self.url.get_secret_value())


__all__ = ["CameraConfig"]
