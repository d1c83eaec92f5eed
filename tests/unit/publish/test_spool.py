"""The on-disk spool: order, persistence, torn tails, the size cap, segment cleanup."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest
import structlog

from daemon.core.frames import FrameResult
from daemon.publish.schema import EntryId
from daemon.publish.sink.backlog import Backlog, Slot
from daemon.publish.spool import Spool
from daemon.publish.spool import store as spool_module
from daemon.publish.spool.record import HEADER, SpoolRecord, encode_record
from tests.support.spool_records import BASE_MS, BOLT, record
from tests.support.waits import wait_until
from tools.kit import leash


def seqs(records: list[SpoolRecord]) -> list[tuple[str, int]]:
    return [(r.result.camera_id, r.result.seq) for r in records]


def segment_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("seg-*.log"))


def test_records_come_back_in_order_with_their_ids_and_fields(tmp_path: Path) -> None:
    spool = Spool.open(tmp_path, 1 << 20)
    try:
        spool.append([record(0), record(1, "cam2")])
        spool.append([record(2, n_dets=0)])
        assert len(spool) == 3
        out = spool.read(10)
        assert seqs(out) == [("cam1", 0), ("cam2", 1), ("cam1", 2)]
        assert out[0].entry_id == EntryId(BASE_MS, 0)
        assert out[0].result.detections == (BOLT,)
        assert out[2].result.detections == ()
        assert out[1].result.model_name == "conveyor-640@1.0.0" and out[1].result.width == 1280
        assert out[0].result.captured_mono <= time.monotonic()  # rebuilt from the age
    finally:
        spool.close()


def test_read_commit_and_rewind(tmp_path: Path) -> None:
    spool = Spool.open(tmp_path, 1 << 20)
    try:
        spool.append([record(i) for i in range(5)])
        assert seqs(spool.read(2)) == [("cam1", 0), ("cam1", 1)]
        assert spool.unread == 3
        spool.rewind()
        assert seqs(spool.read(3)) == [("cam1", 0), ("cam1", 1), ("cam1", 2)]
        spool.commit(2)
        assert len(spool) == 3
        spool.rewind()
        assert seqs(spool.read(10)) == [("cam1", 2), ("cam1", 3), ("cam1", 4)]
    finally:
        spool.close()


def test_unpublished_records_survive_a_restart_and_published_ones_do_not(tmp_path: Path) -> None:
    first = Spool.open(tmp_path, 1 << 20)
    first.append([record(i) for i in range(6)])
    first.read(2)
    first.commit(2)
    first.append([record(6)])
    first.close()
    second = Spool.open(tmp_path, 1 << 20)
    try:
        assert len(second) == 5
        assert seqs(second.read(10)) == [("cam1", i) for i in range(2, 7)]
        second.append([record(7)])  # a new process writes to a new segment, after the old ones
        assert seqs(second.read(10)) == [("cam1", 7)]
    finally:
        second.close()


def test_a_torn_tail_is_read_up_to_the_last_complete_record(tmp_path: Path) -> None:
    spool = Spool.open(tmp_path, 1 << 20)
    spool.append([record(i) for i in range(4)])
    spool.close()
    (segment,) = tmp_path.glob("seg-*.log")
    with segment.open("ab") as f:
        f.write(encode_record(record(4))[:-7])  # the crash came mid-write
    with structlog.testing.capture_logs() as logs:
        reopened = Spool.open(tmp_path, 1 << 20)
    try:
        assert [e["event"] for e in logs].count("spool_corrupt_tail") == 1
        assert len(reopened) == 4
        reopened.append([record(5)])
        assert seqs(reopened.read(10)) == [("cam1", i) for i in (0, 1, 2, 3, 5)]
    finally:
        reopened.close()


def test_a_record_with_a_bad_checksum_ends_the_segment(tmp_path: Path) -> None:
    spool = Spool.open(tmp_path, 1 << 20)
    spool.append([record(i) for i in range(3)])
    spool.close()
    (segment,) = tmp_path.glob("seg-*.log")
    data = bytearray(segment.read_bytes())
    data[-3] ^= 0xFF  # flip a byte in the last record's payload
    segment.write_bytes(bytes(data))
    reopened = Spool.open(tmp_path, 1 << 20)
    try:
        assert seqs(reopened.read(10)) == [("cam1", 0), ("cam1", 1)]
    finally:
        reopened.close()


def test_over_the_cap_the_oldest_are_dropped_and_counted_per_camera(tmp_path: Path) -> None:
    size = len(encode_record(record(10)))  # every record below has the same size
    spool = Spool.open(tmp_path, size * 10, segment_bytes=size * 4)
    try:
        spool.append([record(i, "cam1" if i % 2 else "cam2") for i in range(10, 26)])
        assert spool.trim() == {"cam2": 3, "cam1": 3}
        assert len(spool) == 10 and spool.size_bytes == size * 10
        assert [s for _, s in seqs(spool.read(100))] == list(range(16, 26))
        assert spool.trim() == {}
    finally:
        spool.close()


def test_segments_are_deleted_once_published(tmp_path: Path) -> None:
    size = len(encode_record(record(0)))
    spool = Spool.open(tmp_path, 1 << 20, segment_bytes=size * 3)
    try:
        for i in range(10):
            spool.append([record(i)])
        spool.flush()  # the files change on the writer thread
        assert len(segment_files(tmp_path)) == 4
        spool.read(7)
        spool.commit(7)  # segments 1 and 2 are fully published, 3 has one record left
        spool.flush()
        assert len(segment_files(tmp_path)) == 2
        spool.read(10)
        spool.commit(3)
        spool.flush()
        assert segment_files(tmp_path) == [] and not (tmp_path / "cursor").exists()
        spool.append([record(10)])
        assert seqs(spool.read(10)) == [("cam1", 10)]
    finally:
        spool.close()
    reopened = Spool.open(tmp_path, 1 << 20)
    try:
        assert seqs(reopened.read(10)) == [("cam1", 10)]
    finally:
        reopened.close()


def test_a_lost_cursor_replays_from_the_oldest_segment(tmp_path: Path) -> None:
    spool = Spool.open(tmp_path, 1 << 20)
    spool.append([record(i) for i in range(3)])
    spool.read(1)
    spool.commit(1)
    spool.close()
    (tmp_path / "cursor").write_text("garbage")
    reopened = Spool.open(tmp_path, 1 << 20)
    try:  # already published records come again; their IDs let the sink recognise them
        assert seqs(reopened.read(10)) == [("cam1", 0), ("cam1", 1), ("cam1", 2)]
    finally:
        reopened.close()


def test_backlog_never_spills_past_a_write_in_flight_and_keeps_order(tmp_path: Path) -> None:
    ids = iter(range(1_000_000))

    def assign_id(slot: Slot[FrameResult]) -> None:
        slot.entry_id = slot.entry_id or EntryId(BASE_MS, next(ids))

    spool = Spool.open(tmp_path, 1 << 20)
    backlog = Backlog(8, spool, assign_id)
    try:
        for i in range(8):
            assert backlog.push(record(i).result) == {}
        batch = backlog.peek(4)  # a write of 0..3 starts (memory, the spool being empty)
        for i in range(8, 14):
            backlog.push(record(i).result)
        assert backlog.spooled == 0 and len(backlog) == 14  # over capacity, nothing spilled
        assert backlog.settle({batch[0].ticket}) == {}  # 0 written, 1..3 failed: now spill
        assert backlog.spooled > 0 and len(backlog) == 13
        out: list[int] = []
        while len(backlog):
            batch = backlog.peek(3)
            out += [s.item.seq for s in batch]
            backlog.settle({s.ticket for s in batch})
        assert out == list(range(1, 14))
        spool.flush()
        assert segment_files(tmp_path) == []
    finally:
        backlog.shut()


def test_an_undecodable_record_is_skipped_not_retried_forever(tmp_path: Path) -> None:
    spool = Spool.open(tmp_path, 1 << 20)
    spool.append([record(0)])
    spool.close()
    (segment,) = tmp_path.glob("seg-*.log")
    payload = b'{"v":1,"not":"ours"}'
    with segment.open("ab") as f:  # a complete record with a good crc and foreign content
        f.write(HEADER.pack(len(payload), zlib.crc32(payload)) + payload)
    reopened = Spool.open(tmp_path, 1 << 20)
    try:
        assert len(reopened) == 2
        assert seqs(reopened.read(10)) == [("cam1", 0)]
        reopened.commit(1)
        reopened.flush()
        assert len(reopened) == 0 and segment_files(tmp_path) == []
    finally:
        reopened.close()


CRASH_CHILD = """
import sys, time
from pathlib import Path
from daemon.publish.spool import Spool
from tests.support.spool_records import record

