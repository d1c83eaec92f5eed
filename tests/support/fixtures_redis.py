"""Real `redis-server` processes for tests (tools/kit/redis_server.py), on free loopback ports, killed
and restarted at will.

    def test_x(redis_server):
        server = redis_server(appendonly=True, password="s3cret")
        server.kill(); server.restart()
        assert server.client().xlen("k") == 0

Every server started by the factory is stopped, and every `client()` closed, at test end.
A Redis Cluster (`redis_cluster`) and TLS servers (`redis_tls_server`, `tls_material`) are in
tests/support/fixtures_redis_cluster.py and tests/support/fixtures_redis_tls.py, registered from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import pytest

from tools.kit.ports import free_port
from tools.kit.redis_server import RedisServer, find_redis_server

RedisServerFactory = Callable[..., RedisServer]


@pytest.fixture
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServerFactory]:
    """Factory: `redis_server(appendonly=False, password=None, acl_users=(), replica_of=None)` -> started
    RedisServer; with `replica_of` (a started RedisServer) it replicates that one (`--replicaof`)."""
    binary = find_redis_server()
    if binary is None:
        pytest.skip("redis-server not installed (Debian: apt-get install redis-server)")
    servers: list[RedisServer] = []

    def start(
        *,
        appendonly: bool = False,
        password: str | None = None,
        acl_users: Sequence[str] = (),
        replica_of: RedisServer | None = None,
    ) -> RedisServer:
        data_dir = tmp_path_factory.mktemp("redis")
        extra = ["--replicaof", "127.0.0.1", str(replica_of.port)] if replica_of is not None else []
        server = RedisServer(
            binary, data_dir, appendonly=appendonly, password=password, acl_users=acl_users, extra_args=extra
        )
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.close()


# Clusters and TLS servers live in their own modules; importing the fixtures here registers them.
from tests.support.fixtures_redis_cluster import redis_cluster  # noqa: E402
from tests.support.fixtures_redis_tls import redis_tls_server, tls_material  # noqa: E402

__all__ = [
    "RedisServer",
    "find_redis_server",
    "free_port",
    "redis_cluster",
    "redis_server",
    "redis_tls_server",
    "tls_material",
]
