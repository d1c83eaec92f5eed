"""A Redis Cluster on TLS ports only: the six nodes of tests/support/fixtures_redis_cluster.py with
`--port 0 --tls-port N --tls-cluster yes --tls-replication yes` and the certificates of
tests/support/fixtures_redis_tls.py (the CA's server certificate names 127.0.0.1, the address the
nodes announce), clients asked for a certificate (`tls-auth-clients yes`).

    def test_x(redis_tls_cluster, tls_material):
        cluster = redis_tls_cluster()
        cfg = RedisConfig(url=cluster.url, cluster=True, tls_ca_file=tls_material.ca, ...)

Registered in tests/conftest.py's `pytest_plugins`.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.cluster

from tests.support.fixtures_redis_cluster import CLUSTER_NODE_TIMEOUT_MS, ClusterNodeServer, RedisClusterProcs
from tests.support.fixtures_redis_tls import TlsMaterial
from tools.kit.redis_server import find_redis_server


def _tls_kwargs(m: TlsMaterial) -> dict[str, Any]:
    return {
        "ssl": True,
        "ssl_ca_certs": str(m.ca),
        "ssl_certfile": str(m.client_cert),
        "ssl_keyfile": str(m.client_key),
    }


class TlsClusterNode(ClusterNodeServer):
    """A cluster node listening on a TLS port only (its bus on port + 10000, TLS as well)."""

    def __init__(self, binary: str, data_dir: Path, material: TlsMaterial, extra_args: list[str]) -> None:
        super().__init__(binary, data_dir, extra_args=extra_args)
        self.material = material

    @property
    def url(self) -> str:
        return f"rediss://127.0.0.1:{self.port}/0"

    def _argv(self) -> list[str]:
        argv = super()._argv()
        argv[argv.index("--port") + 1] = "0"
        m = self.material
        argv += [
            "--tls-port",
            str(self.port),
            "--tls-cert-file",
            str(m.server_cert),
            "--tls-key-file",
            str(m.server_key),
        ]
        argv += ["--tls-ca-cert-file", str(m.ca), "--tls-auth-clients", "yes"]
        return [*argv, "--tls-cluster", "yes", "--tls-replication", "yes"]

    def _probe(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=0.5, socket_connect_timeout=0.5, **_tls_kwargs(self.material))

    def ask(self, *command: str) -> Any:
        c = redis.Redis(
            port=self.port,
            decode_responses=True,
            socket_timeout=2,
            socket_connect_timeout=1,
            **_tls_kwargs(self.material),
        )
        try:
            return c.execute_command(*command)
        finally:
            c.close()


class TlsClusterProcs(RedisClusterProcs):
    """RedisClusterProcs whose `create()` and `client()` speak TLS (with the client certificate)."""

    def __init__(self, nodes: list[ClusterNodeServer], material: TlsMaterial) -> None:
        super().__init__(nodes)
        self.material = material

    def cli_options(self) -> list[str]:
        m = self.material
        return ["--tls", "--cacert", str(m.ca), "--cert", str(m.client_cert), "--key", str(m.client_key)]

    def client(self) -> redis.RedisCluster:
        c = redis.RedisCluster(
            startup_nodes=[redis.cluster.ClusterNode("127.0.0.1", n.port) for n in self.nodes],
            decode_responses=True,
            socket_timeout=5,
            **_tls_kwargs(self.material),
        )
        self._clients.append(c)
        return c


@pytest.fixture
def redis_tls_cluster(
    tmp_path_factory: pytest.TempPathFactory, tls_material: TlsMaterial
) -> Iterator[Callable[[], RedisClusterProcs]]:
    """Factory: `redis_tls_cluster()` -> a created, healthy cluster (3 masters, 3 replicas) on TLS ports."""
    binary = find_redis_server()
    if binary is None or shutil.which("redis-cli") is None:
        pytest.skip("redis-server / redis-cli not installed (Debian: apt-get install redis-server)")
    clusters: list[RedisClusterProcs] = []

    def start() -> RedisClusterProcs:
        args = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
        args += ["--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS), "--repl-diskless-sync-delay", "0"]
        nodes: list[ClusterNodeServer] = [
            TlsClusterNode(binary, tmp_path_factory.mktemp(f"tls-cluster-node{i}"), tls_material, args)
            for i in range(6)
        ]
        cluster = TlsClusterProcs(nodes, tls_material)
        clusters.append(cluster)
        for node in nodes:
            node.start()
        return cluster.create()

    yield start
    for cluster in clusters:
        cluster.close()
