"""The decoder process: its cameras' connections, read by the same `AvLink` and `FrameReader` as the
threads of the single-process path, with frames written into shared memory (`shm_ring.SlotRing`).

The daemon (`daemon.ingest.decoders.DecoderPool`) starts it with the `spawn` context and talks to
it over one duplex pipe. Commands in: `("attempt", camera_config, yuv)` (open one connection and read
it to its end; `yuv`: the pool may route this camera's frames as their decoded YUV planes), `("stop",
camera_id)`, `("routed", camera_id, letterbox, ring_name, slots, yuv)` (the answer to a route
request: a `yuv` ring takes the decoded Y, U and V planes as they are, for lanes that letterbox on
the device; otherwise the R, G, B planes scaled to the letterbox content, as the CPU path fills),
`("taken", camera_id)` (a `realtime = false` replay's frame was taken by the daemon's consumer: the
reader goes on, as `put(wait=True)` does in a thread), `("exit",)`.
Messages out, one small tuple each, never pixels:

- `("route", camera, w, h)`: a frame of a size not yet routed; the reader waits for `routed`.
  Routing, its log lines and status events stay in the daemon (`SourceGeometry`).
- `("up", camera, w, h, codec, connect_s)`, `("status", camera, kind, detail)`.
- `("frame", camera, slot, seq, captured_ms, captured_mono, frames, fps, colour)`: `slot` holds the
  planes; `colour` is a YUV slot's `(matrix, full_range)`, None for RGB.
- `("end", camera, kind, reason, stalled, traceback)`: the attempt's `Outcome` (`kind` one of its
  kinds), its `ConnectionLostError` (`failed`), or a bug (`crashed`, with the scrubbed traceback).
- `("metrics", {(name, labels): delta})`: the reader's counters (frames decoded, corrupt packets,
  drops, decode CPU) since the last report, every `METRICS_EVERY_S` and at each attempt's end.

The process runs at `NICE` (its threads inherit it): where the cores are contended, the daemon's
own process (batching, inference, tracking, publishing) gets them first and the decoders the rest;
a camera whose decoding then falls behind skips to its live edge (`daemon.ingest.lag`). Measured
with 32 cameras on two cores (`python -m tools.bench --null-model --cameras 32 --seconds 80 --ab
decoders-nice`, four on/off pairs): 1.36 x the published frames/s at 0.73 x the CPU per frame, with
every camera's last frame within 1.0 s (p50) of its stream. Below saturation it changes nothing.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection as Pipe
from typing import Any

import numpy as np

from daemon.config.cameras import CameraConfig
from daemon.core.clock import SYSTEM_CLOCK
from daemon.core.frames import Frame, Letterbox
from daemon.core.metrics import Metrics
from daemon.core.redaction import SECRETS
from daemon.core.yuv import YuvFrame, yuv_frame
from daemon.ingest.av_link import AvLink
from daemon.ingest.decoding import ConnectionLostError
from daemon.ingest.link import LinkParts
from daemon.ingest.reader import Connection
from daemon.ingest.shm_ring import SlotRing

NICE = 5
"""How much nicer than the daemon the decoder processes run (`os.nice`, relative): see the module docstring."""
METRICS_EVERY_S = 0.5
RELAYED = (
    "beltsight_frames_decoded",
    "beltsight_corrupt_packets",
    "beltsight_frames_dropped",
    "beltsight_stage_cpu_seconds",
)
"""The counter families a reader touches, relayed to the daemon's registry."""
SLOT_WAIT_S = 0.005
"""A replay (`put(wait=True)`) with every slot held polls for a free one this often."""


class _Outbox:
    """The pipe to the daemon, shared by the process's threads. A message is pickled before the lock, with
    the plain pickler: `Connection.send` builds a `ForkingPickler` (and copies its dispatch table) for
    every message, for the handles and sockets these messages never carry; `recv` reads either."""

    def __init__(self, pipe: Pipe) -> None:
        self._pipe = pipe
        self._lock = threading.Lock()

    def send(self, message: tuple[Any, ...]) -> None:
        data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
        with self._lock:
            self._pipe.send_bytes(data)


