"""FaultProxy in front of a real redis-server, driven through redis-py (sync and asyncio) and raw sockets.

Every client here is built without redis-py's own retries (redis-py 6+ retries connection errors
and timeouts by default, which would hide the faults), and every wait is a condition with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pytest
import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.support.faultproxy import FaultProxy
from tests.support.waits import wait_until
from tools.kit import leash
from tools.kit.ports import free_port

if TYPE_CHECKING:  # the module itself is loaded as a plugin, below (importing it first defeats that)
    from tests.support.fault_fixtures import FaultProxyFactory

pytest_plugins = ["tests.support.fault_fixtures"]

REDIS_SERVER = shutil.which("redis-server")
pytestmark = pytest.mark.skipif(REDIS_SERVER is None, reason="needs redis-server")

DEADLINE_S = 20.0
"""Generous deadline for every condition wait (a loaded CI box may be slow; a hang still fails)."""


def client(port: int, socket_timeout: float | None = 5.0) -> redis.Redis:
    return redis.Redis(
        host="127.0.0.1",
        port=port,
        socket_timeout=socket_timeout,
        socket_connect_timeout=5.0,
        retry=Retry(NoBackoff(), 0),
    )


def aclient(port: int, socket_timeout: float | None = 5.0) -> aioredis.Redis:
    return aioredis.Redis(
        host="127.0.0.1",
        port=port,
        socket_timeout=socket_timeout,
        socket_connect_timeout=5.0,
        retry=AsyncRetry(NoBackoff(), 0),
    )


@pytest.fixture(scope="module")
def redis_port() -> Iterator[int]:
    """A redis-server of this module's own, on a free loopback port."""
    assert REDIS_SERVER is not None
    port = free_port()
    proc = leash.spawn(
        [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        probe = client(port, socket_timeout=1.0)
        try:

            def answers() -> bool:
                if proc.poll() is not None:
                    raise AssertionError(f"redis-server exited with {proc.returncode}")
                try:
                    return bool(probe.ping())
                except redis.ConnectionError:
                    return False

            wait_until(answers, DEADLINE_S, "redis-server answers PING", poll_s=0.01)
        finally:
            probe.close()
        yield port
    finally:
        proc.kill()
        proc.wait(timeout=DEADLINE_S)


@pytest.fixture
def direct(redis_port: int) -> Iterator[redis.Redis]:
    """A client straight to the server (no proxy), on a flushed database."""
    c = client(redis_port)
    c.flushall()
    yield c
    c.close()


@pytest.fixture
def proxy(fault_proxy: FaultProxyFactory, redis_port: int) -> FaultProxy:
    return fault_proxy("127.0.0.1", redis_port)


@contextlib.contextmanager
def closing(c: redis.Redis) -> Iterator[redis.Redis]:
    try:
        yield c
    finally:
        c.close()


def raw_ping(sock: socket.socket) -> bytes:
    """Send an inline PING and read the 7-byte `+PONG\\r\\n`."""
    sock.sendall(b"PING\r\n")
    return recv_exactly(sock, 7)


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        data = sock.recv(n - len(got))
        if not data:
            break
        got += data
    return got


def rtt(c: redis.Redis, n: int) -> float:
    """The fastest of `n` PING round trips, in seconds."""
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        assert c.ping()
        best = min(best, time.perf_counter() - t0)
    return best


def test_clean_forwarding_sync_and_asyncio(proxy: FaultProxy, direct: redis.Redis) -> None:
    with closing(client(proxy.port)) as c:
        assert c.set("k", b"v" * 1000)
        assert c.get("k") == b"v" * 1000
    assert direct.get("k") == b"v" * 1000

    async def via_asyncio() -> bytes | str | None:
        ac = aclient(proxy.port)
        try:
            await ac.xadd("s", {"f": "1"})
            value: bytes | str | None = await ac.get("k")
            return value
        finally:
            await ac.aclose()

    assert asyncio.run(via_asyncio()) == b"v" * 1000
    assert direct.xlen("s") == 1
    stats = proxy.wait_for(lambda s: s.live == 0)
    assert stats.accepted == 2
    assert stats.bytes_upstream > 1000  # the SET's value went up
    assert stats.bytes_downstream > 2000  # the value came back down twice
    assert proxy.url_for("redis", "/0") == f"redis://127.0.0.1:{proxy.port}/0"


def test_latency_adds_to_the_round_trip(proxy: FaultProxy, direct: redis.Redis) -> None:
    lat_s = 0.1
    with closing(client(proxy.port)) as c:
        direct_rtt = rtt(direct, 20)
        clean_rtt = rtt(c, 20)
        proxy.latency(lat_s * 1000)
        both = rtt(c, 5)
        proxy.latency(0)
        proxy.latency(lat_s * 1000, "downstream")
        one_way = rtt(c, 5)
        proxy.restore()
        assert c.ping()
    # a chunk read at t leaves at >= t + latency: each round trip pays it once per direction
    assert both >= 2 * lat_s, (both, direct_rtt, clean_rtt)
    assert both >= direct_rtt + 1.5 * lat_s
    assert one_way >= lat_s, (one_way, direct_rtt)
    # the delay is the fault's, not the proxy's own: the best clean round trip, measured in the same
    # run, is below the best delayed one (a relative bound: a loaded machine slows both)
    assert clean_rtt < one_way, (clean_rtt, one_way)


def test_reset_mid_reply_loses_the_reply_of_an_applied_write(proxy: FaultProxy, direct: redis.Redis) -> None:
    with closing(client(proxy.port)) as c:
        assert c.ping()  # the handshake's replies are through: the next reply is INCR's
        proxy.reset_mid_reply(after_bytes=2)
        with pytest.raises(redis.ConnectionError):
            c.incr("counter")
        assert direct.get("counter") == b"1"  # applied once, its reply lost
        assert proxy.stats().resets_injected == 1
        # one shot: a new connection works, and the command is not replayed
        assert c.incr("counter") == 2


def test_reset_mid_reply_delivers_the_head_then_resets(proxy: FaultProxy, direct: redis.Redis) -> None:
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=DEADLINE_S) as sock:
        assert raw_ping(sock) == b"+PONG\r\n"
        proxy.reset_mid_reply(after_bytes=3)
        sock.sendall(b"INCR raw\r\n")  # reply ":1\r\n"
        got = b""
        with pytest.raises(ConnectionResetError):  # a reset, not a clean FIN (recv would return b"")
            for _ in range(100):
                data = sock.recv(100)
                assert data, f"clean EOF instead of a reset after {got!r}"
                got += data
        assert got == b":1\r"
    assert direct.get("raw") == b"1"


def test_reset_mid_reply_with_the_asyncio_client(proxy: FaultProxy, direct: redis.Redis) -> None:
    async def scenario() -> None:
        ac = aclient(proxy.port)
        try:
            assert await ac.ping()
            proxy.reset_mid_reply(after_bytes=0)
            with pytest.raises(redis.ConnectionError):
                await ac.xadd("events", {"n": "1"})
        finally:
            await ac.aclose()

    asyncio.run(scenario())
    assert direct.xlen("events") == 1


def test_black_hole_times_out_and_restore_recovers(proxy: FaultProxy, direct: redis.Redis) -> None:
    with (
        closing(client(proxy.port, socket_timeout=0.5)) as live,
        closing(client(proxy.port, socket_timeout=0.5)) as new,
    ):
        assert live.ping()
        proxy.black_hole()
        with pytest.raises(redis.TimeoutError):
            live.ping()
        with pytest.raises(redis.TimeoutError):
            new.ping()  # accepted, and its handshake never answered
        assert proxy.stats().listening
        proxy.restore()
        assert live.set("after", "1")
        assert new.get("after") == b"1"


def test_black_hole_holds_the_bytes_sent_into_it(proxy: FaultProxy, direct: redis.Redis) -> None:
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=DEADLINE_S) as sock:
        assert raw_ping(sock) == b"+PONG\r\n"
        proxy.black_hole()
        sock.sendall(b"SET held 1\r\n")
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sock.recv(10)
        assert direct.get("held") is None
        proxy.restore()  # forwarded once the link is back, as TCP would retransmit it
        sock.settimeout(DEADLINE_S)
        assert recv_exactly(sock, 5) == b"+OK\r\n"
    assert direct.get("held") == b"1"


