"""Aravis' fake GigE Vision camera (`arv-fake-gv-camera-0.8`, Debian's aravis-tools) on loopback.

    camera = FakeGigeCamera(loss_per_thousand=20).start()   # gige://127.0.0.1
    camera.kill(); camera.restart()                          # SIGKILL, then the same camera again
    camera.close()

It speaks the real protocol (GVCP control on UDP port 3956, GVSP stream, GenICam XML) and sends
a moving diagonal ramp (Mono8 512x512 at 25 fps unless told otherwise); `loss_per_thousand` makes
it drop stream packets on purpose. It can only listen on an address an interface has (127.0.0.1
on loopback) and GVCP's port is fixed, so one runs per machine at a time: `start()` holds an
exclusive lock file (`LOCK_PATH`) until `close()`, waiting for another test process's camera to
close first. Ready means it answers a GVCP discovery request.

`SceneGigeCamera(frames, width, height, fps)` is the same Aravis fake camera sending given frames
(the renderer's belt) instead of the ramp: `tools/kit/gige_scene_camera.py`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Self

from tools.kit.leash import spawn

FAKE_CAMERA = "arv-fake-gv-camera-0.8"
ADDRESS = "127.0.0.1"
GVCP_PORT = 3956
SCENE_SCRIPT = Path(__file__).resolve().with_name("gige_scene_camera.py")
LOCK_PATH = Path("/tmp/beltsight-gige-fake.lock")
READY_TIMEOUT_S = 10.0
LOCK_TIMEOUT_S = 300.0
SETTLE_S = 0.5
"""After its first discovery answer: a stream started at once sometimes sent its first frame seconds late."""
DISCOVERY = struct.pack(">BBHHH", 0x42, 0x11, 0x0002, 0, 1)
"""A GVCP DISCOVERY_CMD (key 0x42, flag: acknowledge, command 2, no payload, request id 1)."""


def installed() -> bool:
    return shutil.which(FAKE_CAMERA) is not None


def answers(address: str = ADDRESS, timeout_s: float = 0.2) -> bool:
    """A GigE Vision device on `address` acknowledges a discovery request."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout_s)
        try:
            sock.sendto(DISCOVERY, (address, GVCP_PORT))
            reply = sock.recv(1024)
        except OSError:
            return False
    return len(reply) >= 8 and struct.unpack(">HHHH", reply[:8])[1] == 0x0003  # DISCOVERY_ACK


class FakeGigeCamera:
    """One fake camera process; `serial` makes its device id `Aravis-Fake-<serial>`."""

    def __init__(self, serial: str = "GV01", loss_per_thousand: int = 0) -> None:
        self.serial = serial
        self.loss_per_thousand = loss_per_thousand
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"gige://{ADDRESS}"

    @property
    def device_id(self) -> str:
        return f"Aravis-Fake-{self.serial}"

    def argv(self) -> list[str]:
        argv = [FAKE_CAMERA, "-i", ADDRESS, "-s", self.serial]
        if self.loss_per_thousand:
            argv += ["-r", str(self.loss_per_thousand)]
        return argv

    def start(self) -> Self:
        if self._lock is None:
            self._lock = _take_lock()
        self._proc = spawn(self.argv(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not answers():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"{FAKE_CAMERA} did not answer on {ADDRESS}:{GVCP_PORT}")
        time.sleep(SETTLE_S)
        return self

    def kill(self) -> None:
        """SIGKILL: the camera vanishes mid-stream, as when its cable is pulled."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)

    def restart(self) -> Self:
        self.kill()
        return self.start()

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if self._lock is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None


class SceneGigeCamera(FakeGigeCamera):
    """The same camera and lock, sending `frames` (RGB8 frames back to back, `tools.kit.gige_scene_camera`)
    in order from the first frame its client acquires, at `fps`."""

    def __init__(self, frames: Path, width: int, height: int, fps: float, serial: str = "GV01") -> None:
        super().__init__(serial)
        self.frames, self.width, self.height, self.fps = frames, width, height, fps

    def argv(self) -> list[str]:
        size = ["--width", str(self.width), "--height", str(self.height), "--fps", str(self.fps)]
        return [sys.executable, str(SCENE_SCRIPT), str(self.frames), *size, "--serial", self.serial]


def _take_lock() -> IO[bytes]:
    fh = LOCK_PATH.open("ab")
    with contextlib.suppress(OSError):
        os.chmod(LOCK_PATH, 0o666)
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fh
        except BlockingIOError:
            if time.monotonic() > deadline:
                fh.close()
                raise RuntimeError(f"another fake GigE camera held {LOCK_PATH} for {LOCK_TIMEOUT_S:.0f} s") from None
            time.sleep(0.1)
