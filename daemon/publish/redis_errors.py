"""What a Redis failure means, for the sink, `beltsight tail` and the bridge: the errors the sink raises
(`SinkError`, `ReplicasShortError`), the failures that mean "Redis is away" (`TRANSIENT`, `is_transient`:
back off and retry), authentication and TLS failures with the hint an operator needs (`is_auth_error`,
`auth_hint`, `tls_error`, `tls_hint`), and the refusals Redis names (`REFUSALS`, `refusal_code`).
"""

from __future__ import annotations

import ssl

from redis.exceptions import (
    AskError,
    AuthenticationError,
    AuthorizationError,
    BusyLoadingError,
    ClusterDownError,
    ClusterError,
    NoPermissionError,
    ReadOnlyError,
    RedisClusterException,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

_AUTH_CODES = ("NOAUTH", "WRONGPASS", "NOPERM")


class SinkError(Exception):
    """Redis refused writes in a way retrying may fix once an operator acts."""


class ReplicasShortError(SinkError):
    """Redis took the writes but fewer than `min_replicas` replicas confirmed them in time."""


def _cause(exc: BaseException) -> BaseException:
    if isinstance(exc, SinkError) and exc.__cause__ is not None:
        return exc.__cause__
    return exc


def is_auth_error(exc: BaseException) -> bool:
    """Wrong password, missing password or missing ACL permission (also as a SinkError's cause)."""
    exc = _cause(exc)
    if isinstance(exc, AuthenticationError | AuthorizationError | NoPermissionError):
        return True
    return isinstance(exc, ResponseError) and str(exc).lstrip("'\"(").startswith(_AUTH_CODES)


def auth_hint(exc: BaseException) -> str:
    exc = _cause(exc)
    text = str(exc)
    if isinstance(exc, NoPermissionError) or "NOPERM" in text:
        return "the Redis user lacks a permission: it needs XADD, XINFO and XRANGE on the stream keys"
    if "NOAUTH" in text:
        return "Redis requires a password and none is configured (redis.url or redis.password_file)"
    return "wrong user name or password for Redis (redis.url or redis.password_file)"


def tls_error(exc: BaseException) -> ssl.SSLError | None:
    """The TLS failure behind a connection error (redis-py keeps it as the context), if any."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, ssl.SSLError):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


def tls_hint(err: ssl.SSLError) -> str:
    text = str(err)
    if isinstance(err, ssl.SSLCertVerificationError):
        if "hostname" in text.lower() or "IP address mismatch" in text:
            return "the server's certificate does not name the host in redis.url (redis.tls_check_hostname)"
        return "the server's certificate is not signed by redis.tls_ca_file (or has expired)"
    if "CERTIFICATE_REQUIRED" in text or "HANDSHAKE_FAILURE" in text:
        return "the server requires a client certificate: set redis.tls_cert_file and redis.tls_key_file"
    if "UNKNOWN_CA" in text or "BAD_CERTIFICATE" in text:
        return "the server does not accept the client certificate (redis.tls_cert_file): not signed by its CA"
    if "WRONG_VERSION_NUMBER" in text or "RECORD_LAYER" in text:
        return "the server does not speak TLS on this port (rediss:// to a plain port?)"
    return "TLS handshake with Redis failed"


REFUSALS = {
    "OOM": "Redis is at maxmemory and evicts nothing (noeviction): raise maxmemory, or free memory (other keys, "
    "a smaller redis.maxlen)",
    "READONLY": "this Redis is a replica: its master was demoted in a failover; check Sentinel / the failover and "
    "that redis.url names the current master",
    "NOPERM": "the Redis ACL user lacks a command or key: give it the README's ACL line (XADD, XINFO, XRANGE on "
    "the stream keys)",
    "WRONGTYPE": "another key, not a stream, sits at the stream's name: rename or delete it, or change redis.stream",
    "MISCONF": "Redis cannot persist (RDB/AOF writes failing: its disk or dir) and refuses writes: fix its disk, "
    "or set stop-writes-on-bgsave-error no",
    "LOADING": "Redis is loading its dataset after a restart: wait",
    "BUSY": "a Lua script or function runs too long: wait, or SCRIPT KILL / FUNCTION KILL",
}
"""The refusals the sink recognises (the error's first word) and what the operator should do; the
entries are held (memory, then the spool) and retried until the cause is fixed."""


def refusal_code(exc: BaseException) -> str | None:
    """The REFUSALS code of a Redis error reply (also as a SinkError's cause), else None."""
    exc = _cause(exc)
    if not isinstance(exc, ResponseError | BusyLoadingError):
        return None
    code = exc.status_code or str(exc).lstrip("'\"(").split(" ", 1)[0]
    return code if code in REFUSALS else None


TRANSIENT = (
    RedisConnectionError,
    RedisTimeoutError,
    BusyLoadingError,
    ClusterDownError,  # also MasterDownError: a failover in progress
    TryAgainError,
    ReadOnlyError,  # a demoted master answering before the client learnt the new topology
    ClusterError,
    AskError,  # also MovedError: a redirect not followed (min_replicas: the sink re-reads the slot map)
    RedisClusterException,  # no seed node reachable, slot not covered
    OSError,
    TimeoutError,
)
"""Failures that mean "Redis (or a node) is away": back off and retry, log as redis_down."""

RETRYABLE = (*TRANSIENT, SinkError)


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, TRANSIENT) and not is_auth_error(exc)
