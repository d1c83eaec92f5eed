"""Redis connections for the sink and `beltsight tail`, and what their failures mean.

One Redis, Redis under Sentinel or a Redis Cluster behind the same calls, so the sink does not branch:
- `Connector` builds the client: `redis.asyncio.Redis`; with `[redis] sentinels` the master
  named `sentinel_master` through redis-py's `redis.asyncio.sentinel.Sentinel.master_for` (its
  address asked of the sentinels on every connect, so a new client after a failover reaches the
  promoted replica); with `cluster = true` redis-py's `redis.asyncio.cluster.RedisCluster`
  (pipelines grouped by node, MOVED/ASK followed by the client); TLS options for `rediss://`.
  A cluster client is seeded with `url`, `startup_nodes` and every node the previous client had
  seen, so losing the node named in `url` does not lose the cluster.
- Dead connections: every send and every reply waits at most `socket_timeout_s`, so a connection
  that goes silent mid-command (half-open: no FIN, no RST) fails within 2 x socket_timeout_s; idle
  TCP connections are probed by keepalive (`keepalive_s`) and PINGed before reuse.
- `queue_waits` / `Waits.confirmed`: `WAIT numreplicas timeout` after a pipeline's writes, one
  per master written (on the same connection as the writes, which is what WAIT counts), and
  the streams whose writes `min_replicas` replicas acknowledged.
- `slot_groups`: keys grouped so that a multi-key read (XREAD) stays within one slot.
"""

from __future__ import annotations

import math
import socket
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import parse_url
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff
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

from daemon.config.redis import RedisConfig

_AUTH_CODES = ("NOAUTH", "WRONGPASS", "NOPERM")

RedisClient = aioredis.Redis | RedisCluster


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


def _tls_kwargs(cfg: RedisConfig) -> dict[str, Any]:
    if not cfg.tls:
        return {}
    return {
        "ssl_ca_certs": str(cfg.tls_ca_file) if cfg.tls_ca_file is not None else None,
        "ssl_certfile": str(cfg.tls_cert_file) if cfg.tls_cert_file is not None else None,
        "ssl_keyfile": str(cfg.tls_key_file) if cfg.tls_key_file is not None else None,
        "ssl_cert_reqs": "required" if cfg.tls_verify else "none",
        "ssl_check_hostname": cfg.tls_verify and cfg.tls_check_hostname,
    }


def _socket_kwargs(cfg: RedisConfig, *, tcp: bool) -> dict[str, Any]:
    """Timeouts, TCP keepalive (idle `keepalive_s`, then 3 probes `keepalive_s / 3` apart) and a
    PING before using a connection idle longer than `keepalive_s`; no redis-py retries."""
    kwargs: dict[str, Any] = {
        "socket_connect_timeout": cfg.connect_timeout_s,
        "socket_timeout": cfg.socket_timeout_s,
        "health_check_interval": cfg.keepalive_s,
        "retry": Retry(NoBackoff(), 0),
    }
    if tcp:
        kwargs["socket_keepalive"] = True
        kwargs["socket_keepalive_options"] = {
            socket.TCP_KEEPIDLE: max(1, math.ceil(cfg.keepalive_s)),
            socket.TCP_KEEPINTVL: max(1, math.ceil(cfg.keepalive_s / 3)),
            socket.TCP_KEEPCNT: 3,
        }
    return kwargs


class SentinelRedis(aioredis.Redis):
    """The master's client from `Sentinel.master_for`; closing it closes the sentinels' connections too."""

    sentinels: Sentinel | None = None

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        try:
            await super().aclose(close_connection_pool)
        finally:
            if self.sentinels is not None:
                await self.sentinels.aclose()


def _sentinel_client(cfg: RedisConfig, common: dict[str, Any]) -> SentinelRedis:
    """The master `sentinel_master`, its address asked of `sentinels` at each connect. `url`'s user,
    password and db are the master's; TLS (rediss://) is used to the sentinels as well."""
    url = parse_url(cfg.effective_url())
    tls = {"ssl": True, **common} if cfg.tls else common
    on_sentinels = {k: v for k, v in tls.items() if k != "decode_responses"}
    on_sentinels |= {"username": cfg.sentinel_username, "password": cfg.sentinel_password()}
    # every option goes to the master's connections (Sentinel's `**connection_kwargs`), none to its own parameters
    on_master: dict[str, Any] = tls | {k: url[k] for k in ("username", "password", "db") if url.get(k) is not None}
    sentinel = Sentinel(cfg.sentinel_nodes(), sentinel_kwargs=on_sentinels, **on_master)
    assert cfg.sentinel_master is not None  # the config pairs it with `sentinels`
    client: SentinelRedis = sentinel.master_for(cfg.sentinel_master, redis_class=SentinelRedis)
    client.sentinels = sentinel
    return client


def make_client(cfg: RedisConfig, known_nodes: Iterable[tuple[str, int]] = ()) -> RedisClient:
    """An asyncio client without redis-py's own retries (callers own the retry policy)."""
    tcp = not cfg.url.get_secret_value().startswith("unix:")
    common: dict[str, Any] = {"decode_responses": True, **_socket_kwargs(cfg, tcp=tcp), **_tls_kwargs(cfg)}
    if cfg.sentinels:
        return _sentinel_client(cfg, common)
    if not cfg.cluster:
        return aioredis.Redis.from_url(cfg.effective_url(), **common)
    seeds = list(dict.fromkeys([*cfg.seed_nodes(), *known_nodes]))
    return RedisCluster.from_url(
        cfg.effective_url(),
        startup_nodes=[ClusterNode(host, port) for host, port in seeds],
        require_full_coverage=False,  # keys on healthy masters stay writable while one shard fails over
        **common,
    )


