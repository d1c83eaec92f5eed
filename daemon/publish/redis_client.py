"""The Redis client of the sink, `beltsight tail` and the bridge (`make_client`, `Connector`): one Redis, Redis
under Sentinel or a Redis Cluster behind the same calls, so the sink does not branch.

- `make_client` builds it: `redis.asyncio.Redis`; with `[redis] sentinels` the master
  named `sentinel_master` through redis-py's `redis.asyncio.sentinel.Sentinel.master_for` (its
  address asked of the sentinels on every connect, so a new client after a failover reaches the
  promoted replica); with `cluster = true` redis-py's `redis.asyncio.cluster.RedisCluster`
  (pipelines grouped by node, MOVED/ASK followed by the client); TLS options for `rediss://`.
  `Connector` makes a new one per call; a cluster client is seeded with `url`, `startup_nodes` and
  every node the previous client had seen, so losing the node named in `url` does not lose the cluster.
- Dead connections: every send and every reply waits at most `socket_timeout_s`, so a connection
  that goes silent mid-command (half-open: no FIN, no RST) fails within 2 x socket_timeout_s; idle
  TCP connections are probed by keepalive (`keepalive_s`) and PINGed before reuse.
"""

from __future__ import annotations

import math
import socket
from collections.abc import Iterable
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import parse_url
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff

from daemon.config.redis import RedisConfig

RedisClient = aioredis.Redis | RedisCluster


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
