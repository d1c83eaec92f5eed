"""Redis under Sentinel for tests: the `redis_sentinel` fixture, a factory of ready `SentinelGroup`s
(tools/kit/sentinel.py: a master, its replica and three sentinels, real processes on free loopback ports).

    def test_x(redis_sentinel):
        group = redis_sentinel()
        cfg = RedisConfig(url="redis://127.0.0.1:1/0", sentinels=group.addresses, sentinel_master=group.name)
        old = group.master; old.kill(); new = group.wait_promoted(old); old.restart(); group.wait_replicated()

Registered in tests/conftest.py's `pytest_plugins`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tools.kit.redis_server import find_redis_server
from tools.kit.sentinel import MASTER_NAME, SentinelGroup, SentinelServer, ask, start_group

__all__ = ["MASTER_NAME", "SentinelFactory", "SentinelGroup", "SentinelServer", "ask", "redis_sentinel"]

SentinelFactory = Callable[..., SentinelGroup]


@pytest.fixture
def redis_sentinel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelFactory]:
    """Factory: `redis_sentinel(sentinel_password=None)` -> a ready SentinelGroup (the sentinels'
    default user needs `sentinel_password` when given)."""
    binary = find_redis_server()
    if binary is None:
        pytest.skip("redis-server not installed (Debian: apt-get install redis-server)")
    groups: list[SentinelGroup] = []

    def start(*, sentinel_password: str | None = None) -> SentinelGroup:
        group = start_group(binary, tmp_path_factory.mktemp, sentinel_password=sentinel_password)
        groups.append(group)
        return group

    yield start
    for group in groups:
        group.close()
