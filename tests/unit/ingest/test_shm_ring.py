"""The shared-memory slot ring between a decoder process and the daemon, and `auto`'s process count."""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from daemon.config.engine import EngineConfig
from daemon.ingest.decoder_plan import plan_processes
from daemon.ingest.shm_ring import FREE, HELD, WRITING, SlotRing


def _planes(value: int, shape: tuple[int, int]) -> tuple[np.ndarray, ...]:
    return tuple(np.full(shape, value + i, dtype=np.uint8) for i in range(3))


@pytest.fixture
def ring() -> Iterator[SlotRing]:
    made = SlotRing.create((6, 8), slots=3)
    yield made
    made.retire()


def test_a_leased_slot_is_freed_when_the_last_view_of_it_goes(ring: SlotRing) -> None:
    writer = SlotRing.attach(ring.name, ring.slots, ring.shape)
    slot = writer.acquire()
    assert slot is not None and ring.state(slot) == WRITING
    writer.write(slot, _planes(10, ring.shape))
    assert ring.state(slot) == HELD
    view = ring.lease(slot)
    red = view[0][:, :4]  # a view of a view, as the batch fill and the live view take them
    del view
    gc.collect()
    assert ring.state(slot) == HELD, "a derived view still holds the slot"
    assert int(red[0, 0]) == 10
    del red
    gc.collect()
    assert ring.state(slot) == FREE
    writer.close()


def test_slots_are_reused_in_turn_and_hold_what_was_written_last(ring: SlotRing) -> None:
    writer = SlotRing.attach(ring.name, ring.slots, ring.shape)
    seen = []
    for n in range(7):
        slot = writer.acquire()
        assert slot is not None
        writer.write(slot, _planes(n * 3, ring.shape))
        view = ring.lease(slot)
        assert [int(view[c, 0, 0]) for c in range(3)] == [n * 3, n * 3 + 1, n * 3 + 2]
        seen.append(slot)
        del view
        gc.collect()
    assert seen == [0, 1, 2, 0, 1, 2, 0]
    writer.close()


def test_a_slow_consumer_leaves_no_free_slot_and_the_writer_is_told_so(ring: SlotRing) -> None:
    writer = SlotRing.attach(ring.name, ring.slots, ring.shape)
    held = []
    for n in range(ring.slots):
        slot = writer.acquire()
        assert slot is not None
        writer.write(slot, _planes(n, ring.shape))
        held.append(ring.lease(slot))
    assert writer.acquire() is None, "every slot is held by the consumer"
    assert [int(v[0, 0, 0]) for v in held] == list(range(ring.slots)), "held frames are never overwritten"
    del held[1]
    gc.collect()
    assert writer.acquire() == 1
    writer.close()


def _die_mid_write(name: str, slots: int, shape: tuple[int, int], ready: Path) -> None:
    writer = SlotRing.attach(name, slots, shape)
    slot = writer.acquire()
    assert slot is not None
    ready.write_text(str(slot))
    os.kill(os.getpid(), 9)  # dead while the slot is still WRITING


def test_a_writer_that_dies_mid_write_leaves_its_slot_unread_and_the_retired_ring_goes(tmp_path: Path) -> None:
    ring = SlotRing.create((6, 8), slots=2)
    ready = tmp_path / "slot"
    process = multiprocessing.get_context("spawn").Process(
        target=_die_mid_write, args=(ring.name, ring.slots, ring.shape, ready)
    )
    process.start()
    process.join(60)
    assert process.exitcode == -9
    slot = int(ready.read_text())
    assert ring.state(slot) == WRITING, "never offered to the consumer"
    other = 1 - slot
    writer = SlotRing.attach(ring.name, ring.slots, ring.shape)
    assert writer.acquire() == other
    writer.write(other, _planes(5, ring.shape))
    kept = ring.lease(other)
    writer.close()
    ring.retire()  # the daemon retires a dead process's ring: its name goes at once
    assert not Path("/dev/shm", ring.name.lstrip("/")).exists()
    assert int(kept[2, 5, 7]) == 7, "a frame leased before the retirement stays readable"
    del kept
    gc.collect()


@pytest.mark.parametrize(
    ("setting", "cameras", "cpus", "expected"),
    [
        ("auto", 8, 2, 1),
        ("auto", 14, 8, 1),
        ("auto", 16, 8, 3),
        ("auto", 24, 2, 2),
        ("auto", 32, 16, 4),
        (1, 32, 16, 1),
        (3, 2, 2, 3),
    ],
)
def test_auto_adds_a_process_per_share_of_a_core_that_the_readers_need(
    setting: int | str, cameras: int, cpus: int, expected: int
) -> None:
    count, reason = plan_processes(setting, cameras, cpus)
    assert count == expected
    assert reason


def test_engine_processes_takes_auto_or_a_count_from_toml_or_the_environment() -> None:
    assert EngineConfig().processes == "auto"
    assert EngineConfig.model_validate({"processes": "2"}).processes == 2  # BELTSIGHT_ENGINE__PROCESSES=2
    assert EngineConfig.model_validate({"processes": 3}).processes == 3
    for bad in (0, 65, "many"):
        with pytest.raises(ValidationError):
            EngineConfig.model_validate({"processes": bad})


def test_a_yuv_ring_holds_the_decoded_planes_cut_to_the_picture_and_frees_with_the_last_view() -> None:
    """Lanes on the device: a slot holds Y (h x w) and 4:2:0 U and V (ceil(h/2) x ceil(w/2)) back to
    back; pitched planes (FFmpeg's line padding) are cut to the picture; all three leased views
    derive from the slot, which is free again once the last of them goes."""
    ring = SlotRing.create((5, 6), slots=2, yuv=True)
    writer = SlotRing.attach(ring.name, ring.slots, ring.shape, yuv=True)
    assert ring.plane_shapes == ((5, 6), (3, 3), (3, 3)) and ring.slot_bytes == 30 + 9 + 9
    y = np.arange(5 * 8, dtype=np.uint8).reshape(5, 8)  # pitched: 8 bytes a row for 6 pixels
    u, v = np.full((3, 4), 7, np.uint8), np.full((3, 4), 9, np.uint8)
    slot = writer.acquire()
    assert slot is not None
    writer.write(slot, (y, u, v))
    assert ring.state(slot) == HELD
    with pytest.raises(ValueError, match="lease_planes"):
        ring.lease(slot)  # one 3 x h x w view would misread Y, U and V
    ly, lu, lv = ring.lease_planes(slot)
    np.testing.assert_array_equal(ly, y[:, :6])
    assert (lu == 7).all() and (lv == 9).all() and lu.shape == lv.shape == (3, 3)
    del ly, lu
    gc.collect()
    assert ring.state(slot) == HELD, "the V plane's view still holds the slot"
    del lv
    gc.collect()
    assert ring.state(slot) == FREE
    writer.close()
    ring.retire()
