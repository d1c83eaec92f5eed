"""A GigE Vision fake camera on loopback that streams given frames (the renderer's belt), not a test pattern.

    python -m tools.kit.gige_scene_camera FRAMES.raw --width 640 --height 480 --fps 10 [--serial GV01]

FRAMES.raw holds RGB8 frames back to back (width * height * 3 bytes each); the camera sends them in
order, the first to the first frame its client acquires, and starts over after the last. It is
Aravis' own `ArvGvFakeCamera` (the one `arv-fake-gv-camera-0.8` runs: GVCP on 127.0.0.1:3956, GVSP,
GenICam XML), driven through `ctypes` with its fill-pattern callback set to copy the next frame
into the buffer. Not through PyGObject: the binding declares that callback `(scope call)`, so
PyGObject frees it when `arv_fake_camera_set_fill_pattern` returns and the streaming thread then
calls freed memory (the segfault of an earlier attempt). A `ctypes` callback lives as long as the
Python object does, and takes the GIL itself on Aravis' streaming thread.

The callback must also set the buffer's received size, which Aravis 0.8 has no public setter for:
it is written at its offset in the private struct, and that offset is checked at start against
`arv_buffer_get_data` (which reports it) on a scratch buffer, so another layout refuses to start
instead of sending garbage. Prints READY once the camera runs; stops on SIGTERM / SIGINT.
"""

from __future__ import annotations

import argparse
import ctypes
import signal
import sys
import threading
from pathlib import Path
from typing import Any

LIBRARY = "libaravis-0.8.so.0"
ADDRESS = "127.0.0.1"
RGB8 = 0x02180014  # ARV_PIXEL_FORMAT_RGB_8_PACKED
REGISTER_WIDTH = 0x100
REGISTER_HEIGHT = 0x104
REGISTER_PIXEL_FORMAT = 0x128
REGISTER_FRAME_PERIOD_US = 0x138
GOBJECT_SIZE = ctypes.sizeof(ctypes.c_void_p) + 8 + ctypes.sizeof(ctypes.c_void_p)
"""ArvBuffer is a GObject (type pointer, ref count padded to 8, qdata pointer) and then its priv pointer."""
RECEIVED_SIZE_OFFSET = 48
"""ArvBufferPrivate (0.8.x, LP64): allocated_size, is_preallocated, data, user_data, destroy, status, received_size."""

FillPattern = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32
)


def _library() -> Any:
    lib = ctypes.CDLL(LIBRARY)
    sigs: dict[str, tuple[Any, list[Any]]] = {
        "arv_gv_fake_camera_new": (ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_char_p]),
        "arv_gv_fake_camera_is_running": (ctypes.c_int, [ctypes.c_void_p]),
        "arv_gv_fake_camera_get_fake_camera": (ctypes.c_void_p, [ctypes.c_void_p]),
        "arv_fake_camera_write_register": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint32]),
        "arv_fake_camera_set_fill_pattern": (None, [ctypes.c_void_p, FillPattern, ctypes.c_void_p]),
        "arv_buffer_new": (ctypes.c_void_p, [ctypes.c_size_t, ctypes.c_void_p]),
        "arv_buffer_get_data": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]),
        "arv_buffer_get_image_width": (ctypes.c_int, [ctypes.c_void_p]),
        "arv_buffer_get_image_height": (ctypes.c_int, [ctypes.c_void_p]),
        "g_object_unref": (None, [ctypes.c_void_p]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


def _received_size(buffer: int) -> ctypes.c_size_t:
    priv = ctypes.c_void_p.from_address(buffer + GOBJECT_SIZE).value
    assert priv is not None
    return ctypes.c_size_t.from_address(priv + RECEIVED_SIZE_OFFSET)


def check_layout(lib: Any) -> None:
    """The received size sits where this module writes it: else refuse (a different Aravis)."""
    buffer = lib.arv_buffer_new(4096, None)
    try:
        for probe in (1234, 4096):
            _received_size(buffer).value = probe
            size = ctypes.c_size_t()
            lib.arv_buffer_get_data(buffer, ctypes.byref(size))
            if size.value != probe:
                raise RuntimeError(f"{LIBRARY}: ArvBuffer's private layout is not the one this camera knows")
    finally:
        lib.g_object_unref(buffer)


class SceneCamera:
    def __init__(self, frames: Path, width: int, height: int, fps: float, serial: str) -> None:
        self.lib = _library()
        check_layout(self.lib)
        self.frame_bytes = width * height * 3
        raw = frames.read_bytes()
        self.count = len(raw) // self.frame_bytes
        if self.count == 0 or len(raw) % self.frame_bytes:
            raise ValueError(f"{frames}: not a whole number of {width}x{height} RGB8 frames")
        self._view = ctypes.create_string_buffer(raw, len(raw))  # copied into each camera buffer with memmove
        self.sent = 0
        self.width, self.height = width, height
        self._callback = FillPattern(self._fill)  # kept referenced: Aravis calls it for as long as it runs
        self.gv = self.lib.arv_gv_fake_camera_new(ADDRESS.encode(), serial.encode())
        if not self.gv or not self.lib.arv_gv_fake_camera_is_running(self.gv):
            raise RuntimeError(f"the fake camera did not start on {ADDRESS} (port 3956 taken?)")
        camera = self.lib.arv_gv_fake_camera_get_fake_camera(self.gv)
        for register, value in (
            (REGISTER_WIDTH, width),
            (REGISTER_HEIGHT, height),
            (REGISTER_PIXEL_FORMAT, RGB8),
            (REGISTER_FRAME_PERIOD_US, round(1e6 / fps)),
        ):
            self.lib.arv_fake_camera_write_register(camera, register, value)
        self.lib.arv_fake_camera_set_fill_pattern(camera, self._callback, None)

    def _fill(self, buffer: int, _data: int, _exposure: int, _gain: int, pixel_format: int) -> None:
        # On Aravis' streaming thread; an exception here cannot propagate, so nothing may raise.
        if pixel_format != RGB8:
            return
        if self.lib.arv_buffer_get_image_width(buffer) != self.width:
            return
        if self.lib.arv_buffer_get_image_height(buffer) != self.height:
            return
        data = self.lib.arv_buffer_get_data(buffer, None)
        start = (self.sent % self.count) * self.frame_bytes
        ctypes.memmove(data, ctypes.addressof(self._view) + start, self.frame_bytes)
        _received_size(buffer).value = self.frame_bytes
        self.sent += 1

    def close(self) -> None:
        if self.gv:
            self.lib.g_object_unref(self.gv)  # stops the GVCP and stream threads
            self.gv = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("frames", type=Path)
    parser.add_argument("--width", type=int, required=True)
    parser.add_argument("--height", type=int, required=True)
    parser.add_argument("--fps", type=float, default=10.0)
    parser.add_argument("--serial", default="GV01")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    camera = SceneCamera(args.frames, args.width, args.height, args.fps, args.serial)
    try:
        print(f"READY frames={camera.count}", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        camera.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
