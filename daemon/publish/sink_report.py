"""What the sink says about Redis: one log line per outage and kind, drops summarised.

Kinds, each logged once until Redis takes writes again (`redis_up`): `redis_auth_failed`
(credentials, ACL), `redis_tls_failed` (handshake, with what to fix), `redis_replicas_short`
(`min_replicas` not reached in time), `redis_write_failed` (any other refusal), `redis_down`.
Entries dropped because the buffer (and spool) were full: `sink_buffer_full` at most every 5 s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog

from daemon.config.redis import RedisConfig
from daemon.core.redaction import SECRETS, redact_url
from daemon.publish.redis_conn import ReplicasShortError, SinkError, auth_hint, is_auth_error, tls_error, tls_hint

log = structlog.get_logger("beltsight.sink")

DROP_LOG_INTERVAL_S = 5.0


def failure_kind(exc: BaseException) -> str:
    """ "auth", "tls", "replicas", "refused" or "down"."""
    if is_auth_error(exc):
        return "auth"
    if tls_error(exc) is not None:
        return "tls"
    if isinstance(exc, ReplicasShortError):
        return "replicas"
    return "refused" if isinstance(exc, SinkError) else "down"


@dataclass
class OutageReport:
    cfg: RedisConfig
    reported: str | None = None  # the kind logged for the outage in progress
    drops_unlogged: dict[str, int] = field(default_factory=dict)
    drop_logged_at: float = float("-inf")

    @property
    def url(self) -> str:
        return redact_url(self.cfg.url.get_secret_value())

    def up(self, after_failures: int) -> None:
        log.info("redis_up", url=self.url, after_failures=after_failures)
        self.reported = None

    def failed(self, exc: BaseException, buffered: int) -> None:
        kind = failure_kind(exc)
        if self.reported == kind:
            return
        self.reported = kind
        tls = tls_error(exc)
        reason = SECRETS.scrub(f"{type(exc).__name__}: {tls or exc}")
        fields = {"url": self.url, "reason": reason, "buffered": buffered}
        if kind == "auth":
            log.error("redis_auth_failed", hint=auth_hint(exc), **fields)
        elif tls is not None:
            log.error("redis_tls_failed", hint=tls_hint(tls), **fields)
        elif kind == "replicas":
            log.warning("redis_replicas_short", min_replicas=self.cfg.min_replicas, **fields)
        elif kind == "refused":
            log.error("redis_write_failed", **fields)
        else:
            log.warning("redis_down", **fields)

    def dropped(self, camera_id: str, n: int, now: float) -> None:
        self.drops_unlogged[camera_id] = self.drops_unlogged.get(camera_id, 0) + n
        if now - self.drop_logged_at >= DROP_LOG_INTERVAL_S:
            log.warning(
                "sink_buffer_full",
                dropped=dict(self.drops_unlogged),
                capacity=self.cfg.buffer_max,
                spool_max_mb=self.cfg.spool_max_mb if self.cfg.spool_dir is not None else None,
            )
            self.drops_unlogged.clear()
            self.drop_logged_at = now

    def tls_unverified(self) -> None:
        cfg = self.cfg
        if cfg.tls and not (cfg.tls_verify and cfg.tls_check_hostname):
            log.warning(
                "redis_tls_unverified",
                url=self.url,
                verify=cfg.tls_verify,
                check_hostname=cfg.tls_verify and cfg.tls_check_hostname,
            )


__all__ = ["DROP_LOG_INTERVAL_S", "OutageReport", "failure_kind"]