spool = Spool.open(Path(sys.argv[1]), 1 << 30, segment_bytes=4096)
seq = 0
for batch in range(10_000):
    spool.append([record(seq + i) for i in range(10)])
    seq += 10
    if batch % 3 == 2:
        spool.read(5)
        spool.commit(5)
    if batch == 50:
        spool.flush()
        print(seq, flush=True)  # everything appended so far is on disk
    elif batch > 50:
        print(seq, flush=True)  # appended (handed to the writer thread), not necessarily on disk
    time.sleep(0.001)
"""


def test_a_process_killed_mid_write_leaves_an_ordered_gapless_spool(tmp_path: Path) -> None:
    """SIGKILL while the writer thread appends, seals, deletes and saves the cursor: what the next
    run finds is a contiguous run of records in order, and everything flushed before is there."""
    child = leash.spawn(
        [sys.executable, "-c", CRASH_CHILD, str(tmp_path)],
        cwd=Path(__file__).resolve().parents[3],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    appended: list[int] = []  # what the child reported, line by line
    reader = threading.Thread(target=lambda: appended.extend(int(line) for line in child.stdout or ()), daemon=True)
    reader.start()
    try:
        wait_until(lambda: bool(appended) or child.poll() is not None, 60, "the child's flush")
        assert appended, "the child ended before its flush"
        flushed = appended[0]
        # well into the next batches (segments sealed and deleted, cursors saved), jobs in the writer's queue
        wait_until(lambda: appended[-1] >= flushed + 1000 or child.poll() is not None, 60, "100 more batches")
        assert child.poll() is None, "the child ended before it was killed"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        reader.join(10)  # the pipe's end: the child is gone
        child.stdout.close()
    reopened = Spool.open(tmp_path, 1 << 30)
    try:
        found = [s for _, s in seqs(reopened.read(1_000_000))]
    finally:
        reopened.close()
    assert found, "the spool lost everything"
    assert found == list(range(found[0], found[0] + len(found)))  # in order, no gap, no duplicate
    assert found[-1] + 1 >= flushed  # nothing that had been flushed was lost
    assert found[0] <= flushed  # the cursor never got past what was appended


def test_a_failed_fsync_is_reported_by_the_next_append_and_loses_no_accepted_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fsync = os.fsync
    failures = [OSError(errno.EIO, "I/O error")]

    def flaky_fsync(fd: int) -> None:
        if failures:
            raise failures.pop()
        real_fsync(fd)

    spool = Spool.open(tmp_path, 1 << 20)
    try:
        spool.append([record(0)])
        spool.flush()
        monkeypatch.setattr(os, "fsync", flaky_fsync)
        spool.append([record(1), record(2)])
        with pytest.raises(OSError, match="fsync"):
            spool.flush()  # the writer's failure reaches the caller once
        monkeypatch.setattr(os, "fsync", real_fsync)
        spool.append([record(3)])  # a new segment: nothing after the hole
        spool.flush()
        assert len(segment_files(tmp_path)) == 2
        assert seqs(spool.read(10)) == [("cam1", i) for i in range(4)]  # 1 and 2 from memory
    finally:
        spool.close()
    reopened = Spool.open(tmp_path, 1 << 20)
    try:  # a restart finds what reached the disk; 1 and 2 were only in memory
        assert seqs(reopened.read(10)) == [("cam1", 0), ("cam1", 3)]
    finally:
        reopened.close()


def test_a_writer_too_far_behind_refuses_at_once_instead_of_blocking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fsync = os.fsync
    disk_stuck = threading.Event()
    fsync_entered, fsync_returned = threading.Event(), threading.Event()

    def stuck_fsync(fd: int) -> None:
        fsync_entered.set()
        disk_stuck.wait(60)  # stuck until the test releases it (or a minute: an append waiting on it fails)
        fsync_returned.set()
        real_fsync(fd)

    one = len(encode_record(record(0)))
    monkeypatch.setattr(spool_module, "HANDOFF_MAX_BYTES", 3 * one)
    monkeypatch.setattr(os, "fsync", stuck_fsync)
    spool = Spool.open(tmp_path, 1 << 20)
    try:
        for i in range(3):
            spool.append([record(i)])
        assert fsync_entered.wait(60), "the writer never reached the disk"
        with pytest.raises(OSError) as refused:
            spool.append([record(3)])
        assert refused.value.errno == errno.EAGAIN
        assert not fsync_returned.is_set()  # refused while the disk is still stuck: it did not wait for it
        assert seqs(spool.read(10)) == [("cam1", i) for i in range(3)]  # served from memory
        disk_stuck.set()
        spool.flush()
        spool.append([record(3)])  # the writer caught up: accepted again
    finally:
        disk_stuck.set()
        spool.close()
