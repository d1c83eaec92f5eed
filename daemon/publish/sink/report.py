"""What the sink says about Redis: one log line per outage and kind, drops summarised.

Kinds, each logged once until Redis takes writes again (`redis_up`) or the kind changes:
`redis_auth_failed` (credentials, ACL), `redis_tls_failed` (handshake, with what to fix),
`redis_replicas_short` (`min_replicas` not reached in time), `redis_write_failed` (a refusal),
`redis_down`. A refusal Redis names (`daemon.publish.redis_conn.REFUSALS`: OOM, READONLY, NOPERM,
WRONGTYPE, MISCONF, LOADING, BUSY) is logged with its `code` and a `hint` saying what to do: NOPERM
on a command as `redis_auth_failed`, OOM, MISCONF and BUSY as `redis_write_failed`, each code its own
kind (a new cause is logged again); READONLY and LOADING (Redis away for now) as the outage's one
`redis_down`. The entries stay buffered (memory, then the spool) meanwhile. A refusal of one
key (WRONGTYPE, NOPERM on a key) is not an outage: `daemon.publish.sink.held` logs it.
Entries dropped because the buffer or the spool were full: `sink_buffer_full` at most every 5 s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

import structlog

from daemon.config.redis import RedisConfig
from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.core.ratelimit import RateLimited
from daemon.core.redaction import SECRETS, redact_url
from daemon.publish.redis_conn import (
    REFUSALS,
    ReplicasShortError,
    SinkError,
    auth_hint,
    is_auth_error,
    refusal_code,
    tls_error,
    tls_hint,
)
from daemon.publish.sink.backlog import Drops

log = structlog.get_logger("beltsight.sink")

DROP_LOG_INTERVAL_S = 5.0


AWAY_CODES = ("READONLY", "LOADING")
"""Refusals logged as `redis_down`: this node cannot take writes for now."""


FailureKind = Literal["auth", "tls", "replicas", "refused", "down"]


class Failure(NamedTuple):
    """How Redis failed a write, as the outage's one log line is chosen: its kind and, for a refusal
    Redis named (`REFUSALS`), its code; a new kind or code is a new cause, logged again."""

    kind: FailureKind
    code: str | None = None


def failure_of(exc: BaseException) -> Failure:
    """The failure `exc` is; "down" carries no code (READONLY and LOADING are one outage with the rest)."""
    code = refusal_code(exc)
    if is_auth_error(exc):
        return Failure("auth", code)
    if tls_error(exc) is not None:
        return Failure("tls")
    if isinstance(exc, ReplicasShortError):
        return Failure("replicas")
    if code in AWAY_CODES:
        return Failure("down")  # one redis_down per outage, whichever way Redis is away
    if isinstance(exc, SinkError) or code:
        return Failure("refused", code)
    return Failure("down")


@dataclass
class OutageReport:
    cfg: RedisConfig
    clock: Clock = SYSTEM_CLOCK
    reported: Failure | None = None  # what was logged for the outage in progress
    drops_unlogged: dict[str, int] = field(default_factory=dict)
    reasons_unlogged: dict[str, int] = field(default_factory=dict)
    drop_lines: RateLimited = field(init=False)

    def __post_init__(self) -> None:
        self.drop_lines = RateLimited(DROP_LOG_INTERVAL_S, self.clock)

    @property
    def url(self) -> str:
        return redact_url(self.cfg.url.get_secret_value())

    def up(self, after_failures: int) -> None:
        log.info("redis_up", url=self.url, after_failures=after_failures)
        self.reported = None

    def failed(self, exc: BaseException, buffered: int) -> None:
        failure = failure_of(exc)
        if self.reported == failure:
            return
        self.reported = failure
        tls = tls_error(exc)
        reason = SECRETS.scrub(f"{type(exc).__name__}: {tls or exc}")
        fields = {"url": self.url, "reason": reason, "buffered": buffered}
        base = failure.kind
        code = refusal_code(exc)
        if code:
            fields |= {"code": code, "hint": REFUSALS[code]}
        if base == "auth":
            log.error("redis_auth_failed", **({"hint": auth_hint(exc)} | fields))
        elif tls is not None:
            log.error("redis_tls_failed", hint=tls_hint(tls), **fields)
        elif base == "replicas":
            log.warning("redis_replicas_short", min_replicas=self.cfg.min_replicas, **fields)
        elif base == "refused":
            log.error("redis_write_failed", **fields)
        else:
            log.warning("redis_down", **fields)

    def dropped(self, drops: Drops) -> None:
        """Count `drops`; log them, with those held back since the last line, at most every 5 s."""
        for (camera_id, reason), n in drops.items():
            self.drops_unlogged[camera_id] = self.drops_unlogged.get(camera_id, 0) + n
            self.reasons_unlogged[reason] = self.reasons_unlogged.get(reason, 0) + n
        if self.drop_lines.allow() is not None:
            log.warning(
                "sink_buffer_full",
                dropped=dict(self.drops_unlogged),
                reasons=dict(self.reasons_unlogged),
                capacity=self.cfg.buffer_max,
                spool_max_mb=self.cfg.spool_max_mb if self.cfg.spool_dir is not None else None,
                spool_max_bytes=self.cfg.spool_cap_bytes if self.cfg.spool_dir is not None else None,
            )
            self.drops_unlogged.clear()
            self.reasons_unlogged.clear()

    def tls_unverified(self) -> None:
        cfg = self.cfg
        if cfg.tls and not (cfg.tls_verify and cfg.tls_check_hostname):
            log.warning(
                "redis_tls_unverified",
                url=self.url,
                verify=cfg.tls_verify,
                check_hostname=cfg.tls_verify and cfg.tls_check_hostname,
            )


__all__ = ["DROP_LOG_INTERVAL_S", "Failure", "OutageReport", "failure_of"]