@dataclass(slots=True)
class _Routed:
    """The daemon's answer for one frame size: the letterbox (None: no model) and the ring."""

    letterbox: Letterbox | None
    ring: SlotRing | None


@dataclass(slots=True)
class _Camera:
    """One camera of this process, its reader thread and its routing state."""

    config: CameraConfig
    outbox: _Outbox
    stop: threading.Event = field(default_factory=threading.Event)
    answer: threading.Event = field(default_factory=threading.Event)
    taken: threading.Event = field(default_factory=threading.Event)
    pending: _Routed | None = None
    routes: dict[tuple[int, int], _Routed] = field(default_factory=dict)
    current: _Routed | None = None
    link: AvLink | None = None
    keep_decoded: bool = False
    """Frames carry their decoded `av.VideoFrame` (`Frame.decoded`), which a YUV ring copies."""

    @property
    def id(self) -> str:
        return self.config.id

    # -------------------------------------------------------------- SourceGeometry's role
    def letterbox_for(self, width: int, height: int) -> Letterbox | None:
        routed = self.routes.get((width, height))
        if routed is None:
            self.answer.clear()
            self.outbox.send(("route", self.id, width, height))
            while not self.answer.wait(0.1):
                if self.stop.is_set():
                    return None
            routed = self.pending
            assert routed is not None
            self.routes[(width, height)] = routed
        self.current = routed
        return routed.letterbox

    # -------------------------------------------------------------- FrameConsumer's role
    def put(self, frame: Frame, *, wait: bool = False, stop: threading.Event | None = None) -> bool:
        ring = self.current.ring if self.current is not None else None
        if ring is None:
            return True
        slot = ring.acquire()
        while slot is None:
            if not wait:
                self.link_metrics().dropped(self.id, "superseded")
                return True
            if self.stop.wait(SLOT_WAIT_S):
                return False
            slot = ring.acquire()
        colour: tuple[str, bool] | None = None
        try:
            if ring.yuv:
                yuv = _yuv420(frame.decoded)
                assert yuv.v is not None  # I420 (`_yuv420`)
                ring.write(slot, (yuv.y, yuv.u, yuv.v))
                colour = (yuv.matrix, yuv.full_range)
            else:
                ring.write(slot, frame.planes)
        except BaseException:
            ring.abandon(slot)
            raise
        reader = self.link.reader if self.link is not None else None
        frames, fps = (reader.frames, reader.fps) if reader is not None else (0, 0.0)
        if wait:
            self.taken.clear()
        self.outbox.send(
            ("frame", self.id, slot, frame.seq, frame.captured_ms, frame.captured_mono, frames, fps, colour)
        )
        while wait and not self.taken.wait(0.1):  # a replay: on once the daemon's consumer took it
            if self.stop.is_set():
                return False
        return True

    def discard(self, camera_id: str) -> None:
        """Nothing waits here: the daemon's consumer discards on its side."""

    metrics: Metrics | None = None

    def link_metrics(self) -> Metrics:
        assert self.metrics is not None
        return self.metrics


