"""RedisSink with a disk spool (`redis.spool_dir`) against real redis-server processes."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from daemon.config.redis import RedisConfig
from daemon.core.metrics import Metrics
from tests.support.fault_fixtures import FaultProxyFactory
from tests.support.metrics import sample
from tests.support.sink_helpers import BASE_MS, config, make_sink, readme_acl, result, running, stored
from tests.support.waits import async_wait_until

CAMERAS = ("cam1", "cam2")


def seqs_of(server: Any, cfg: RedisConfig, camera: str) -> list[int]:
    return [e["seq"] for e in stored(server.client(), cfg.stream_for(camera))]


@pytest.mark.slow
def test_ten_second_outage_spills_to_disk_and_loses_nothing(redis_server: Any, tmp_path: Path) -> None:
    server = redis_server(appendonly=True)
    cfg = config(server.url, buffer_max=100, publish_batch=32, spool_dir=tmp_path / "spool")
    metrics = Metrics()
    sent = dict.fromkeys(CAMERAS, 0)
    most_spooled = 0

    async def produce(seconds: float) -> None:
        nonlocal most_spooled
        for _ in range(int(seconds * 50)):  # ~50 entries/s, the cameras taking turns
            camera = CAMERAS[sum(sent.values()) % 2]
            sink.accept(result(sent[camera], camera, captured_ms=BASE_MS + sent[camera] * 40))
            sent[camera] += 1
            most_spooled = max(most_spooled, sink.spooled)
            await asyncio.sleep(0.02)

    sink = make_sink(cfg, metrics)

    async def scenario() -> None:
        async with running(sink):
            await produce(1.0)
            server.kill()
            await produce(10.0)
            await async_wait_until(lambda: not sink.connected, timeout_s=30)  # it noticed the outage
            await asyncio.gather(produce(1.0), asyncio.to_thread(server.restart))
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected, timeout_s=30)

    asyncio.run(scenario())
    assert most_spooled > 100  # the memory buffer (100) overflowed into the spool
    for camera in CAMERAS:
        assert seqs_of(server, cfg, camera) == list(range(sent[camera]))
        assert sample(metrics, "beltsight_entries_published_total", camera=camera) == sent[camera]
        assert sample(metrics, "beltsight_frames_dropped_total", camera=camera, reason="buffer_full") == 0
    assert not list((tmp_path / "spool").glob("seg-*.log"))  # published segments are deleted


def bulk_replies_bytes(ids: list[str]) -> int:
    """Bytes of the RESP bulk-string replies (`$<len>\\r\\n<id>\\r\\n`) of XADDs that stored `ids`."""
    return sum(len(f"${len(i)}\r\n{i}\r\n") for i in ids)


NO_SUCH_KEY = b"-ERR no such key\r\n"
"""Redis' reply to XINFO STREAM on a stream that does not exist yet."""


