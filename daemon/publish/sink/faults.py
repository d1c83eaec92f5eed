"""How wide a fault is: one stream key, one Cluster slot or node, or the whole connection.

The sink holds apart only what a fault concerns (`daemon.publish.sink.held`):
- `stream_fault` names the faults of one key: a refusal of the key (`key_refusal`: WRONGTYPE,
  NOPERM on a key) or, in a Redis Cluster, a fault of the key's slot answered for that command
  alone: CLUSTERDOWN (the slot is not served, or its shard is failing over), TRYAGAIN (the slot is
  being migrated), MOVED / ASK that redis-py did not follow (with `min_replicas`) or that kept
  redirecting (a MOVED storm, redis-py's redirect limit). The cameras whose streams those keys
  are, and nobody else, are held.
- `isolate` decides a pipeline that failed as a whole (a node refused the connection or went
  silent, or a key's slot is not in the slot map: redis-py raises for the whole pipeline): it asks
  every master of the slot map for a PING; when some answer, only the cameras (and the events
  stream) whose keys live on masters that do not (`NODE_DOWN`) or in slots no master serves
  (`CLUSTERDOWN`) are held, and the rest go on. When no master answers, or nothing of the batch
  lives there, it is a fault of the connection and the whole sink backs off as before.
- "CLUSTERDOWN The cluster is down" (the whole cluster refuses: `cluster-require-full-coverage
  yes` while a shard has no master) is a fault of the connection too: every camera waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ClusterError,
    MovedError,
    RedisClusterException,
    RedisError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from daemon.core.backoff import Backoff
from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.publish.redis_conn import REFUSALS, RedisClient, SinkError, refusal_code

SLOT_FAULTS = {
    "CLUSTERDOWN": "the key's hash slot is not served (its master failed and no replica took over, or the "
    "slot is unassigned): check CLUSTER NODES / redis-cli --cluster check; the cameras on other slots go on",
    "TRYAGAIN": "the key's slot is being migrated (resharding): it ends by itself once the migration finishes",
    "MOVED": "the key's slot keeps moving (MOVED storm) or redis-py's redirect limit ran out: check the "
    "resharding in progress and CLUSTER SLOTS on every node",
    "ASK": "the key's slot is being migrated and the write would have to follow an ASK redirect: it ends "
    "once the migration finishes",
    "NODE_DOWN": "the Cluster master that serves the key's slot does not answer (killed, unreachable): a "
    "replica takes over after cluster-node-timeout, or restart it",
}
"""The Cluster faults that hold only the cameras whose keys live in the slot or on the node, and
what the operator should do."""

HINTS = {**REFUSALS, **SLOT_FAULTS}
"""Every code a per-stream hold can carry, with its hint."""

REDIRECTS = frozenset({"MOVED", "ASK", "CLUSTERDOWN"})
"""Codes after which the slot map is read again (the slot may be served elsewhere now)."""


def key_refusal(exc: BaseException) -> str | None:
    """The code of a refusal that concerns one key only (WRONGTYPE; NOPERM on a key, not on a
    command), else None: a refusal of the whole server."""
    code = refusal_code(exc)
    text = str(exc).lower()
    if code == "WRONGTYPE" or (code == "NOPERM" and "key" in text and "command" not in text):
        return code
    return None


def slot_fault(exc: BaseException) -> str | None:
    """The SLOT_FAULTS code of a Cluster error answered for one command (its key's slot), else None."""
    if isinstance(exc, SlotNotCoveredError):
        return "CLUSTERDOWN"
    if isinstance(exc, ClusterDownError):  # not "The cluster is down": every key is refused then
        return "CLUSTERDOWN" if "cluster is down" not in str(exc).lower() else None
    if isinstance(exc, TryAgainError):
        return "TRYAGAIN"
    if isinstance(exc, MovedError):
        return "MOVED"
    if isinstance(exc, AskError):
        return "ASK"
    if isinstance(exc, ClusterError) and "TTL exhausted" in str(exc):  # redis-py's redirect limit
        return "MOVED"
    return None


def stream_fault(exc: BaseException) -> str | None:
    """The code of a fault that concerns one stream key (a refusal of the key, or of its slot)."""
    return key_refusal(exc) or slot_fault(exc)


class StreamRefusedError(SinkError):
    """Redis refused one stream key, or its slot or node failed, while the sink read or wrote it.

    `code`: a key in `HINTS` (`stream_fault` of the cause unless given)."""

    def __init__(self, stream: str, cause: BaseException, code: str | None = None) -> None:
        super().__init__(str(cause))
        self.stream = stream
        self.cause = cause
        self.code = code or stream_fault(cause) or "WRONGTYPE"


@dataclass(eq=False)
class EventsHold:
    """The events stream held apart: its events wait in their own buffer (drop-oldest) and go out
    only on a try, with capped exponential backoff, until one is written."""

    clock: Clock = SYSTEM_CLOCK
    backoff_s: tuple[float, float] = (0.2, 5.0)
    code: str | None = None
    retry_at: float = 0.0
    _backoff: Backoff | None = field(default=None, repr=False)

    @property
    def held(self) -> bool:
        return self.code is not None

    def due(self) -> bool:
        return self.code is None or self.retry_at <= self.clock.monotonic()

    def next_due_s(self) -> float | None:
        if self.code is None:
            return None
        return max(0.0, self.retry_at - self.clock.monotonic())

    def failed(self, code: str) -> bool:
        """The events stream failed with `code`; True when it was not held before."""
        new = self.code is None
        if self._backoff is None:
            self._backoff = Backoff(*self.backoff_s, healthy_reset_s=1e9, clock=self.clock)
        self.code = code
        self.retry_at = self.clock.monotonic() + self._backoff.failed()
        return new

    def succeeded(self) -> bool:
        """An event was written; True when that releases a hold."""
        released = self.code is not None
        self.code, self._backoff = None, None
        return released


@dataclass(frozen=True, slots=True)
class Isolated:
    """What a pipeline that failed as a whole concerned: the cameras and the events stream whose
    keys live on masters that did not answer a PING (NODE_DOWN) or in slots the slot map does not
    cover (CLUSTERDOWN)."""

    cameras: dict[str, tuple[str, str]] = field(default_factory=dict)
    """camera -> (its stream key that failed, the code)."""
    events: str | None = None
    """The code of the events stream's fault, if it is one of them."""


def _where(client: RedisCluster, key: str, down: set[str]) -> str | None:
    """The code of `key`'s fault: its slot not covered, or its master down; None: healthy."""
    try:
        node = client.get_node_from_key(key)
    except (RedisClusterException, KeyError):
        return "CLUSTERDOWN"
    if node is None:
        return "CLUSTERDOWN"
    return "NODE_DOWN" if node.name in down else None


async def _answers(client: RedisCluster, node: ClusterNode) -> bool:
    try:
        await client.execute_command("PING", target_nodes=node)
    except (RedisConnectionError, RedisTimeoutError, OSError, TimeoutError, RedisClusterException):
        return False
    except RedisError:  # a refusal (NOPERM: the README's user may not PING) is an answer
        return True
    return True


async def isolate(
    client: RedisClient,
    cameras: Iterable[str],
    streams_of: Callable[[str], tuple[str, ...]],
    events_stream: str | None,
) -> Isolated | None:
    """After a pipeline failed as a whole: what lives on the masters that do not answer or in
    slots not covered, or None when the fault is the connection's (not a cluster, no master
    answers, or nothing of `cameras`' streams nor `events_stream` lives there)."""
    if not isinstance(client, RedisCluster):
        return None
    masters = client.get_primaries()
    answers = await asyncio.gather(*(_answers(client, node) for node in masters))
    if not any(answers):
        return None
    down = {node.name for node, ok in zip(masters, answers, strict=True) if not ok}
    held: dict[str, tuple[str, str]] = {}
    for camera in cameras:
        for key in streams_of(camera):
            if code := _where(client, key, down):
                held[camera] = (key, code)
                break
    events = _where(client, events_stream, down) if events_stream is not None else None
    if not held and events is None:
        return None
    if "CLUSTERDOWN" in {code for _, code in held.values()} | {events}:
        await refresh_slots(client)  # the slot may be served again by the next try
    return Isolated(held, events)


async def refresh_slots(client: RedisClient) -> None:
    """Read the slot map again after a redirect or a slot that is not served (best effort: a
    failure leaves the current map, and the next try asks again)."""
    if not isinstance(client, RedisCluster):
        return
    try:
        await client.nodes_manager.initialize()
    except (RedisError, RedisClusterException, OSError):
        return


__all__ = [
    "HINTS",
    "REDIRECTS",
    "SLOT_FAULTS",
    "EventsHold",
    "Isolated",
    "StreamRefusedError",
    "isolate",
    "key_refusal",
    "refresh_slots",
    "slot_fault",
    "stream_fault",
]
