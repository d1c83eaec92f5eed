"""Redis refusing writes, provoked for real on a redis-server: OOM, READONLY, NOPERM, WRONGTYPE, MISCONF,
LOADING, BUSY. Each is logged once with its code and what to do, the entries are held (memory, then
the spool), and once the cause is fixed every accepted frame is in Redis exactly once, in order."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import structlog

from daemon.core.metrics import Metrics
from daemon.publish.redis_conn import REFUSALS
from tests.support.metrics import sample
from tests.support.outage_log import assert_once_per_change
from tests.support.sink_helpers import config, make_sink, result, running
from tests.support.streams import assert_exactly_once_in_order, stream
from tests.support.waits import async_wait_until, wait_until
from tools.kit.redis_server import RedisServer, find_redis_server

STREAM = "beltsight:detections:cam1"


@dataclass
class Case:
    server: RedisServer
    url: str
    fix: Callable[[], None]


def info(server: RedisServer, section: str) -> dict[str, Any]:
    return dict(server.client().info(section))


@contextlib.contextmanager
def provoked(code: str, tmp_path: Path) -> Iterator[Case]:
    """A redis-server refusing writes with `code`; `fix()` removes the cause."""
    binary = find_redis_server()
    if binary is None:
        pytest.skip("redis-server not installed")
    servers: list[RedisServer] = []

    def start(*extra: str, data_dir: Path | None = None) -> RedisServer:
        data = data_dir or tmp_path / f"redis{len(servers)}"
        data.mkdir(exist_ok=True)
        servers.append(RedisServer(binary, data, extra_args=extra).start())
        return servers[-1]

    try:
        yield _provoke(code, start, tmp_path)
    finally:
        for server in servers:
            server.close()


def _provoke(code: str, start: Callable[..., RedisServer], tmp_path: Path) -> Case:
    if code == "OOM":
        server = start("--maxmemory-policy", "noeviction")
        server.client().config_set("maxmemory", "1")
        return Case(server, server.url, lambda: server.client().config_set("maxmemory", "0"))
    if code == "READONLY":
        server, master = start(), start()
        server.client().replicaof("127.0.0.1", master.port)
        wait_until(lambda: info(server, "replication").get("master_link_status") == "up", 30, "replication")
        return Case(server, server.url, lambda: server.client().replicaof("NO", "ONE"))
    if code == "NOPERM":
        server = start("--user", "writer", "on", ">pw", "~*", "+@all", "-xadd")
        fix = lambda: server.client().acl_setuser("writer", enabled=True, commands=["+xadd"])  # noqa: E731
        return Case(server, f"redis://writer:pw@127.0.0.1:{server.port}/0", fix)
    if code == "WRONGTYPE":
        server = start()
        server.client().set(STREAM, "not a stream")
        return Case(server, server.url, lambda: server.client().delete(STREAM))
    if code == "MISCONF":
        server = start("--enable-protected-configs", "yes")
        gone = tmp_path / "rdb-dir"
        gone.mkdir()
        client = server.client()
        client.config_set("save", "3600 1")
        client.config_set("dir", str(gone))
        gone.rmdir()  # the snapshot cannot be written
        client.bgsave()
        wait_until(lambda: info(server, "persistence")["rdb_last_bgsave_status"] == "err", 30, "a failed BGSAVE")

        def fix_misconf() -> None:
            gone.mkdir()
            client.config_set("dir", str(gone))
            client.bgsave()
            wait_until(lambda: info(server, "persistence")["rdb_last_bgsave_status"] == "ok", 30, "a BGSAVE")

        return Case(server, server.url, fix_misconf)
    if code == "BUSY":
        server = start("--busy-reply-threshold", "50")
        script = threading.Thread(target=_endless_script, args=(server,), daemon=True)
        script.start()
        wait_until(lambda: _busy(server), 30, "the script to block Redis")

        def fix_busy() -> None:
            server.client().script_kill()
            script.join(30)

        return Case(server, server.url, fix_busy)
    assert code == "LOADING"  # a replica loading its master's dataset (slowly) answers LOADING
    master = start()
    master.client().eval("for i = 1, 20000 do redis.call('SET', 'k' .. i, i) end", 0)
    server = start("--key-load-delay", "500", "--loading-process-events-interval-bytes", "1024")
    server.client().replicaof("127.0.0.1", master.port)
    wait_until(lambda: info(server, "persistence")["loading"] == 1, 30, "the replica loading")

    def fix_loading() -> None:
        wait_until(lambda: info(server, "persistence")["loading"] == 0, 120, "the load to end")
        server.client().replicaof("NO", "ONE")  # the master's keys stay; the stream was never written

    return Case(server, server.url, fix_loading)


def _endless_script(server: RedisServer) -> None:
    with contextlib.suppress(redis.ResponseError):
        server.client().eval("while true do end", 0)


def _busy(server: RedisServer) -> bool:
    try:
        server.client().ping()
    except redis.ResponseError as exc:
        return "BUSY" in str(exc)
    return False


@pytest.mark.slow
@pytest.mark.parametrize("code", sorted(REFUSALS))
def test_a_refusal_is_logged_once_held_and_delivered_exactly_once_when_fixed(code: str, tmp_path: Path) -> None:
    with provoked(code, tmp_path) as case, structlog.testing.capture_logs() as logs:
        cfg = config(case.url, spool_dir=tmp_path / "spool", spool_after_s=0.2)
        metrics = Metrics()

        def refusal_logged() -> bool:
            return any(e.get("code") == code for e in logs)

        async def scenario() -> None:
            async with running(make_sink(cfg, metrics)) as sink:
                for seq in range(30):
                    sink.accept(result(seq))
                    await asyncio.sleep(0.01)
                await async_wait_until(refusal_logged, timeout_s=30)
                await async_wait_until(lambda: sink.spooled == 30, timeout_s=30)  # held, on disk
                await asyncio.to_thread(case.fix)
                for seq in range(30, 50):
                    sink.accept(result(seq))
                await async_wait_until(lambda: sink.buffered == 0 and sink.connected, timeout_s=60)

        asyncio.run(scenario())
        assert_exactly_once_in_order(stream(case.server, "cam1"), 50)
    said = [e for e in logs if e.get("code") == code]
    assert said and all(e["hint"] == REFUSALS[code] for e in said)
    # once while it lasts, not per batch (a retry timing out on a loaded machine is an outage between)
    assert_once_per_change(logs)
    assert not [e for e in logs if e.get("exc_info")]  # no traceback
    for reason in ("buffer_full", "spool_full"):
        assert sample(metrics, "beltsight_frames_dropped_total", camera="cam1", reason=reason) == 0
