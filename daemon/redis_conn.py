"""Redis connections for the sink and `beltsight tail`, and what their failures mean."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    BusyLoadingError,
    NoPermissionError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from daemon.config import RedisConfig

_AUTH_CODES = ("NOAUTH", "WRONGPASS", "NOPERM")


class SinkError(Exception):
    """Redis refused writes in a way retrying may fix once an operator acts."""


def is_auth_error(exc: BaseException) -> bool:
    """Wrong password, missing password or missing ACL permission (also as a SinkError's cause)."""
    if isinstance(exc, SinkError) and exc.__cause__ is not None:
        exc = exc.__cause__
    if isinstance(exc, AuthenticationError | AuthorizationError | NoPermissionError):
        return True
    return isinstance(exc, ResponseError) and str(exc).lstrip("'\"(").startswith(_AUTH_CODES)


def auth_hint(exc: BaseException) -> str:
    if isinstance(exc, SinkError) and exc.__cause__ is not None:
        exc = exc.__cause__
    text = str(exc)
    if isinstance(exc, NoPermissionError) or "NOPERM" in text:
        return "the Redis user lacks a permission: it needs XADD, XINFO and XRANGE on the stream keys"
    if "NOAUTH" in text:
        return "Redis requires a password and none is configured (redis.url or redis.password_file)"
    return "wrong user name or password for Redis (redis.url or redis.password_file)"


RETRYABLE = (RedisConnectionError, RedisTimeoutError, BusyLoadingError, OSError, TimeoutError, SinkError)


def make_client(cfg: RedisConfig) -> aioredis.Redis:
    """An asyncio client without redis-py's own retries (callers own the retry policy)."""
    return aioredis.Redis.from_url(
        cfg.effective_url(),
        decode_responses=True,
        socket_connect_timeout=cfg.connect_timeout_s,
        socket_timeout=cfg.socket_timeout_s,
        retry=Retry(NoBackoff(), 0),
    )


def as_text(fields: dict[Any, Any]) -> dict[str, str]:
    return {
        (k.decode() if isinstance(k, bytes) else str(k)): (v.decode() if isinstance(v, bytes) else str(v))
        for k, v in fields.items()
    }


__all__ = ["RETRYABLE", "SinkError", "as_text", "auth_hint", "is_auth_error", "make_client"]
