"""Redis connections for the sink and `beltsight tail`, and what their failures mean: the one import place.

The client is `daemon.publish.redis_client` (`make_client`, `Connector`: one Redis, Sentinel or a
Cluster; TLS; dead connections found by timeouts and keepalive), what its failures mean is
`daemon.publish.redis_errors`; both are re-exported here. This module holds what runs on a client:
- `queue_waits` / `Waits.confirmed`: `WAIT numreplicas timeout` after a pipeline's writes, one
  per master written (on the same connection as the writes, which is what WAIT counts), and
  the streams whose writes `min_replicas` replicas acknowledged;
- `execute`: a pipeline run without raising on per-command errors;
- `slot_groups`: keys grouped so that a multi-key read (XREAD) stays within one slot.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from redis.asyncio.cluster import ClusterNode, RedisCluster

from daemon.publish.redis_client import Connector, RedisClient, SentinelRedis, make_client
from daemon.publish.redis_errors import (
    REFUSALS,
    RETRYABLE,
    TRANSIENT,
    ReplicasShortError,
    SinkError,
    auth_hint,
    is_auth_error,
    is_transient,
    refusal_code,
    tls_error,
    tls_hint,
)


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
