"""The spool's durability promise under SIGKILL: a daemon-like child publishes frames to a real
redis-server at 50 fps with the default buffer (50,000) and `spool_after_s` (1.0); Redis is killed,
and after 400 frames of outage the child stops taking frames. With memory nowhere near full,
only the age rule (`spool_after_s`) moves what it holds to the disk spool: once the child reports
every frame it holds in the spool and on disk (the old spool, spilling only when memory filled,
never got there), it is SIGKILLed, and every frame it accepted is in Redis or replayed from the
spool by the next sink, exactly once, in order. How long a frame waits in memory before the spill is a
performance figure (printed here, not asserted: a loaded machine stretches it).

Re-measure: `.venv/bin/python -m pytest tests/integration/publish/test_spool_crash.py -q -s` prints
it."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from daemon.publish.spool import Spool
from tests.support.sink_helpers import config, make_sink, running
from tests.support.streams import assert_exactly_once_in_order, stream
from tests.support.waits import async_wait_until, wait_until
from tools.kit import leash

FPS = 50
OUTAGE_FRAMES = 400
ROOT = Path(__file__).resolve().parents[3]

CHILD = """
import asyncio, sys, threading, time
from pathlib import Path
from daemon.config.redis import RedisConfig
from daemon.core.metrics import Metrics
from daemon.publish.sink import RedisSink
from tests.support.sink_helpers import result

cfg = RedisConfig(url=sys.argv[1], spool_dir=Path(sys.argv[2]), connect_timeout_s=0.5, socket_timeout_s=1.0)
sink = RedisSink(cfg, Metrics())
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()

async def main() -> None:
    await sink.open()
    task = asyncio.create_task(sink.run())
    seq = 0
    while not stop.is_set():
        now_ms = time.time_ns() // 1_000_000
        sink.accept(result(seq, captured_ms=now_ms))
        print("accepted", seq, now_ms, flush=True)
        seq += 1
        await asyncio.sleep(1 / int(sys.argv[3]))
    while sink.buffered != sink.spooled:  # until the age rule moved everything to the spool
        await asyncio.sleep(0.01)
    await asyncio.to_thread(sink._frames.spool.flush)  # and the spool's writer has written it
    print("all_spooled", sink.spooled, time.time_ns() // 1_000_000, flush=True)
    await task

asyncio.run(main())
"""


class Child:
    """The child's stdout read on a thread: (seq, captured_ms) of every frame it accepted."""

    def __init__(self, url: str, spool_dir: Path) -> None:
        self.proc = leash.spawn(
            [sys.executable, "-c", CHILD, url, str(spool_dir), str(FPS)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.accepted: list[tuple[int, int]] = []
        self.all_spooled: tuple[int, int] | None = None  # (frames in the spool, wall-clock ms)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # the sink's log lines go there too
            if line.startswith("accepted "):
                _, seq, ms = line.split()
                self.accepted.append((int(seq), int(ms)))
            elif line.startswith("all_spooled "):
                _, n, ms = line.split()
                self.all_spooled = (int(n), int(ms))

    def stop(self) -> None:
        """No more frames from now on."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("stop\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self._reader.join(10)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


@pytest.mark.slow
def test_sigkill_during_an_outage_loses_nothing_the_age_rule_spooled(redis_server: Any, tmp_path: Path) -> None:
    server = redis_server(appendonly=True)
    spool_dir = tmp_path / "spool"
    child = Child(server.url, spool_dir)
    try:
        wait_until(lambda: len(stream(server, "cam1")) >= FPS, 30, "the child publishing")
        server.kill()
        outage_from = len(child.accepted)
        wait_until(lambda: len(child.accepted) >= outage_from + OUTAGE_FRAMES, 120, f"{OUTAGE_FRAMES} frames of outage")
        child.stop()
        wait_until(lambda: child.all_spooled is not None, 120, "every frame the child holds in the spool, on disk")
    finally:
        child.kill()
    accepted = list(child.accepted)
    spool = Spool.open(spool_dir, 1 << 30)
    try:
        spooled = [r.result.seq for r in spool.read(1_000_000)]
    finally:
        spool.close()
    server.restart()
    in_redis = [int(f["seq"]) for _, f in stream(server, "cam1")]
    assert spooled == list(range(spooled[0], spooled[0] + len(spooled)))  # in order, no gap
    assert spooled[0] <= in_redis[-1] + 1  # nothing between Redis and the spool went missing

    cfg = config(server.url, spool_dir=spool_dir)

    async def replay() -> None:
        async with running(make_sink(cfg)) as sink:
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected, timeout_s=60)

    asyncio.run(replay())
    kept = spooled[-1] + 1
    assert kept == len(accepted), f"{len(accepted) - kept} frames lost"  # every frame accepted is somewhere
    assert_exactly_once_in_order(stream(server, "cam1"), kept)  # all fsynced, once, in order
    assert child.all_spooled is not None
    stopped_ms = accepted[-1][1]
    print(
        f"\n{len(accepted)} accepted at {FPS} fps, {len(spooled)} spooled in a Redis outage; the newest"
        f" reached the disk {child.all_spooled[1] - stopped_ms} ms after it was accepted (spool_after_s"
        f" {cfg.spool_after_s} s)"
    )
