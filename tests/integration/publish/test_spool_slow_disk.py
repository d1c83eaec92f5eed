"""A slow disk during a Redis outage must not stall the event loop (a real redis-server, killed).

The disk is made slow where it hurts: every `os.fsync` in this process sleeps FSYNC_DELAY_S (the
order of one fsync on a Jetson's eMMC or an SD card). A ticker task on the loop measures the
loop's progress while the sink spills hundreds of entries to the spool. The assertions are
structural, not speed claims: no fsync ran on the loop's thread, and the loop went on ticking
during every injected fsync (one on the loop would hold every tick until it returned)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from daemon.core.metrics import Metrics
from tests.support.metrics import sample
from tests.support.sink_helpers import BASE_MS, config, make_sink, result, running, stored
from tests.support.waits import async_wait_until

FSYNC_DELAY_S = 1.0
TICK_S = 0.005
CAMERAS = ("cam1", "cam2")


class SlowFsync:
    """`os.fsync` that takes FSYNC_DELAY_S and remembers which threads called it, and for each call
    made while `ticker` ran throughout, how many times the loop ticked meanwhile."""

    def __init__(self, ticker: Ticker) -> None:
        self.real = os.fsync
        self.calls = 0
        self.threads: set[int] = set()
        self.ticks_during: list[int] = []
        self._ticker = ticker
        self._lock = threading.Lock()

    def __call__(self, fd: Any) -> None:
        with self._lock:
            self.calls += 1
            self.threads.add(threading.get_ident())
        live, before = self._ticker.live, self._ticker.ticks
        time.sleep(FSYNC_DELAY_S)
        if live and self._ticker.live:
            with self._lock:
                self.ticks_during.append(self._ticker.ticks - before)
        self.real(fd)


class Ticker:
    """The loop's lag: the largest gap between wake-ups of a task that sleeps TICK_S."""

    def __init__(self) -> None:
        self.max_gap_s = 0.0
        self.ticks = 0
        self.live = False  # from the task's start until the test stops it

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        self.live = True
        while True:
            await asyncio.sleep(TICK_S)
            now = loop.time()
            self.max_gap_s = max(self.max_gap_s, now - last - TICK_S)
            self.ticks += 1
            last = now


@pytest.mark.slow
def test_a_slow_fsync_during_an_outage_never_stalls_the_loop(
    redis_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = redis_server(appendonly=True)
    cfg = config(server.url, buffer_max=40, publish_batch=32, spool_dir=tmp_path / "spool")
    metrics = Metrics()
    sent = dict.fromkeys(CAMERAS, 0)
    ticker = Ticker()
    slow = SlowFsync(ticker)
    most_spooled = 0
    loop_thread = 0

    async def produce(seconds: float) -> None:
        nonlocal most_spooled
        for _ in range(int(seconds * 100)):  # ~100 entries/s, the cameras taking turns
            camera = CAMERAS[sum(sent.values()) % 2]
            sink.accept(result(sent[camera], camera, captured_ms=BASE_MS + sent[camera] * 20))
            sent[camera] += 1
            most_spooled = max(most_spooled, sink.spooled)
            gauge = metrics.registry.get_sample_value("beltsight_sink_spooled_entries") or 0.0
            assert gauge == sink.spooled  # the spool's depth, as exported
            await asyncio.sleep(0.01)

    sink = make_sink(cfg, metrics)

    async def scenario() -> None:
        nonlocal loop_thread
        loop_thread = threading.get_ident()
        async with running(sink):
            await produce(0.5)
            server.kill()
            monkeypatch.setattr(os, "fsync", slow)  # the disk turns slow for the outage
            tick = asyncio.create_task(ticker.run())
            await produce(4.0)
            ticker.live = False
            tick.cancel()
            assert not sink.connected
            monkeypatch.setattr(os, "fsync", slow.real)
            await asyncio.gather(produce(0.5), asyncio.to_thread(server.restart))
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected, timeout_s=60)

    asyncio.run(scenario())
    assert most_spooled > 200  # the spool really took the outage
    assert slow.calls >= 3  # and the slow disk really was hit, several times
    assert loop_thread not in slow.threads, "an fsync ran on the event loop's thread"
    # the loop went on during each slow fsync: on the loop's thread one would hold every tick until
    # it returned (the old spool did); how long a tick waits on a loaded machine is not the point
    assert slow.ticks_during, "no slow fsync while the ticker ran"
    assert all(n > 0 for n in slow.ticks_during), (slow.ticks_during, f"worst gap {ticker.max_gap_s:.3f}s")
    for camera in CAMERAS:  # and nothing was lost or duplicated on the way
        assert [e["seq"] for e in stored(server.client(), cfg.stream_for(camera))] == list(range(sent[camera]))
        assert sample(metrics, "beltsight_entries_published_total", camera=camera) == sent[camera]
        assert sample(metrics, "beltsight_frames_dropped_total", camera=camera, reason="buffer_full") == 0
    assert not list((tmp_path / "spool").glob("seg-*.log"))
