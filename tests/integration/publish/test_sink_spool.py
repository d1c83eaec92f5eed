"""RedisSink with a disk spool (`redis.spool_dir`) against real redis-server processes."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from daemon.config.redis import RedisConfig
from daemon.core.metrics import Metrics
from daemon.publish.redis_conn import make_client
from tests.support.metrics import sample
from tests.support.sink_helpers import BASE_MS, config, make_sink, result, running, stored
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
            assert not sink.connected
            await asyncio.gather(produce(1.0), asyncio.to_thread(server.restart))
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected, timeout_s=30)

    asyncio.run(scenario())
    assert most_spooled > 100  # the memory buffer (100) overflowed into the spool
    for camera in CAMERAS:
        assert seqs_of(server, cfg, camera) == list(range(sent[camera]))
        assert sample(metrics, "beltsight_entries_published_total", camera=camera) == sent[camera]
        assert sample(metrics, "beltsight_frames_dropped_total", camera=camera, reason="buffer_full") == 0
    assert not list((tmp_path / "spool").glob("seg-*.log"))  # published segments are deleted


class Network:
    """The first XADD pipeline goes through; the second reaches Redis but its reply is lost;
    after that nothing gets through."""

    def __init__(self) -> None:
        self.xadd_pipelines = 0

    @property
    def landed(self) -> bool:
        return self.xadd_pipelines >= 2


class LostReplyThenDown:
    def __init__(self, real: aioredis.Redis, network: Network) -> None:
        self.real = real
        self.network = network

    def pipeline(self, transaction: bool = True) -> Any:
        pipe = self.real.pipeline(transaction=transaction)
        execute = pipe.execute
        network = self.network

        async def lossy_execute(raise_on_error: bool = True) -> list[Any]:
            if network.landed:
                raise RedisConnectionError("network down")
            has_xadd = any(args[0] == "XADD" for args, _ in pipe.command_stack)
            replies = await execute(raise_on_error=raise_on_error)
            if has_xadd:
                network.xadd_pipelines += 1
                if network.landed:
                    raise RedisConnectionError("connection reset (reply lost)")
            return replies

        pipe.execute = lossy_execute  # type: ignore[method-assign]
        return pipe

    async def aclose(self) -> None:
        await self.real.aclose()


def test_a_new_sink_publishes_the_previous_runs_spool_exactly_once(redis_server: Any, tmp_path: Path) -> None:
    server = redis_server(appendonly=True)
    cfg = config(server.url, buffer_max=40, publish_batch=64, spool_dir=tmp_path / "spool")
    network = Network()
    metrics_a, metrics_b = Metrics(), Metrics()

    def cam1(seq: int) -> Any:
        # the wall clock went back after seq 0: IDs continue at BASE+1000-1, -2, ... which a
        # replay could not recompute; only the IDs stored in the spool let B recognise them
        return result(seq, "cam1", captured_ms=BASE_MS + (1000 if seq == 0 else seq // 4))

    async def run_a() -> None:
        sink = make_sink(cfg, metrics_a, client_factory=lambda: LostReplyThenDown(make_client(cfg), network))
        sink.accept(cam1(0))
        async with running(sink):
            await async_wait_until(lambda: network.xadd_pipelines == 1 and sink.buffered == 0)
            for seq in range(1, 20):
                sink.accept(cam1(seq))
                sink.accept(result(seq, "cam2"))
            await async_wait_until(lambda: network.landed)
            await asyncio.to_thread(server.kill)
            for seq in range(20, 60):  # memory overflows: the landed entries go to the spool
                sink.accept(cam1(seq))
                sink.accept(result(seq, "cam2"))
            assert sink.spooled > 40
            assert await sink.drain(0.3) == 118
        # `running` closed the sink: what was left in memory went to the spool

    async def run_b() -> None:
        sink = make_sink(cfg, metrics_b)
        assert sink.buffered == 118
        for seq in range(60, 65):  # new entries of this run come after the old run's
            sink.accept(cam1(seq))
        async with running(sink):
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected)

    asyncio.run(run_a())
    assert sample(metrics_a, "beltsight_frames_dropped_total", camera="cam1", reason="shutdown") == 0
    assert sample(metrics_a, "beltsight_frames_dropped_total", camera="cam1", reason="buffer_full") == 0
    server.restart()
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


class RefuseStream:
    """Redis refuses XADDs to one stream (e.g. a misconfigured ACL) while `refusing` is set."""

    def __init__(self, real: aioredis.Redis, stream: str, state: dict[str, bool]) -> None:
        self.real = real
        self.stream = stream
        self.state = state

    def pipeline(self, transaction: bool = True) -> Any:
        pipe = self.real.pipeline(transaction=transaction)
        execute = pipe.execute
        stream, state = self.stream, self.state

        async def refusing_execute(raise_on_error: bool = True) -> list[Any]:
            stack = list(pipe.command_stack)
            refused = [i for i, (args, _) in enumerate(stack) if args[:2] == ("XADD", stream) and state["refusing"]]
            pipe.command_stack = [c for i, c in enumerate(stack) if i not in refused]
            replies = list(await execute(raise_on_error=raise_on_error)) if pipe.command_stack else []
            for i in refused:
                replies.insert(i, ResponseError("NOPERM injected"))
            return replies

        pipe.execute = refusing_execute  # type: ignore[method-assign]
        return pipe

    async def aclose(self) -> None:
        await self.real.aclose()


def test_a_stream_refusing_writes_holds_its_entries_without_duplicating_the_others(
    redis_server: Any, tmp_path: Path
) -> None:
    server = redis_server()
    cfg = config(server.url, buffer_max=8, publish_batch=16, spool_dir=tmp_path / "spool")
    state = {"refusing": True}
    metrics = Metrics()

    async def scenario() -> None:
        sink = make_sink(
            cfg, metrics, client_factory=lambda: RefuseStream(make_client(cfg), cfg.stream_for("cam2"), state)
        )
        for seq in range(40):
            sink.accept(result(seq, "cam1"))
            if seq % 4 == 0:
                sink.accept(result(seq // 4, "cam2"))
        assert sink.spooled > 0
        async with running(sink):
            await async_wait_until(lambda: server.client().xlen(cfg.stream_for("cam1")) >= 4)
            await asyncio.sleep(0.3)  # several retries of the refused entry
            state["refusing"] = False
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected)

    asyncio.run(scenario())
    assert seqs_of(server, cfg, "cam1") == list(range(40))
    assert seqs_of(server, cfg, "cam2") == list(range(10))
    assert sample(metrics, "beltsight_entries_published_total", camera="cam1") == 40
    assert sample(metrics, "beltsight_entries_published_total", camera="cam2") == 10
    assert sample(metrics, "beltsight_frames_dropped_total", camera="cam2", reason="buffer_full") == 0