class _Process:
    """The process's state: its cameras, its metrics, the pipe."""

    def __init__(self, pipe: Pipe) -> None:
        self.pipe = pipe
        self.outbox = _Outbox(pipe)
        self.metrics = Metrics()
        self.cameras: dict[str, _Camera] = {}
        self.rings: dict[str, SlotRing] = {}
        """Rings attached so far, by name (a camera keeps its ring across connections)."""
        self._sent: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self._metrics_lock = threading.Lock()
        self.done = threading.Event()

    def run(self) -> None:
        threading.Thread(target=self._report_metrics, name="decoder-metrics", daemon=True).start()
        try:
            while True:
                try:
                    command = self.pipe.recv()
                except (EOFError, OSError):
                    break
                if command[0] == "exit":
                    break
                self._command(command)
        finally:
            self.done.set()
            for camera in self.cameras.values():
                camera.stop.set()

    def _command(self, command: tuple[Any, ...]) -> None:
        kind = command[0]
        if kind == "attempt":
            self._attempt(command[1], keep_decoded=command[2])
        elif kind == "stop":
            camera = self.cameras.get(command[1])
            if camera is not None:
                camera.stop.set()
        elif kind == "taken":
            camera = self.cameras.get(command[1])
            if camera is not None:
                camera.taken.set()
        elif kind == "routed":
            _, camera_id, letterbox, ring_name, slots, yuv = command
            camera = self.cameras.get(camera_id)
            if camera is not None:
                ring = None
                if ring_name is not None and letterbox is not None:
                    ring = self.rings.get(ring_name)
                    if ring is None:
                        shape = (letterbox.src_h, letterbox.src_w) if yuv else (letterbox.new_h, letterbox.new_w)
                        ring = self.rings[ring_name] = SlotRing.attach(ring_name, slots, shape, yuv=yuv)
                camera.pending = _Routed(letterbox, ring)
                camera.answer.set()

    def _attempt(self, config: CameraConfig, *, keep_decoded: bool) -> None:
        SECRETS.add_from_url(config.url.get_secret_value())
        camera = _Camera(config, self.outbox, metrics=self.metrics, keep_decoded=keep_decoded)
        self.cameras[config.id] = camera
        threading.Thread(target=self._read, args=(camera,), name=f"decode-{config.id}", daemon=True).start()

    def _read(self, camera: _Camera) -> None:
        def on_up(width: int, height: int, conn: Connection, now: float) -> None:
            conn.up = True
            camera.outbox.send(("up", camera.id, width, height, conn.codec, round(now - conn.opened_mono, 3)))

        def status(kind: str, detail: str) -> None:
            camera.outbox.send(("status", camera.id, kind, detail))

        parts = LinkParts(camera, camera, self.metrics, SYSTEM_CLOCK, camera.stop, on_up, status)  # type: ignore[arg-type]
        link = camera.link = AvLink(camera.config, parts, None, keep_decoded=camera.keep_decoded)
        end: tuple[Any, ...]
        try:
            outcome = link.attempt()
            end = ("end", camera.id, outcome.kind, outcome.reason, outcome.stalled, None)
        except ConnectionLostError as exc:
            end = ("end", camera.id, "failed", exc.reason, exc.stalled, None)
        except Exception as exc:  # a bug: the daemon's source logs it as a crash and retries
            text = SECRETS.scrub("".join(traceback.format_exception(exc)))
            end = ("end", camera.id, "crashed", type(exc).__name__, False, text)
        finally:
            link.end_connection()
        self._flush_metrics()
        camera.outbox.send(end)

    # -------------------------------------------------------------- metrics relay
    def _report_metrics(self) -> None:
        while not self.done.wait(METRICS_EVERY_S):
            self._flush_metrics()

    def _flush_metrics(self) -> None:
        with self._metrics_lock:
            deltas: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
            for family in self.metrics.registry.collect():
                if family.name not in RELAYED:
                    continue
                for sample in family.samples:
                    if not sample.name.endswith("_total"):
                        continue
                    key = (family.name, tuple(sorted(sample.labels.items())))
                    delta = sample.value - self._sent.get(key, 0.0)
                    if delta > 0:
                        deltas[key] = delta
                        self._sent[key] = sample.value
            if deltas:
                with contextlib.suppress(OSError, ValueError):
                    self.outbox.send(("metrics", deltas))


def _yuv420(vframe: Any) -> YuvFrame:
    """A CPU-decoded frame's planes as I420 (`yuv_frame` converts 10-bit and 4:2:2 ones; NV12 too)."""
    yuv = yuv_frame(vframe, np)
    if yuv.v is None:
        yuv = yuv_frame(vframe.reformat(format="yuv420p"), np)
    return yuv


def serve(pipe: Pipe, log_setup: Callable[[], None] | None) -> None:
    """The process's entry point (`multiprocessing` target): serve commands until `exit` or the pipe closes."""
    if log_setup is not None:
        log_setup()
    nicer(NICE)
    _Process(pipe).run()


def nicer(by: int) -> None:
    """Every thread of this process `by` nicer. On Linux a nice value is a thread's (`os.nice` changes the
    caller's, and threads inherit their creator's): the threads the imports started (OpenBLAS' pool) are
    changed one by one, the camera threads started later inherit it from this one."""
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = []
    if not tids:
        with contextlib.suppress(OSError):
            os.nice(by)
    for tid in tids:
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + by)