def test_a_new_sink_publishes_the_previous_runs_spool_exactly_once(
    redis_server: Any, fault_proxy: FaultProxyFactory, tmp_path: Path
) -> None:
    """The first XADD pipeline goes through; the second reaches Redis but its reply is cut (a real reset
    by the proxy); after that the port refuses connections and Redis is killed."""
    server = redis_server(appendonly=True)
    proxy = fault_proxy("127.0.0.1", server.port)
    # keepalive: no PING before the second pipeline, so its replies are the only bytes counted below
    cfg = config(
        proxy.url_for("redis", "/0"), buffer_max=40, publish_batch=64, spool_dir=tmp_path / "spool", keepalive_s=3600
    )
    metrics_a, metrics_b = Metrics(), Metrics()

    def cam1(seq: int) -> Any:
        # the wall clock went back after seq 0: IDs continue at BASE+1000-1, -2, ... which a
        # replay could not recompute; only the IDs stored in the spool let B recognise them
        return result(seq, "cam1", captured_ms=BASE_MS + (1000 if seq == 0 else seq // 4))

    # The second pipeline's replies: XINFO STREAM on cam2 (not there yet), then 38 XADDs. The cut comes
    # inside the last XADD's reply: Redis has executed every write of the pipeline when it is made.
    second_ids = [f"{BASE_MS + 1000}-{seq}" for seq in range(1, 20)] + [
        f"{BASE_MS + seq * 10}-0" for seq in range(1, 20)
    ]
    cut_after = len(NO_SUCH_KEY) + bulk_replies_bytes(second_ids) - 2

    r = server.client()

    def landed() -> bool:
        return r.xlen(cfg.stream_for("cam1")) == 20 and r.xlen(cfg.stream_for("cam2")) == 19

    async def run_a() -> None:
        sink = make_sink(cfg, metrics_a)
        await sink.open()
        sink.accept(cam1(0))
        async with running(sink):
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected)
            # armed after the handshake and the first pipeline; the live connection stays, new ones fail
            await asyncio.to_thread(proxy.reset_mid_reply, cut_after)
            await asyncio.to_thread(proxy.refuse)
            for seq in range(1, 20):
                sink.accept(cam1(seq))
                sink.accept(result(seq, "cam2"))
            await async_wait_until(lambda: proxy.stats().resets_injected == 1 and not sink.connected, timeout_s=30)
            await async_wait_until(landed, timeout_s=30)
            await asyncio.to_thread(server.kill)
            for seq in range(20, 60):  # memory overflows: the landed entries go to the spool
                sink.accept(cam1(seq))
                sink.accept(result(seq, "cam2"))
                # at a camera's pace: the overflow is spooled before more comes (while a connect
                # attempt is in flight it stays in memory, and past 2 x buffer_max it is dropped)
                await async_wait_until(lambda: sink.buffered - sink.spooled <= cfg.buffer_max)
            assert sink.spooled > 40
            assert await sink.drain(0.3) == 118
        # `running` closed the sink: what was left in memory went to the spool

    async def run_b() -> None:
        sink = make_sink(cfg, metrics_b)
        await sink.open()  # the spool A left
        assert sink.buffered == 118
        for seq in range(60, 65):  # new entries of this run come after the old run's
            sink.accept(cam1(seq))
        async with running(sink):
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected)

    asyncio.run(run_a())
    stats = proxy.stats()
    assert stats.resets_injected == 1 and stats.accepted == 1, "one connection, cut mid-reply; the rest refused"
    assert sample(metrics_a, "beltsight_frames_dropped_total", camera="cam1", reason="shutdown") == 0
    assert sample(metrics_a, "beltsight_frames_dropped_total", camera="cam1", reason="buffer_full") == 0
    server.restart()
    proxy.restore()
    assert server.client().xlen(cfg.stream_for("cam1")) == 20  # incl. the write whose reply was lost
    shutil.copytree(tmp_path / "spool", tmp_path / "spool-before-b")
    asyncio.run(run_b())
    assert seqs_of(server, cfg, "cam1") == list(range(65))
    assert seqs_of(server, cfg, "cam2") == list(range(1, 60))
    assert sample(metrics_b, "beltsight_entries_published_total", camera="cam1") == 64
    assert sample(metrics_b, "beltsight_entries_published_total", camera="cam2") == 59
    assert not list((tmp_path / "spool").glob("seg-*.log"))

    # B "crashed" before its cursor reached the disk: a third run replays the whole spool again
    cfg_c = config(server.url, spool_dir=tmp_path / "spool-before-b")
    metrics_c = Metrics()

    async def run_c() -> None:
        async with running(make_sink(cfg_c, metrics_c)) as sink:
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected)

    asyncio.run(run_c())
    assert seqs_of(server, cfg, "cam1") == list(range(65))
    assert seqs_of(server, cfg, "cam2") == list(range(1, 60))
    assert sample(metrics_c, "beltsight_entries_published_total", camera="cam1") == 59  # all recognised


