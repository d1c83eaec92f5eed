"""Where the reader's acknowledgements and snapshot go on each Redis topology, and how durable they are.

- One Redis, or Redis under Sentinel (`[redis] sentinels`): one snapshot key (`[bridge] snapshot_key`);
  every stream is read by one XREADGROUP, and one MULTI/EXEC carries a batch's XACKs and the snapshot.
- Redis Cluster (`[redis] cluster`): a MULTI, like a multi-key XREADGROUP, runs within one hash slot.
  The streams are grouped by slot (`read_groups`: one XREADGROUP loop per slot), and the snapshot is
  kept in parts, one per stream (`BridgeState.to_snapshot_part`), each at `<snapshot_key>:{<tag>}`
  where `<tag>` is what Redis hashes of the stream's name: the part lives in its stream's slot, so
  one MULTI carries one slot's XACKs with the parts they reflect.
- `[redis] min_replicas` > 0: after each EXEC the reader pipelines `SET <a snapshot key> <the same
  value>` and `WAIT min_replicas wait_timeout_ms` on one connection of the slot's master (WAIT
  counts from its connection's last write, and the replication stream is ordered, so it covers the
  EXEC). A WAIT short of replicas is counted and logged, never retried: the next EXEC rewrites the
  whole snapshot (or the stream's part), and the next confirmed WAIT covers everything before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from redis.crc import key_slot

from daemon.config.bridge import BridgeConfig
from daemon.config.redis import RedisConfig


def hash_tag(key: str) -> str:
    """The part of `key` a Redis Cluster hashes: the first non-empty `{...}`, else the whole key."""
    start = key.find("{")
    if start >= 0:
        end = key.find("}", start + 1)
        if end > start + 1:
            return key[start + 1 : end]
    return key


def slot_of(key: str) -> int:
    return int(key_slot(key.encode()))


@dataclass(frozen=True, slots=True)
class AckLayout:
    """The snapshot key(s) and the read groups for the streams read (stream -> camera, None: events)."""

    snapshot_key: str
    streams: dict[str, str | None]
    cluster: bool
    min_replicas: int = 0
    wait_timeout_ms: int = 500

    @classmethod
    def of(cls, cfg: BridgeConfig, redis: RedisConfig, streams: dict[str, str | None]) -> AckLayout:
        return cls(cfg.snapshot_key_name(), dict(streams), redis.cluster, redis.min_replicas, redis.wait_timeout_ms)

    def part_key(self, stream: str) -> str:
        """A cluster's snapshot part for `stream`, in the stream's slot."""
        return f"{self.snapshot_key}:{{{hash_tag(stream)}}}"

    def snapshot_keys(self) -> list[tuple[str, str | None, str]]:
        """What the reader loads at start: (key, camera or None for the events stream, stream); one
        entry with stream "" (the whole snapshot) unless on a cluster."""
        if not self.cluster:
            return [(self.snapshot_key, None, "")]
        return [(self.part_key(stream), camera, stream) for stream, camera in self.streams.items()]

    def read_groups(self) -> list[list[str]]:
        """Streams that one XREADGROUP (and one MULTI) may cover: all of them, or one list per slot."""
        if not self.cluster:
            return [list(self.streams)]
        groups: dict[int, list[str]] = {}
        for stream in self.streams:
            groups.setdefault(slot_of(stream), []).append(stream)
        return list(groups.values())

    def by_slot(self, streams: Sequence[str]) -> list[list[str]]:
        """`streams` (of one batch) split into the groups that one MULTI each may carry."""
        if not self.cluster:
            return [list(streams)] if streams else []
        groups: dict[int, list[str]] = {}
        for stream in streams:
            groups.setdefault(slot_of(stream), []).append(stream)
        return list(groups.values())

    def problems(self) -> list[str]:
        """Streams whose snapshot part would not share their slot (a name with stray braces)."""
        if not self.cluster:
            return []
        return [
            f"bridge.snapshot_key: the part for stream {s!r} ({self.part_key(s)!r}) hashes to another slot"
            for s in self.streams
            if slot_of(self.part_key(s)) != slot_of(s)
        ]
