"""Pytest fixtures around `tests.support.faultproxy` (a plugin module: list it in `pytest_plugins`).

    def test_x(fault_proxy, redis_port):
        proxy = fault_proxy("127.0.0.1", redis_port)
        client = redis.Redis(port=proxy.port, socket_timeout=0.5)
        proxy.black_hole()

Every proxy the factory made is closed at test end; an error inside one fails the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import pytest

from tests.support.faultproxy import FaultProxy


class FaultProxyFactory(Protocol):
    def __call__(
        self, upstream_host: str, upstream_port: int, listen_host: str = "127.0.0.1", listen_port: int = 0
    ) -> FaultProxy: ...


@pytest.fixture
def fault_proxy() -> Iterator[FaultProxyFactory]:
    """A factory of started `FaultProxy`s in front of `upstream_host:upstream_port`, closed at teardown."""
    proxies: list[FaultProxy] = []

    def make(
        upstream_host: str, upstream_port: int, listen_host: str = "127.0.0.1", listen_port: int = 0
    ) -> FaultProxy:
        proxy = FaultProxy(upstream_host, upstream_port, listen_host=listen_host, listen_port=listen_port)
        proxy.start()
        proxies.append(proxy)
        return proxy

    yield make
    errors: list[Exception] = []
    for proxy in reversed(proxies):
        try:
            proxy.close()
        except Exception as exc:  # close them all, then fail on the first error
            errors.append(exc)
    if errors:
        raise errors[0]
