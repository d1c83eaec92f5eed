"""The `[health]` section: the HTTP listener for /healthz, /metrics and the live view, and its limits."""

from __future__ import annotations

from pydantic import Field, field_validator

from daemon.config.base import Seconds, Section
from daemon.core.netaddr import parse_host_port


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
        try:
            parse_host_port(v)
        except ValueError:
            raise ValueError("must be host:port, e.g. 127.0.0.1:9108") from None
        return v


__all__ = ["HealthConfig"]