class Connector:
    """The client factory of a sink or reader: a new client per call (a password file is read
    again); for a cluster, seeded with the nodes the previous client had discovered."""

    def __init__(self, cfg: RedisConfig) -> None:
        self.cfg = cfg
        self._last: RedisClient | None = None
        self._known: list[tuple[str, int]] = []

    def __call__(self) -> RedisClient:
        if isinstance(self._last, RedisCluster):
            seen = [(n.host, int(n.port)) for n in self._last.get_nodes()]
            self._known = list(dict.fromkeys([*seen, *self._known]))[:32]
        self._last = make_client(self.cfg, self._known)
        return self._last


@dataclass(frozen=True, slots=True)
class _Wait:
    node: str  # "" for a single Redis
    streams: frozenset[str]
    marked: bool  # an XSETID (a write that changes nothing) precedes the WAIT


@dataclass(frozen=True, slots=True)
class Waits:
    """The WAITs queued at the end of a pipeline, in order, and the streams each one covers."""

    numreplicas: int
    queued: tuple[_Wait, ...] = ()

    def __len__(self) -> int:
        """Replies at the end of the pipeline that belong to the WAITs (and their XSETIDs)."""
        return sum(1 + w.marked for w in self.queued)

    def confirmed(self, client: RedisClient, replies: list[Any]) -> tuple[set[str], int]:
        """(streams whose writes reached `numreplicas` replicas, fewest replicas any WAIT saw).

        A stream whose slot moved to another node during the pipeline (MOVED: redis-py wrote it
        there) is not confirmed: the WAIT ran on the node it left."""
        ok: set[str] = set()
        fewest = self.numreplicas
        pending = iter(replies)
        for wait in self.queued:
            mark_failed = wait.marked and isinstance(next(pending, None), Exception | None)
            reply = next(pending, None)
            got = reply if isinstance(reply, int) and not mark_failed else -1
            fewest = min(fewest, got)
            if got >= self.numreplicas:
                ok |= {s for s in wait.streams if _node_name(client, s) == wait.node}
        return ok, max(fewest, 0)


def _node_name(client: RedisClient, key: str) -> str:
    if not isinstance(client, RedisCluster):
        return ""
    node = client.get_node_from_key(key)
    return node.name if node is not None else "?"


def queue_waits(
    client: RedisClient,
    pipe: Any,
    streams: Iterable[str],
    numreplicas: int,
    timeout_ms: int,
    *,
    written: Iterable[str] = (),
    tops: Mapping[str, str] | None = None,
) -> Waits:
    """Queue `WAIT numreplicas timeout_ms` on `pipe` after its writes: once for a single Redis,
    once per master holding one of `streams` in a cluster (redis-py sends each node's commands
    on one connection, in order, so the WAIT follows that node's writes).

    WAIT counts from this connection's last write. Where the pipeline writes none of `written`
    (the keys it XADDs to) on a master, the WAIT is preceded by `XSETID <stream> <its last ID>`
    from `tops`: a write that changes nothing but enters the replication stream after every
    earlier write, so the WAIT covers entries an earlier connection wrote there."""
    keys = sorted(set(streams))
    if numreplicas <= 0 or not keys:
        return Waits(numreplicas)
    groups: dict[str, tuple[ClusterNode | None, set[str]]] = {}
    for key in keys:
        node = client.get_node_from_key(key) if isinstance(client, RedisCluster) else None
        if node is not None or not isinstance(client, RedisCluster):
            groups.setdefault(node.name if node is not None else "", (node, set()))[1].add(key)
    fresh = {_node_name(client, key) for key in written}
    queued = []
    for name, (node, members) in groups.items():
        target = {"target_nodes": node} if node is not None else {}
        marker = next((s for s in sorted(members) if (tops or {}).get(s)), None) if name not in fresh else None
        if marker is not None:
            pipe.execute_command("XSETID", marker, (tops or {})[marker])
        pipe.execute_command("WAIT", numreplicas, timeout_ms, **target)
        queued.append(_Wait(name, frozenset(members), marker is not None))
    return Waits(numreplicas, tuple(queued))


async def execute(client: RedisClient, pipe: Any, *, follow_redirects: bool = True) -> list[Any]:
    """Run a pipeline without raising on per-command errors. In a cluster, `follow_redirects`
    lets redis-py re-send MOVED/ASK commands to the node named (one by one, outside the node's
    pipeline); without it they come back as MovedError/AskError replies."""
    if isinstance(client, RedisCluster):
        return list(await pipe.execute(raise_on_error=False, allow_redirections=follow_redirects))
    return list(await pipe.execute(raise_on_error=False))


def slot_groups(client: RedisClient, keys: list[str]) -> list[list[str]]:
    """`keys` split so that each group can go into one multi-key command (one slot in a cluster)."""
    if not isinstance(client, RedisCluster):
        return [keys] if keys else []
    groups: dict[int, list[str]] = {}
    for key in keys:
        groups.setdefault(client.keyslot(key), []).append(key)
    return list(groups.values())


def as_text(fields: dict[Any, Any]) -> dict[str, str]:
    return {
        (k.decode() if isinstance(k, bytes) else str(k)): (v.decode() if isinstance(v, bytes) else str(v))
        for k, v in fields.items()
    }


__all__ = [
    "REFUSALS",
    "RETRYABLE",
    "TRANSIENT",
    "Connector",
    "RedisClient",
    "ReplicasShortError",
    "SentinelRedis",
    "SinkError",
    "Waits",
    "as_text",
    "auth_hint",
    "execute",
    "is_auth_error",
    "is_transient",
    "make_client",
    "queue_waits",
    "refusal_code",
    "slot_groups",
    "tls_error",
    "tls_hint",
]
