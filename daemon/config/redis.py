"""The `[redis]` section: one Redis, Redis under Sentinel or a Redis Cluster, TLS, durability through a
failover, dead-connection detection."""

from __future__ import annotations

from pathlib import Path
from typing import Self
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator

from daemon.config.base import Seconds, Section, read_secret_file, with_password
from daemon.core.netaddr import parse_host_port
from daemon.core.redaction import SECRETS, redact_url


class RedisConfig(Section):
    url: SecretStr = SecretStr("redis://127.0.0.1:6379/0")
    """redis://, rediss:// (TLS) or unix://; a password in the URL is treated as a secret.
    With `cluster = true`: any node of the cluster (db 0)."""
    password_file: Path | None = None
    """File holding the password (overrides one in the URL), e.g. a systemd credential."""
    stream: str = "beltsight:detections:{camera}"
    """Per-camera detections stream, one entry per processed frame; `{camera}` is the camera id."""
    objects_stream: str = "beltsight:objects:{camera}"
    """Per-camera stream of tracked objects: `new`, `crossed`, `end` (see the objects stream)."""
    events_stream: str = "beltsight:events"
    """The one stream of status events (`camera_up`, `camera_down`, `breaker_open`, ...)."""
    maxlen: int = Field(100_000, gt=0)
    """Approximate cap of each camera's detections and objects streams (XADD MAXLEN ~)."""
    events_maxlen: int = Field(10_000, gt=0)
    """Approximate cap of `events_stream` (XADD MAXLEN ~)."""
    buffer_max: int = Field(50_000, gt=0)
    """Entries accepted but not yet published that are kept in memory through an outage."""
    spool_dir: Path | None = None
    """Optional on-disk spool for outages longer than the memory buffer allows."""
    spool_max_mb: int = Field(512, gt=0)
    """Cap on the spool's size in MiB: over it the oldest records are dropped (`spool_full`)."""
    spool_max_bytes: int | None = Field(None, gt=0)
    """The same cap in bytes; with both set, the smaller wins (`spool_cap_bytes`)."""
    spool_after_s: Seconds = 1.0
    """With a spool, an entry not in Redis after this long goes to the disk (group commits on the
    spool's writer thread), however much room the memory buffer has: what a crash can lose."""
    publish_batch: int = Field(256, gt=0)
    """Most entries sent in one pipeline."""
    connect_timeout_s: Seconds = 2.0
    """Longest wait to open a connection to Redis (or a sentinel or cluster node)."""
    socket_timeout_s: Seconds = 5.0
    """Longest wait for one send or one reply: a connection that stops answering mid-command
    (half-open behind a switch reboot) is given up within 2 x socket_timeout_s."""
    keepalive_s: Seconds = 10.0
    """An idle connection is probed by TCP keepalive after this long (then every keepalive_s / 3,
    3 probes: a dead peer is noticed within 2 x keepalive_s) and PINGed before it is used again."""

    cluster: bool = False
    """Redis Cluster: `url` names any node; streams spread over the cluster's slots (redis-py's
    asyncio cluster client: writes grouped by node, MOVED/ASK and failovers followed)."""
    startup_nodes: list[str] = Field(default_factory=list)
    """More seed nodes (`host:port`) besides the one in `url`, tried in order when it is down."""
    min_replicas: int = Field(0, ge=0)
    """Keep each entry buffered until Redis confirms it reached this many replicas (`WAIT` after
    each pipelined batch); 0: an entry counts once its master acknowledged it."""
    wait_timeout_ms: int = Field(500, gt=0)
    """How long one `WAIT` may block for the replicas (must be under socket_timeout_s)."""
    tls_ca_file: Path | None = None
    """CA certificate(s) (PEM) that signed the server's certificate; default: the system's CAs."""
    tls_cert_file: Path | None = None
    """Client certificate (PEM) for servers that ask for one (mutual TLS, `tls-auth-clients`)."""
    tls_key_file: Path | None = None
    """Private key (PEM) of `tls_cert_file`."""
    tls_verify: bool = True
    """Verify the server's certificate chain. false: accept any certificate (logged at startup)."""
    tls_check_hostname: bool = True
    """Check that the certificate names the host in `url`. false: logged at startup."""

    sentinels: list[str] = Field(default_factory=list)
    """Redis Sentinel (`host:port` of each sentinel): the master is looked up by `sentinel_master`
    on every (re)connect, so a failover is followed. `url` then gives the scheme (rediss://: TLS to
    the master and the sentinels), user, password and db; its host is not used."""
    sentinel_master: str | None = None
    """The name the sentinels monitor the master under (`sentinel monitor <name> ...`)."""
    sentinel_username: str | None = None
    """ACL user on the sentinels (default: none, or `default` with a password)."""
    sentinel_password_file: Path | None = None
    """File holding the sentinels' password (`requirepass` / the ACL user's), as `password_file`."""

    @field_validator("url")
    @classmethod
    def _check_url(cls, v: SecretStr) -> SecretStr:
        url = v.get_secret_value()
        scheme = urlsplit(url).scheme
        if scheme not in ("redis", "rediss", "unix"):
            raise ValueError(f"must start with redis://, rediss:// or unix:// (got {redact_url(url)!r})")
        SECRETS.add_from_url(url)
        return v

    @field_validator("stream", "objects_stream")
    @classmethod
    def _check_stream(cls, v: str) -> str:
        if "{camera}" not in v:
            raise ValueError("must contain '{camera}' (one stream per camera)")
        return v

    @field_validator("startup_nodes", "sentinels")
    @classmethod
    def _check_nodes(cls, v: list[str], info: ValidationInfo) -> list[str]:
        for node in v:
            _node(node, "startup node" if info.field_name == "startup_nodes" else "sentinel")
        return v

    @model_validator(mode="after")
    def _check_combinations(self) -> Self:
        parts = urlsplit(self.url.get_secret_value())
        tls_keys = [k for k in ("tls_ca_file", "tls_cert_file", "tls_key_file") if getattr(self, k) is not None]
        if tls_keys and parts.scheme != "rediss":
            raise ValueError(f"{', '.join(tls_keys)} need a rediss:// url")
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file go together")
        if self.startup_nodes and not self.cluster:
            raise ValueError("startup_nodes needs cluster = true")
        if self.cluster:
            if parts.scheme == "unix":
                raise ValueError("cluster = true needs a redis:// or rediss:// url (no unix socket)")
            if parts.path.strip("/") not in ("", "0"):
                raise ValueError("a Redis Cluster has only database 0: drop the /N from url")
        if self.min_replicas and self.wait_timeout_ms >= self.socket_timeout_s * 1000:
            raise ValueError("wait_timeout_ms must be below socket_timeout_s")
        self._check_sentinel(parts.scheme)
        return self

    def _check_sentinel(self, scheme: str) -> None:
        if self.sentinels and self.cluster:
            raise ValueError("sentinels and cluster = true exclude each other (Sentinel or a Redis Cluster)")
        if bool(self.sentinels) != (self.sentinel_master is not None):
            raise ValueError("sentinels and sentinel_master go together")
        extra = [k for k in ("sentinel_username", "sentinel_password_file") if getattr(self, k) is not None]
        if extra and not self.sentinels:
            raise ValueError(f"{', '.join(extra)} need sentinels")
        if self.sentinels and scheme == "unix":
            raise ValueError("sentinels need a redis:// or rediss:// url (no unix socket)")

    @property
    def tls(self) -> bool:
        return urlsplit(self.url.get_secret_value()).scheme == "rediss"

    @property
    def spool_cap_bytes(self) -> int:
        """The spool's cap: `spool_max_mb` MiB, or `spool_max_bytes` when that is smaller."""
        cap = self.spool_max_mb * 1024 * 1024
        return cap if self.spool_max_bytes is None else min(cap, self.spool_max_bytes)

    def seed_nodes(self) -> list[tuple[str, int]]:
        """The node in `url` (when it names one), then `startup_nodes`."""
        parts = urlsplit(self.url.get_secret_value())
        seeds = [(parts.hostname, parts.port or 6379)] if parts.hostname else []
        return [*seeds, *(_node(n) for n in self.startup_nodes)]

    def sentinel_nodes(self) -> list[tuple[str, int]]:
        return [_node(n, "sentinel") for n in self.sentinels]

    def sentinel_password(self) -> str | None:
        """The sentinels' password from `sentinel_password_file` (read now), if any."""
        if self.sentinel_password_file is None:
            return None
        password = read_secret_file(self.sentinel_password_file)
        SECRETS.add(password)
        return password

    def effective_url(self) -> str:
        url = self.url.get_secret_value()
        if self.password_file is not None:
            password = read_secret_file(self.password_file)
            SECRETS.add(password)
            url = with_password(url, password)
        return url

    def stream_for(self, camera_id: str) -> str:
        return self.stream.replace("{camera}", camera_id)

    def objects_stream_for(self, camera_id: str) -> str:
        return self.objects_stream.replace("{camera}", camera_id)


def _node(text: str, what: str = "startup node") -> tuple[str, int]:
    try:
        return parse_host_port(text, listen=False)
    except ValueError:
        raise ValueError(f"{what} {text!r} must be host:port") from None


__all__ = ["RedisConfig"]
