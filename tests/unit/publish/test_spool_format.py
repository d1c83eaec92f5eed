"""The spool's segment format and recovery: version header, old headerless files, unknown versions
refused and kept, torn or garbage tails cut once; the backlog's time-based spill; the size caps."""

from __future__ import annotations

import asyncio
import os
import struct
from pathlib import Path

import pytest
import structlog

from daemon.config.redis import RedisConfig
from daemon.core.frames import FrameResult
from daemon.core.metrics import Metrics
from daemon.publish.schema import EntryId
from daemon.publish.sink import RedisSink
from daemon.publish.sink.backlog import SPOOL_FULL, Backlog, Slot
from daemon.publish.sink.stream_ids import StreamIds
from daemon.publish.spool import Spool
from daemon.publish.spool.record import SEGMENT_HEADER, SpoolFormatError, encode_record
from tests.support.spool_records import BASE_MS, record


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now


def seqs(spool: Spool) -> list[int]:
    return [r.result.seq for r in spool.read(1_000_000)]


def only_segment(directory: Path) -> Path:
    (segment,) = directory.glob("seg-*.log")
    return segment


def test_new_segments_start_with_the_version_header(tmp_path: Path) -> None:
    spool = Spool.open(tmp_path, 1 << 20)
    spool.append([record(0), record(1)])
    spool.close()
    data = only_segment(tmp_path).read_bytes()
    assert data.startswith(SEGMENT_HEADER) and data[:4] == b"BSPL"
    assert data[len(SEGMENT_HEADER) :] == encode_record(record(0)) + encode_record(record(1))
    reopened = Spool.open(tmp_path, 1 << 20)
    try:
        assert seqs(reopened) == [0, 1]
    finally:
        reopened.close()


def test_a_segment_without_a_header_from_an_older_daemon_is_still_read(tmp_path: Path) -> None:
    (tmp_path / "seg-00000000000000000007.log").write_bytes(b"".join(encode_record(record(i)) for i in range(3)))
    spool = Spool.open(tmp_path, 1 << 20)
    try:
        assert len(spool) == 3
        spool.append([record(3)])  # a new segment, with a header, after the old one
        assert seqs(spool) == [0, 1, 2, 3]
        spool.rewind()
        spool.read(4)
        spool.commit(4)
        spool.flush()
        assert not list(tmp_path.glob("seg-*.log"))
    finally:
        spool.close()


def test_an_unknown_format_version_is_refused_and_left_untouched(tmp_path: Path) -> None:
    spool = Spool.open(tmp_path, 1 << 20)
    spool.append([record(0)])
    spool.close()
    future = tmp_path / "seg-00000000000000000009.log"
    future.write_bytes(b"BSPL" + struct.pack("<I", 99) + b"whatever version 99 writes")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(SpoolFormatError, match="version 99"):
        Spool.open(tmp_path, 1 << 20)
    with structlog.testing.capture_logs() as logs:
        sink = RedisSink(RedisConfig(spool_dir=tmp_path), Metrics())
        asyncio.run(sink.open())  # the daemon runs on without a spool
    assert next(e for e in logs if e["event"] == "spool_disabled")["log_level"] == "error"
    sink.accept(record(0).result)
    assert sink.buffered == 1 and sink.spooled == 0
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # never overwritten


@pytest.mark.parametrize("tail", [b"torn", "record"])
def test_a_torn_or_garbage_tail_is_cut_logged_once_and_the_rest_replayed(tmp_path: Path, tail: bytes | str) -> None:
    spool = Spool.open(tmp_path, 1 << 20)
    spool.append([record(i) for i in range(4)])
    spool.close()
    segment = only_segment(tmp_path)
    good = segment.stat().st_size
    cut = encode_record(record(4))[:-5] if tail == "record" else os.urandom(300)
    with segment.open("ab") as f:
        f.write(cut)  # the power went mid-write
    with structlog.testing.capture_logs() as logs:
        reopened = Spool.open(tmp_path, 1 << 20)
        reopened.close()
        again = Spool.open(tmp_path, 1 << 20)
    try:
        torn = [e for e in logs if e["event"] == "spool_corrupt_tail"]
        assert len(torn) == 1  # once: the file was truncated, the next open finds it clean
        assert torn[0]["segment"] == segment.name and torn[0]["offset"] == good
        assert torn[0]["ignored_bytes"] == len(cut) and torn[0]["kept_records"] == 4 and torn[0]["truncated"]
        assert segment.stat().st_size == good
        assert seqs(again) == [0, 1, 2, 3]
    finally:
        again.close()


def test_entries_waiting_past_spool_after_s_go_to_disk_whatever_the_buffer_size(tmp_path: Path) -> None:
    clock = FakeClock(100.0)
    ids = iter(range(1_000_000))

    def assign_id(slot: Slot[FrameResult]) -> None:
        slot.entry_id = slot.entry_id or EntryId(BASE_MS, next(ids))

    spool = Spool.open(tmp_path, 1 << 20)
    backlog = Backlog(50_000, spool, assign_id, spool_after_s=1.0, clock=clock)
    try:
        for i in range(10):
            backlog.push(record(i).result)
            clock.now += 0.1
        assert backlog.spooled == 0  # the oldest waited 0.9 s: memory only
        clock.now += 0.15
        assert backlog.tick() == {}  # the oldest waited 1.15 s: those older than 0.5 s go with it
        assert backlog.spooled == 7 and len(backlog.memory) == 3
        spool.flush()
        assert only_segment(tmp_path).stat().st_size > len(SEGMENT_HEADER)  # on disk, not only in memory
        batch = backlog.peek(100)  # the spool first, then memory: order kept
        assert [s.item.seq for s in batch] == list(range(7))
    finally:
        backlog.shut()


def test_the_smaller_of_spool_max_mb_and_spool_max_bytes_is_the_cap(tmp_path: Path) -> None:
    assert RedisConfig(spool_max_mb=2).spool_cap_bytes == 2 * 1024 * 1024
    assert RedisConfig(spool_max_mb=2, spool_max_bytes=5000).spool_cap_bytes == 5000
    assert RedisConfig(spool_max_mb=1, spool_max_bytes=10**9).spool_cap_bytes == 1024 * 1024
    size = len(encode_record(record(0)))
    spool = Spool.open(tmp_path, RedisConfig(spool_max_bytes=size * 5).spool_cap_bytes)
    backlog = Backlog(2, spool, StreamIds(lambda camera: camera).assign_spill_id)
    try:
        drops: dict[tuple[str, str], int] = {}
        for i in range(20):
            for key, n in backlog.push(record(i).result).items():
                drops[key] = drops.get(key, 0) + n
        assert drops and set(drops) == {("cam1", SPOOL_FULL)}
        assert spool.size_bytes <= size * 5 + len(SEGMENT_HEADER)
    finally:
        backlog.shut()
