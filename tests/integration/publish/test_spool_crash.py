"""The spool's durability promise under SIGKILL, measured: a daemon-like child publishes frames to a
real redis-server at 50 fps with the default buffer (50,000) and `spool_after_s` (1.0); Redis is
killed, eight seconds later the child is SIGKILLed. Everything it had spooled is replayed exactly
once, in order, by the next sink; what was lost is only the newest frames, captured within about
`spool_after_s` of the kill (the old spool, spilling only when memory filled, lost all of them).

Re-measure: `.venv/bin/python -m pytest tests/integration/publish/test_spool_crash.py -q -s` prints
the window."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from daemon.publish.spool import Spool
from tests.support.sink_helpers import config, make_sink, running
from tests.support.streams import assert_exactly_once_in_order, stream
from tests.support.waits import async_wait_until, wait_until
from tools.kit import leash

FPS = 50
OUTAGE_S = 8.0
ROOT = Path(__file__).resolve().parents[3]

CHILD = """
import asyncio, sys, time
from pathlib import Path
from daemon.config.redis import RedisConfig
from daemon.core.metrics import Metrics
from daemon.publish.sink import RedisSink
from tests.support.sink_helpers import result

cfg = RedisConfig(url=sys.argv[1], spool_dir=Path(sys.argv[2]), connect_timeout_s=0.5, socket_timeout_s=1.0)
sink = RedisSink(cfg, Metrics())

async def main() -> None:
    task = asyncio.create_task(sink.run())
    seq = 0
    while True:
        now_ms = time.time_ns() // 1_000_000
        sink.accept(result(seq, captured_ms=now_ms))
        print("accepted", seq, now_ms, flush=True)
        seq += 1
        await asyncio.sleep(1 / int(sys.argv[3]))

asyncio.run(main())
"""


class Child:
    """The child's stdout read on a thread: (seq, captured_ms) of every frame it accepted."""

    def __init__(self, url: str, spool_dir: Path) -> None:
        self.proc = leash.spawn(
            [sys.executable, "-c", CHILD, url, str(spool_dir), str(FPS)], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        self.accepted: list[tuple[int, int]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # the sink's log lines go there too
            if line.startswith("accepted "):
                _, seq, ms = line.split()
                self.accepted.append((int(seq), int(ms)))

    def kill(self) -> int:
        """SIGKILL; the wall-clock ms of the kill."""
        self.proc.send_signal(signal.SIGKILL)
        killed_ms = time.time_ns() // 1_000_000
        self.proc.wait()
        self._reader.join(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return killed_ms


@pytest.mark.slow
def test_sigkill_during_an_outage_loses_only_the_last_spool_after_s(redis_server: Any, tmp_path: Path) -> None:
    server = redis_server(appendonly=True)
    spool_dir = tmp_path / "spool"
    child = Child(server.url, spool_dir)
    try:
        wait_until(lambda: len(stream(server, "cam1")) >= FPS, 30, "the child publishing")
        server.kill()
        outage_from = len(child.accepted)
        wait_until(lambda: len(child.accepted) >= outage_from + OUTAGE_S * FPS, 60, "eight seconds of outage")
    finally:
        killed_ms = child.kill()
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
    assert_exactly_once_in_order(stream(server, "cam1"), kept)  # all fsynced, once, in order
    lost = [(seq, ms) for seq, ms in accepted if seq >= kept]
    window_ms = killed_ms - lost[0][1] if lost else 0
    print(
        f"\nSIGKILL {OUTAGE_S:.0f} s into an outage at {FPS} fps: {len(accepted)} accepted, {len(spooled)} in the"
        f" spool, {len(lost)} lost, the oldest lost captured {window_ms} ms before the kill"
    )
    assert all(killed_ms - ms < 2000 for _seq, ms in lost), "frames older than 2 s were lost"
    assert window_ms < (cfg.spool_after_s + 1.0) * 1000
