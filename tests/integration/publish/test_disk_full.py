"""A full disk under the spool, for real (a 2 MiB tmpfs), and the `spool_max_bytes` cap: the sink keeps
running, counts what it could not keep as `spool_full`, logs the full disk once per state change,
spools again once space returns, and publishes everything it kept exactly once, in order."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from daemon.core.metrics import Metrics
from tests.support.metrics import sample
from tests.support.sink_helpers import config, make_sink, result, running, stored
from tests.support.waits import async_wait_until


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=False, capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(disk: Path, leave_bytes: int) -> Path:
    """A file taking all but about `leave_bytes` of the disk."""
    filler = disk / "filler"
    filler.write_bytes(b"\0" * max(0, shutil.disk_usage(disk).free - leave_bytes))
    return filler


def seqs(server: Any, stream: str) -> list[int]:
    return [e["seq"] for e in stored(server.client(), stream)]


@pytest.mark.slow
def test_a_full_disk_drops_what_it_cannot_keep_and_spools_again_when_space_returns(
    redis_server: Any, tmp_path: Path
) -> None:
    server = redis_server()
    with tmpfs(tmp_path / "disk", "2m") as disk:
        filler = fill(disk, 300_000)
        cfg = config(server.url, buffer_max=100, spool_after_s=0.2, spool_dir=disk / "spool")
        metrics = Metrics()
        server.kill()
        accepted = itertools.count()
        ok_at: list[int] = []
        sent: list[int] = []

        async def produce(sink: Any, n: int) -> None:
            for _ in range(n):
                sent.append(next(accepted))
                sink.accept(result(sent[-1], n_dets=40))  # about 1.3 kB spooled
                await asyncio.sleep(0.002)

        def dropped() -> float:
            return sample(metrics, "beltsight_frames_dropped_total", camera="cam1", reason="spool_full")

        async def scenario() -> None:
            async with running(make_sink(cfg, metrics)) as sink:
                await produce(sink, 600)  # ~800 kB into 300 kB of free space
                # a spool writer that fell behind (a starved machine) still holds its unwritten batches
                # in memory, up to its hand-off bound, so the first drop can need more: add until then
                deadline = time.monotonic() + 180
                while dropped() == 0 and time.monotonic() < deadline:
                    await produce(sink, 50)
                    await asyncio.sleep(0.5)
                assert dropped() > 0, "nothing counted as spool_full"
                filler.unlink()  # space returns
                await produce(sink, 300)
                await async_wait_until(lambda: "spool_disk_ok" in [e["event"] for e in logs], timeout_s=30)
                ok_at.append(len(sent))  # the seq of the first entry accepted after the spool said space is back
                await produce(sink, 100)
                await asyncio.to_thread(server.restart)
                await async_wait_until(lambda: sink.buffered == 0 and sink.connected, timeout_s=60)

        with structlog.testing.capture_logs() as logs:
            asyncio.run(scenario())
    total = next(accepted)
    published = seqs(server, cfg.stream_for("cam1"))
    states = [e["event"] for e in logs if e["event"] in ("spool_disk_full", "spool_disk_ok")]
    assert states[0] == "spool_disk_full" and states[-1] == "spool_disk_ok"
    assert all(a != b for a, b in itertools.pairwise(states))  # once per state change
    assert not [e for e in logs if e["event"] == "spool_write_failed"]  # the full disk is said once, not per batch
    assert published == sorted(set(published))  # in order, none twice
    assert len(published) + dropped() == total  # nothing kept was lost
    # spooled again once space returned: the spool finds out at its next probe (one entry per
    # spool_after_s), not at the unlink, so what counts is everything after it said `spool_disk_ok`
    first_ok = ok_at[0]
    assert [s for s in published if s >= first_ok] == list(range(first_ok, total))
    assert total - first_ok == 100
    assert sample(metrics, "beltsight_frames_dropped_total", camera="cam1", reason="buffer_full") == 0


def test_spool_max_bytes_caps_the_spool_and_counts_spool_full(redis_server: Any, tmp_path: Path) -> None:
    server = redis_server()
    cfg = config(server.url, buffer_max=50, spool_max_mb=512, spool_max_bytes=200_000, spool_dir=tmp_path / "spool")
    metrics = Metrics()
    server.kill()
    total = 1000

    async def scenario() -> None:
        sink = make_sink(cfg, metrics)
        await sink.open()
        for seq in range(total):
            sink.accept(result(seq, n_dets=40))
        await asyncio.to_thread(server.restart)
        async with running(sink):
            await async_wait_until(lambda: sink.buffered == 0 and sink.connected, timeout_s=60)

    asyncio.run(scenario())
    published = seqs(server, cfg.stream_for("cam1"))
    dropped = sample(metrics, "beltsight_frames_dropped_total", camera="cam1", reason="spool_full")
    assert 0 < dropped < total
    assert published == list(range(int(dropped), total))  # the oldest went, the rest in order
    assert len(published) * 1300 < 200_000 + 50 * 1400 * 3  # the spool held about 200 kB, memory the rest
