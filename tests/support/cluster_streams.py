"""Cameras spread over a 3-master Redis Cluster's slots, and reading their streams back out."""

from __future__ import annotations

import itertools

from redis.crc import key_slot

from tests.support.fixtures_redis_cluster import RedisClusterProcs
from tests.support.streams import STREAM, Entry, entry_id

SLOT_RANGES = ((0, 5460), (5461, 10922), (10923, 16383))  # what `redis-cli --cluster create` gives 3 masters


def cameras_on_each_master(prefix: str, per_master: int = 1) -> list[str]:
    """Camera ids whose streams hash to each of the three masters' slot ranges."""
    found: dict[int, list[str]] = {i: [] for i in range(3)}
    for n in itertools.count():
        camera = f"{prefix}{n}"
        slot = key_slot(STREAM.format(camera).encode())
        shard = next(i for i, (lo, hi) in enumerate(SLOT_RANGES) if lo <= slot <= hi)
        if len(found[shard]) < per_master:
            found[shard].append(camera)
        if all(len(v) == per_master for v in found.values()):
            return [c for i in range(3) for c in found[i]]
    raise AssertionError("unreachable")


def entries(cluster: RedisClusterProcs, camera: str) -> list[Entry]:
    """(entry ID as (ms, n), fields) of a camera's stream, in order."""
    raw = cluster.client().xrange(STREAM.format(camera))
    return [(entry_id(str(i)), {str(k): str(v) for k, v in f.items()}) for i, f in raw]
