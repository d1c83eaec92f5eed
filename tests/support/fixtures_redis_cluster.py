"""The `redis_cluster` fixture: a real Redis Cluster (tools/kit/redis_cluster.py), six cluster-enabled
`redis-server` processes on loopback ports, three masters with one replica each.

    def test_x(redis_cluster):
        cluster = redis_cluster()  # or redis_cluster(full_coverage=False, appendonly=True)
        victim = cluster.master_of("beltsight:detections:cam1")
        victim.kill(); cluster.wait_promoted(victim, key); victim.restart(); cluster.wait_replicated()

Registered through tests/support/fixtures_redis.py.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator

import pytest

from tools.kit.redis_cluster import CLUSTER_NODE_TIMEOUT_MS, ClusterNodeServer, RedisClusterProcs, start_cluster
from tools.kit.redis_server import find_redis_server


@pytest.fixture
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., RedisClusterProcs]]:
    """Factory: `redis_cluster(full_coverage=True, appendonly=False)` -> a created, healthy
    RedisClusterProcs (3 masters, 3 replicas); see `tools.kit.redis_cluster.start_cluster`."""
    binary = find_redis_server()
    if binary is None or shutil.which("redis-cli") is None:
        pytest.skip("redis-server / redis-cli not installed (Debian: apt-get install redis-server)")
    clusters: list[RedisClusterProcs] = []

    def start(*, full_coverage: bool = True, appendonly: bool = False) -> RedisClusterProcs:
        dirs = [tmp_path_factory.mktemp(f"cluster-node{i}") for i in range(6)]
        cluster = start_cluster(binary, dirs, full_coverage=full_coverage, appendonly=appendonly)
        clusters.append(cluster)
        return cluster

    yield start
    for cluster in clusters:
        cluster.close()


__all__ = ["CLUSTER_NODE_TIMEOUT_MS", "ClusterNodeServer", "RedisClusterProcs", "redis_cluster"]
