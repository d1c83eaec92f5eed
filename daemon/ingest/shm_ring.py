"""Shared-memory slots for one camera's frames between a decoder process and the daemon.

A `SlotRing` is one `multiprocessing.shared_memory` segment: a header of one state byte per slot,
then `slots` slots of `slot_bytes` each, one frame's planes back to back: its R, G and B planes,
`3 x h x w` uint8 at its letterbox content size (the CPU path: the decoder scales them), or with
`yuv` its decoded Y, U and V planes at the source size, `h x w` and twice `h/2 x w/2` (lanes on the
device, which letterbox YUV themselves: the decoder only copies what it decoded, half the bytes).
The daemon (main process) creates it and owns its name; a decoder process attaches to it by name.
Pixels never travel through a pipe: the pipe carries a small control message per frame (camera,
slot, seq, times), the pixels stay where the decoder wrote them.

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
from collections.abc import Sequence
from multiprocessing import shared_memory

import numpy as np
import numpy.typing as npt

FREE = 0
WRITING = 1
HELD = 2

SLOTS_PER_CAMERA = 8
"""Slots of one camera's ring: the hub's waiting frame, a batch per worker, the live view's latest
frame and the snapshot writer's queue each hold one while they keep a frame."""


def plane_shapes(shape: tuple[int, int], *, yuv: bool) -> tuple[tuple[int, int], ...]:
    """(h, w) of each plane of a slot: three of `shape`, or Y of `shape` and 4:2:0 U and V."""
    h, w = shape
    if not yuv:
        return (shape, shape, shape)
    chroma = ((h + 1) // 2, (w + 1) // 2)
    return (shape, chroma, chroma)


class SlotRing:
    """One camera's slots (see the module text). `create` on the daemon's side, `attach` in a decoder."""

    def __init__(
        self, shm: shared_memory.SharedMemory, slots: int, shape: tuple[int, int], *, owner: bool, yuv: bool = False
    ) -> None:
        self._shm = shm
        self.name = shm.name
        self.slots = slots
        self.shape = shape
        """(h, w): of each RGB plane, or of the Y plane (`yuv`)."""
        self.yuv = yuv
        self.plane_shapes = plane_shapes(shape, yuv=yuv)
        self.slot_bytes = sum(h * w for h, w in self.plane_shapes)
        self._owner = owner
        self._states: npt.NDArray[np.uint8] = np.ndarray((slots,), dtype=np.uint8, buffer=shm.buf)
        self._next = 0
        self._lock = threading.Lock()
        self._leases = 0
        self._retired = False

    @classmethod
    def create(cls, shape: tuple[int, int], slots: int = SLOTS_PER_CAMERA, *, yuv: bool = False) -> SlotRing:
        """A new ring of `slots` slots for planes of `shape` (h, w; see `plane_shapes`), every slot free."""
        size = slots + slots * sum(h * w for h, w in plane_shapes(shape, yuv=yuv))
        shm = shared_memory.SharedMemory(create=True, size=size)
        ring = cls(shm, slots, shape, owner=True, yuv=yuv)
        ring._states[:] = FREE
        return ring

    @classmethod
    def attach(cls, name: str, slots: int, shape: tuple[int, int], *, yuv: bool = False) -> SlotRing:
        """The decoder's side of a ring the daemon created."""
        return cls(shared_memory.SharedMemory(name=name), slots, shape, owner=False, yuv=yuv)

    def _offset(self, slot: int) -> int:
        return self.slots + slot * self.slot_bytes

    def _slot(self, slot: int) -> npt.NDArray[np.uint8]:
        """The slot's bytes as one flat array: every plane view derives from it."""
        return np.ndarray((self.slot_bytes,), dtype=np.uint8, buffer=self._shm.buf, offset=self._offset(slot))

    def _split(self, flat: npt.NDArray[np.uint8]) -> tuple[npt.NDArray[np.uint8], ...]:
        views, start = [], 0
        for h, w in self.plane_shapes:
            views.append(flat[start : start + h * w].reshape(h, w))
            start += h * w
        return tuple(views)

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

    def write(self, slot: int, planes: Sequence[npt.NDArray[np.uint8]]) -> None:
        """Copy the frame's planes (R, G, B, or Y, U, V with `yuv`; each at least its `plane_shapes`
        entry, may be strided or pitched: the excess is cut) into `slot` and mark it `HELD`."""
        flat = self._slot(slot)
        for dest, plane in zip(self._split(flat), planes, strict=True):
            np.copyto(dest, plane[: dest.shape[0], : dest.shape[1]])
        del flat, dest
        self._states[slot] = HELD

    def abandon(self, slot: int) -> None:
        """A slot acquired but not sent (the write failed): free again."""
        self._states[slot] = FREE

    # ------------------------------------------------------------------ the daemon's side
    def lease(self, slot: int) -> npt.NDArray[np.uint8]:
        """The planes of a `HELD` slot as a 3 x h x w view; the slot is freed when the view and every
        array derived from it are gone."""
        if self.yuv:
            raise ValueError("a YUV ring's planes differ in size: lease_planes")
        flat = self._slot(slot)
        self._leased(flat, slot)
        return flat.reshape(3, *self.shape)

    def lease_planes(self, slot: int) -> tuple[npt.NDArray[np.uint8], ...]:
        """The planes of a `HELD` slot (`plane_shapes`), freed as by `lease` once every view is gone."""
        flat = self._slot(slot)
        self._leased(flat, slot)
        return self._split(flat)

    def _leased(self, base: npt.NDArray[np.uint8], slot: int) -> None:
        with self._lock:
            self._leases += 1
        weakref.finalize(base, self._release, slot)

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
