"""Half-open connections (a switch reboot: no FIN, no RST, nothing comes back) between the sink and a
real redis-server, made by the fault proxy (tests/support/faultproxy.py): the sink notices within
2 x socket_timeout_s (README: Dead connections), reconnects once the link is back and writes every
entry exactly once, in order, although the proxy then delivers the commands it held."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import structlog

from daemon.config.redis import RedisConfig
from daemon.core.metrics import Metrics
from daemon.publish.redis_conn import make_client
from tests.support.fault_fixtures import FaultProxyFactory
from tests.support.faultproxy import FaultProxy
from tests.support.metrics import sample
from tests.support.outage_log import assert_once_per_change
from tests.support.sink_helpers import config, make_sink, result, running
from tests.support.streams import assert_exactly_once_in_order, stream
from tests.support.waits import async_wait_until


def half_open_config(proxy: FaultProxy, **kw: Any) -> RedisConfig:
    return config(proxy.url_for("redis", "/0"), publish_batch=8, **kw)


def bound_s(cfg: RedisConfig) -> float:
    """The documented detection bound for a command in flight: one send and one reply."""
    return 2 * cfg.socket_timeout_s


def test_a_connection_going_half_open_mid_stream_is_noticed_and_nothing_is_lost_or_doubled(
    redis_server: Any, fault_proxy: FaultProxyFactory
) -> None:
    server = redis_server()
    proxy = fault_proxy("127.0.0.1", server.port)
    cfg = half_open_config(proxy)
    metrics = Metrics()
    sent = 0

    async def produce(sink: Any, seconds: float) -> None:
        nonlocal sent
        for _ in range(int(seconds * 100)):
            sink.accept(result(sent))
            sent += 1
            await asyncio.sleep(0.01)

    async def scenario() -> None:
        async with running(make_sink(cfg, metrics)) as sink:
            await produce(sink, 0.5)
            assert sink.connected
            proxy.half_open()  # mid-stream: the connection stays up, nothing comes back
            producing = asyncio.create_task(produce(sink, 0.5))
            await async_wait_until(lambda: not sink.connected, timeout_s=10 * bound_s(cfg))
            await producing
            assert sink.buffered > 0
            proxy.restore()  # the link is back: what was held on the old connection arrives too
            await produce(sink, 0.3)
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected, timeout_s=30)

    with structlog.testing.capture_logs() as logs:
        asyncio.run(scenario())
    assert_exactly_once_in_order(stream(server, "cam1"), sent)
    assert sample(metrics, "beltsight_entries_published_total", camera="cam1") == sent
    down = [e for e in logs if e["event"] == "redis_down"]
    assert down and "imeout" in str(down[0])  # the half-open link was found out as a timeout
    # once while it lasted (a slow reply on a loaded machine later is an outage of its own)
    assert_once_per_change(logs)
    assert proxy.stats().accepted >= 2  # it reconnected


def test_an_idle_connection_gone_half_open_is_found_out_at_the_next_write(
    redis_server: Any, fault_proxy: FaultProxyFactory
) -> None:
    server = redis_server()
    proxy = fault_proxy("127.0.0.1", server.port)
    cfg = half_open_config(proxy, keepalive_s=0.3)  # idle past it: a PING (bounded) goes first
    metrics = Metrics()

    async def scenario() -> None:
        async with running(make_sink(cfg, metrics)) as sink:
            sink.accept(result(0))
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected, timeout_s=30)
            proxy.half_open()
            before = proxy.stats().bytes_upstream
            await asyncio.sleep(cfg.keepalive_s * 2)  # idle past the health-check interval
            sink.accept(result(1))
            await async_wait_until(lambda: not sink.connected, timeout_s=10 * bound_s(cfg))
            assert server.client().xlen(cfg.stream_for("cam1")) == 1  # nothing reached Redis meanwhile
            assert proxy.stats().bytes_upstream == before
            proxy.restore()
            sink.accept(result(2))
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected, timeout_s=30)

    asyncio.run(scenario())
    assert_exactly_once_in_order(stream(server, "cam1"), 3)
    assert sample(metrics, "beltsight_entries_published_total", camera="cam1") == 3


def test_client_sockets_carry_tcp_keepalive_from_keepalive_s(redis_server: Any) -> None:
    server = redis_server()
    cfg = config(server.url, keepalive_s=12.0)

    async def probe() -> tuple[int, int, int, int]:
        client = make_client(cfg)
        try:
            await client.ping()
            conn = client.connection_pool._available_connections[0]  # type: ignore[union-attr]
            sock = conn._writer.transport.get_extra_info("socket")
            return (
                sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
            )
        finally:
            await client.aclose()

    keepalive, idle, interval, count = asyncio.run(probe())
    assert keepalive != 0 and (idle, interval, count) == (12, 4, 3)