def test_half_open_times_out_and_keeps_the_client_socket_open(proxy: FaultProxy) -> None:
    with (
        closing(client(proxy.port, socket_timeout=0.5)) as c,
        socket.create_connection(("127.0.0.1", proxy.port), timeout=DEADLINE_S) as sock,
    ):
        assert c.ping()
        assert raw_ping(sock) == b"+PONG\r\n"
        proxy.half_open()
        with pytest.raises(redis.TimeoutError):
            c.ping()
        before = proxy.stats()
        sock.sendall(b"PING\r\n")
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):  # no data, no FIN (b""), no reset: silence
            sock.recv(10)
        mine = [i for i in proxy.connections() if i.client_address[:2] == sock.getsockname()[:2]]
        assert len(mine) == 1
        assert mine[0].client_open and mine[0].upstream_open
        assert mine[0].held_upstream == 0  # the proxy did not read the PING: it is still in its kernel buffer
        assert proxy.stats().bytes_upstream == before.bytes_upstream  # nothing was read, so nothing went up
        proxy.restore()
        sock.settimeout(DEADLINE_S)
        assert recv_exactly(sock, 7) == b"+PONG\r\n"  # it sat in the kernel, unread, all along
        assert c.ping()


def test_refuse_closes_the_listener_and_restore_reopens_it(proxy: FaultProxy) -> None:
    with closing(client(proxy.port)) as live:
        assert live.ping()
        proxy.refuse()
        assert not proxy.stats().listening
        with closing(client(proxy.port)) as new, pytest.raises(redis.ConnectionError):
            new.ping()
        assert live.ping()  # live connections are not touched
        proxy.restore()
        with closing(client(proxy.port)) as new:
            assert new.ping()


