"""The `[health]` section: the HTTP listener for /healthz, /metrics and the live view, its limits,
and what locks it when it is exposed (TLS, basic authentication with bcrypt hashes)."""

from __future__ import annotations

import re
import ssl
from pathlib import Path
from typing import Self

from pydantic import Field, field_serializer, field_validator, model_validator

from daemon.config.base import Seconds, Section
from daemon.core.netaddr import normalise_origin, parse_host_port

BCRYPT_HASH = re.compile(r"\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}")
"""A bcrypt hash as `bcrypt.hashpw`, `htpasswd -B` and Prometheus' exporter-toolkit write it."""
HOST_ENTRY = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(:[0-9]{1,5})?")
"""An `allowed_hosts` entry: a name or an address (IPv6 in brackets), optionally `:port`."""


class HealthConfig(Section):
    listen: str | None = "127.0.0.1:9108"
    """host:port for /healthz, /metrics and the live view (`/`); empty to disable. Loopback by
    default: expose it off the box only with TLS and `basic_auth_users`, behind a reverse proxy
    with auth, or through an SSH tunnel."""
    max_connections: int = Field(64, ge=1, le=4096)
    """Connections open at once; beyond it the oldest idle one is closed, or the new one refused."""
    request_timeout_s: Seconds = 5.0
    """Deadline for a whole connection, from accept to the end of the response (the TLS handshake included)."""
    snapshot_min_interval_s: float = Field(1.0, ge=0.0, le=60.0)
    """A camera's live-view JPEG is drawn and encoded at most once per interval (shared by all viewers)."""
    tls_cert_file: Path | None = None
    """Server certificate (PEM, the chain after it): the endpoint serves HTTPS only (TLS 1.2+)."""
    tls_key_file: Path | None = None
    """Private key (PEM, not encrypted) of `tls_cert_file`."""
    basic_auth_users: dict[str, str] = Field(default_factory=dict, repr=False)
    """`{ name = "<bcrypt hash>" }`: every request needs one of these users' password (HTTP basic
    authentication); empty: no authentication."""
    healthz_open: bool = True
    """With `basic_auth_users`: `/healthz` (and `/health`) still answer without credentials, for
    the local watchdog probe. false: they need them too."""

    allowed_hosts: list[str] = Field(default_factory=list)
    """Host names (or `name:port`) the endpoint answers to besides its loopback names while it
    listens on loopback only, e.g. the name a reverse proxy on the box forwards; any other `Host`
    gets `403` on every route but `/healthz` (DNS rebinding)."""
    allowed_origins: list[str] = Field(default_factory=list)
    """Origins (`https://hmi.plant.example:8443`) whose pages may write (the lines and models APIs)
    besides the endpoint's own; a write from any other `Origin` gets `403`."""

    @field_validator("allowed_hosts")
    @classmethod
    def _check_hosts(cls, v: list[str]) -> list[str]:
        for entry in v:
            if not HOST_ENTRY.fullmatch(entry.strip()):
                raise ValueError(f"{entry!r}: expected a host name or address, optionally with :port")
        return [entry.strip().lower() for entry in v]

    @field_validator("allowed_origins")
    @classmethod
    def _check_origins(cls, v: list[str]) -> list[str]:
        kept = [normalise_origin(entry) for entry in v]
        bad = [entry for entry, origin in zip(v, kept, strict=True) if origin is None]
        if bad:
            raise ValueError(f"{bad}: expected origins like https://hmi.example:8443 (scheme, host, optional port)")
        return [origin for origin in kept if origin is not None]

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

    @field_validator("basic_auth_users")
    @classmethod
    def _check_users(cls, v: dict[str, str]) -> dict[str, str]:
        for name, hashed in v.items():
            if not name or ":" in name:
                raise ValueError(f"user name {name!r}: must be non-empty, without ':'")
            if BCRYPT_HASH.fullmatch(hashed) is None:
                raise ValueError(f"user {name!r}: not a bcrypt hash ($2b$<cost>$<53 characters>)")
        return v

    @field_serializer("basic_auth_users")
    def _hide_hashes(self, v: dict[str, str]) -> dict[str, str]:
        """check-config prints the user names, not their hashes."""
        return dict.fromkeys(v, "(bcrypt hash)")

    @model_validator(mode="after")
    def _check_tls(self) -> Self:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            missing = "tls_key_file" if self.tls_key_file is None else "tls_cert_file"
            raise ValueError(f"tls_cert_file and tls_key_file go together: {missing} is missing")
        self.tls_context()  # unreadable, not PEM, encrypted, or a key of another certificate: an error now
        return self

    def tls_context(self) -> ssl.SSLContext | None:
        """The server's TLS context (TLS 1.2 or later), or None without `tls_cert_file`."""
        if self.tls_cert_file is None or self.tls_key_file is None:
            return None
        for key, path in (("tls_cert_file", self.tls_cert_file), ("tls_key_file", self.tls_key_file)):
            try:
                path.read_bytes()
            except OSError as exc:
                raise ValueError(f"{key}: cannot read {path}: {exc.strerror}") from None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.tls_cert_file, self.tls_key_file, password=_no_password)
        except (ssl.SSLError, ValueError) as exc:
            raise ValueError(
                f"tls_cert_file {self.tls_cert_file} and tls_key_file {self.tls_key_file} do not load"
                f" as a PEM certificate and its (unencrypted) key: {exc}"
            ) from None
        return context


def _no_password() -> bytes:
    """An encrypted key is refused, not prompted for on a terminal the daemon does not have."""
    raise ValueError("the key is encrypted (use an unencrypted key file, readable by the daemon only)")


__all__ = ["HealthConfig"]