def test_a_full_spool_drops_the_oldest_and_counts_them(redis_server: Any, tmp_path: Path) -> None:
    server = redis_server()
    cfg = config(server.url, buffer_max=200, spool_max_mb=1, spool_dir=tmp_path / "spool")
    server.kill()
    metrics = Metrics()
    total = 2000

    async def scenario() -> None:
        sink = make_sink(cfg, metrics)
        await sink.open()  # the spool: memory overflows into it before Redis is back
        for seq in range(total):
            sink.accept(result(seq, n_dets=40))  # about 1.3 kB per spooled entry
        assert sink.spooled < total - 200
        await asyncio.to_thread(server.restart)
        async with running(sink):
            await async_wait_until(lambda: sink.buffered == 0)

    asyncio.run(scenario())
    seqs = seqs_of(server, cfg, "cam1")
    dropped = sample(metrics, "beltsight_frames_dropped_total", camera="cam1", reason="spool_full")
    assert 0 < dropped < total - 200
    assert sample(metrics, "beltsight_frames_dropped_total", camera="cam1", reason="buffer_full") == 0
    assert seqs == list(range(int(dropped), total))  # the oldest went, the rest in order
    assert sample(metrics, "beltsight_entries_published_total", camera="cam1") == len(seqs)


def acl_read_only(cfg: RedisConfig, password: str, *, writable: str, read_only: str) -> list[str]:
    """The README's `ACL SETUSER beltsight ...` line, misconfigured: camera `read_only`'s stream may be
    read (XINFO, XRANGE) but not written (XADD: NOPERM); camera `writable`'s stream as documented."""
    rules = readme_acl("beltsight", password)
    documented = "~beltsight:detections:*"
    assert documented in rules, "the README's beltsight user changed: update this test"
    keys = [f"~{cfg.stream_for(writable)}", f"%R~{cfg.stream_for(read_only)}"]
    return [x for rule in rules for x in (keys if rule == documented else [rule])]


def xadds_refused(admin: Any) -> int:
    """XADDs Redis rejected (an ACL NOPERM counts as a rejected call)."""
    return int(admin.info("commandstats").get("cmdstat_xadd", {}).get("rejected_calls", 0))


def test_a_stream_refusing_writes_holds_its_entries_without_duplicating_the_others(
    redis_server: Any, tmp_path: Path
) -> None:
    """A real ACL (`beltsight` may read cam2's stream, not write it): every XADD to it is refused with
    NOPERM by the server while the others go through; granting the key delivers what was held."""
    server = redis_server()
    admin = server.client()
    cfg = config(server.auth_url("pw", "beltsight"), buffer_max=8, publish_batch=16, spool_dir=tmp_path / "spool")
    admin.execute_command(*acl_read_only(cfg, "pw", writable="cam1", read_only="cam2"))
    metrics = Metrics()

    async def scenario() -> None:
        sink = make_sink(cfg, metrics)
        await sink.open()
        for seq in range(40):
            sink.accept(result(seq, "cam1"))
            if seq % 4 == 0:
                sink.accept(result(seq // 4, "cam2"))
        assert sink.spooled > 0

        def retried() -> bool:
            # cam1 goes through; cam2's (at most 10 an attempt) refused 30 times: several retries
            return admin.xlen(cfg.stream_for("cam1")) >= 4 and xadds_refused(admin) >= 30

        async with running(sink):
            await async_wait_until(retried, timeout_s=30)
            assert admin.xlen(cfg.stream_for("cam2")) == 0
            admin.execute_command("ACL", "SETUSER", "beltsight", f"~{cfg.stream_for('cam2')}")  # the fix
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected, timeout_s=30)

    asyncio.run(scenario())
    assert seqs_of(server, cfg, "cam1") == list(range(40))
    assert seqs_of(server, cfg, "cam2") == list(range(10))
    assert sample(metrics, "beltsight_entries_published_total", camera="cam1") == 40
    assert sample(metrics, "beltsight_entries_published_total", camera="cam2") == 10
    assert sample(metrics, "beltsight_frames_dropped_total", camera="cam2", reason="buffer_full") == 0