def test_refuse_rst_resets_new_connections(proxy: FaultProxy) -> None:
    proxy.refuse(rst=True)
    with closing(client(proxy.port)) as new, pytest.raises(redis.ConnectionError):
        new.ping()
    assert proxy.stats().refused >= 1
    proxy.restore()
    with closing(client(proxy.port)) as new:
        assert new.ping()


def test_drop_all_resets_live_connections(proxy: FaultProxy) -> None:
    with (
        closing(client(proxy.port, socket_timeout=DEADLINE_S)) as c,
        socket.create_connection(("127.0.0.1", proxy.port), timeout=DEADLINE_S) as sock,
        ThreadPoolExecutor(1) as pool,
    ):
        assert c.ping()
        assert raw_ping(sock) == b"+PONG\r\n"
        assert proxy.stats().live == 2
        proxy.black_hole()  # hold a command in flight, so redis-py is reading when the reset comes
        in_flight = pool.submit(c.ping)
        wait_until(
            lambda: any(i.held_upstream > 0 for i in proxy.connections()),
            DEADLINE_S,
            "the PING is held in the proxy",
            poll_s=0.01,
        )
        proxy.drop_all()
        with pytest.raises(redis.ConnectionError):
            in_flight.result(timeout=DEADLINE_S)
        with pytest.raises(ConnectionResetError):
            sock.recv(10)
        stats = proxy.wait_for(lambda s: s.live == 0, timeout=DEADLINE_S)
        assert stats.dropped == 2
        proxy.restore()
        assert c.ping()  # still accepting: redis-py reconnects on the next command
    assert proxy.stats().accepted == 3


def test_redis_py_silently_replaces_an_idle_connection_that_was_reset(proxy: FaultProxy) -> None:
    """Worth knowing when writing fault tests: drop_all between commands raises nothing in redis-py.

    Its pool checks a connection for a pending error at checkout and reconnects; only a reset
    while a command is in flight (above, or `reset_mid_reply`) surfaces as ConnectionError.
    """
    with closing(client(proxy.port)) as c:
        assert c.ping()
        proxy.drop_all()
        proxy.wait_for(lambda s: s.live == 0)
        assert c.ping()
    assert proxy.stats().accepted == 2


def test_drop_all_with_the_asyncio_client(proxy: FaultProxy) -> None:
    """The asyncio client after drop_all: redis-py 8's pool notices the closed socket at checkout
    and reconnects, as the sync client does (above); older versions raised ConnectionError on the
    next command. Either way the client is back on a new connection through the proxy."""

    async def scenario() -> None:
        ac = aclient(proxy.port)
        try:
            assert await ac.ping()
            await asyncio.to_thread(proxy.drop_all)
            await asyncio.to_thread(proxy.wait_for, lambda s: s.live == 0)
            with contextlib.suppress(redis.ConnectionError):
                await ac.ping()
            assert await ac.ping()
        finally:
            await ac.aclose()

    asyncio.run(scenario())
    assert proxy.stats().accepted == 2


def test_bandwidth_caps_a_1mb_get(proxy: FaultProxy, direct: redis.Redis) -> None:
    size, cap = 1_000_000, 1_000_000.0  # capped: >= 0.95 s
    direct.set("big", b"x" * size)
    with closing(client(proxy.port, socket_timeout=DEADLINE_S)) as c:
        clean = float("inf")
        for _ in range(3):
            t0 = time.monotonic()
            assert len(c.get("big") or b"") == size
            clean = min(clean, time.monotonic() - t0)
        proxy.bandwidth(cap, "downstream")
        t0 = time.monotonic()
        assert len(c.get("big") or b"") == size
        capped = time.monotonic() - t0
    assert capped >= 0.95 * size / cap, (capped, clean)
    assert clean < capped, (clean, capped)  # slow because of the cap, not the proxy (same run)


def test_close_leaves_nothing_listening_or_running(redis_port: int) -> None:
    p = FaultProxy("127.0.0.1", redis_port)
    with p, closing(client(p.port)) as c:
        assert c.ping()
        port = p.port
    assert p._thread is not None and not p._thread.is_alive()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S).close()
    with pytest.raises(RuntimeError):
        p.black_hole()


def test_factory_fixture_proxies_are_independent(fault_proxy: FaultProxyFactory, redis_port: int) -> None:
    a = fault_proxy("127.0.0.1", redis_port)
    b = fault_proxy("127.0.0.1", redis_port)
    assert a.port != b.port
    a.black_hole()
    with closing(client(b.port)) as c:
        assert c.ping()
    with closing(client(a.port, socket_timeout=0.3)) as c, pytest.raises(redis.TimeoutError):
        c.ping()


def test_upstream_down_resets_the_client(fault_proxy: FaultProxyFactory) -> None:
    proxy = fault_proxy("127.0.0.1", free_port())  # nothing listens there
    with closing(client(proxy.port)) as c, pytest.raises(redis.ConnectionError):
        c.ping()
    proxy.wait_for(lambda s: s.upstream_failures == 1 and s.live == 0)
