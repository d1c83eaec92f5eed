"""Shared-memory slots for one camera's frames between a decoder process and the daemon.

A `SlotRing` is one `multiprocessing.shared_memory` segment: a header of one state byte per slot,
then `slots` slots of `slot_bytes` each (a frame's R, G and B planes, `3 x h x w` uint8, at its
letterbox content size). The daemon (main process) creates it and owns its name; a decoder
process attaches to it by name. Pixels never travel through a pipe: the pipe carries a small
control message per frame (camera, slot, seq, times), the pixels stay where the decoder wrote them.

Slot states, one byte each (single-byte stores, ordered by the pipe's system call between them):
- `FREE`: the decoder may take it (`acquire`).
- `WRITING`: the decoder is writing its pixels. A decoder that dies mid-write leaves the slot in
  this state; the daemon retires the whole ring with the process (`retire`), never reads it.
- `HELD`: the pixels are complete and a control message names the slot; the daemon's `lease`
  hands out views of it and sets the slot `FREE` again when the last view is gone (a
  `weakref.finalize` on the array every view derives from), however long the batch, the live
  view or the snapshot writer kept the frame.

A slow consumer never blocks a live camera: with no free slot the decoder drops the frame
(the daemon counts it `superseded`, as the hub counts a frame replaced before a batch took it);
a `realtime = false` replay waits for a slot instead, so every frame is processed.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from multiprocessing import shared_memory

import numpy as np
import numpy.typing as npt

FREE = 0
WRITING = 1
HELD = 2

SLOTS_PER_CAMERA = 8
"""Slots of one camera's ring: the hub's waiting frame, a batch per worker, the live view's latest
frame and the snapshot writer's queue each hold one while they keep a frame."""


class SlotRing:
    """One camera's slots (see the module text). `create` on the daemon's side, `attach` in a decoder."""

    def __init__(self, shm: shared_memory.SharedMemory, slots: int, shape: tuple[int, int], *, owner: bool) -> None:
        self._shm = shm
        self.name = shm.name
        self.slots = slots
        self.shape = shape
        """(h, w) of each plane."""
        self.slot_bytes = 3 * shape[0] * shape[1]
        self._owner = owner
        self._states: npt.NDArray[np.uint8] = np.ndarray((slots,), dtype=np.uint8, buffer=shm.buf)
        self._next = 0
        self._lock = threading.Lock()
        self._leases = 0
        self._retired = False

    @classmethod
    def create(cls, shape: tuple[int, int], slots: int = SLOTS_PER_CAMERA) -> SlotRing:
        """A new ring of `slots` slots for planes of `shape` (h, w), every slot free."""
        size = slots + slots * 3 * shape[0] * shape[1]
        shm = shared_memory.SharedMemory(create=True, size=size)
        ring = cls(shm, slots, shape, owner=True)
        ring._states[:] = FREE
        return ring

    @classmethod
    def attach(cls, name: str, slots: int, shape: tuple[int, int]) -> SlotRing:
        """The decoder's side of a ring the daemon created."""
        return cls(shared_memory.SharedMemory(name=name), slots, shape, owner=False)

    def _offset(self, slot: int) -> int:
        return self.slots + slot * self.slot_bytes

    def _planes(self, slot: int) -> npt.NDArray[np.uint8]:
        h, w = self.shape
        return np.ndarray((3, h, w), dtype=np.uint8, buffer=self._shm.buf, offset=self._offset(slot))

    def state(self, slot: int) -> int:
        return int(self._states[slot])

    # ------------------------------------------------------------------ the decoder's side
    def acquire(self) -> int | None:
        """A free slot, now `WRITING` (None when every slot is taken); oldest-freed first."""
        for i in range(self.slots):
            slot = (self._next + i) % self.slots
            if self._states[slot] == FREE:
                self._states[slot] = WRITING
                self._next = (slot + 1) % self.slots
                return slot
        return None

    def write(self, slot: int, planes: tuple[npt.NDArray[np.uint8], ...]) -> None:
        """Copy R, G, B planes (each h x w, may be strided) into `slot` and mark it `HELD`."""
        dest = self._planes(slot)
        for channel, plane in zip(dest, planes, strict=True):
            np.copyto(channel, plane)
        del dest, channel
        self._states[slot] = HELD

    def abandon(self, slot: int) -> None:
        """A slot acquired but not sent (the write failed): free again."""
        self._states[slot] = FREE

    # ------------------------------------------------------------------ the daemon's side
    def lease(self, slot: int) -> npt.NDArray[np.uint8]:
        """The planes of a `HELD` slot as a 3 x h x w view; the slot is freed when the view and every
        array derived from it are gone."""
        view = self._planes(slot)
        with self._lock:
            self._leases += 1
        weakref.finalize(view, self._release, slot)
        return view

    def _release(self, slot: int) -> None:
        with self._lock:
            self._leases -= 1
            retired = self._retired and self._leases == 0
        if not retired:
            self._states[slot] = FREE
            return
        self._close()

    def retire(self) -> None:
        """No more frames from this ring (the camera's size changed, its decoder died, or the daemon
        stops): the name goes at once, the memory when the last leased frame does."""
        with self._lock:
            if self._retired:
                return
            self._retired = True
            idle = self._leases == 0
        if self._owner:
            with contextlib.suppress(FileNotFoundError):
                self._shm.unlink()
        if idle:
            self._close()

    def _close(self) -> None:
        del self._states
        self._shm.close()

    def close(self) -> None:
        """The decoder's side: detach (the daemon owns and unlinks the segment)."""
        del self._states
        self._shm.close()
