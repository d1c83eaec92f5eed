"""Cameras decoded in worker processes (`[engine] processes`): the daemon's side.

`DecoderPool` keeps `processes - 1` decoder processes (`daemon.ingest.decoder_proc`, started with
the `spawn` context: never a fork of the threaded daemon), each serving a share of the cameras.
`ProcessLink` is a `daemon.ingest.link.Link` like `AvLink`: the camera's `CameraSource` thread in the
daemon keeps the whole lifecycle (state, reconnect with backoff, status events, health), and one
`attempt` asks the camera's process to read one connection, then turns what comes back into what
`AvLink` would have done in the thread: routing (`SourceGeometry`, here), `camera_up`, status
events, frames to the consumer (their planes leased from the camera's `SlotRing`, never pickled),
and the attempt's end. A live camera's frames are handed on by the thread that reads the process's
pipe (latest-frame-wins puts never block it); a replay's by the camera's thread, which waits. The
decoder's counters come back as deltas (`metrics` messages) into the daemon's registry.

A decoder process that dies ends its cameras' connections (`decoder process exited`: camera_down,
as a lost connection); the next attempt starts a new process. The daemon never stops for it.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from multiprocessing.connection import Connection as Pipe
from typing import Any

import structlog

from daemon.config.cameras import CameraConfig
from daemon.core.frames import Frame, Letterbox
from daemon.core.metrics import Metrics
from daemon.core.redaction import SECRETS
from daemon.core.yuv import YuvFrame
from daemon.ingest import decoder_proc
from daemon.ingest.decoding import ConnectionLostError, scale_yuv
from daemon.ingest.link import LinkParts
from daemon.ingest.reader import Connection, Outcome
from daemon.ingest.shm_ring import SlotRing

log = structlog.get_logger("beltsight.source")

STOP_WAIT_S = 10.0
"""How long a stopping camera waits for its process to end the connection."""


@dataclass(slots=True)
class _Process:
    """One decoder process as the daemon sees it."""

    index: int
    process: Any
    pipe: Pipe
    lock: threading.Lock
    alive: bool = True
    dispatch: threading.Thread | None = None  # reads `pipe` until the process is gone (joined by `close`)


class DecoderPool:
    """The decoder processes and the cameras each serves (cameras spread round-robin in order of arrival).

    A camera added while the daemon runs starts in either mode the same way: a `CameraSource` given
    the pipeline's pool (`decoders=`, None on the single-process path) takes its link from `link`;
    one removed for good is stopped and joined like any source, then `forget` drops it here. The
    processes start at their first camera's first attempt and stop at `close`."""

    def __init__(
        self, processes: int, metrics: Metrics, log_setup: Callable[[], None] | None = None, *, yuv: bool = False
    ) -> None:
        """`yuv` (lanes that letterbox on the device): frames cross as their decoded Y, U and V planes
        (`ProcessLink._route`), not scaled to RGB in the decoder."""
        if processes < 1:
            raise ValueError("a decoder pool needs at least one process")
        self.size = processes
        self.yuv = yuv
        self._metrics = metrics
        self._log_setup = log_setup
        self._context = multiprocessing.get_context("spawn")
        self._procs: list[_Process | None] = [None] * processes
        self._inboxes: dict[str, queue.SimpleQueue[tuple[Any, ...]]] = {}
        self._assigned: dict[str, int] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._links: list[ProcessLink] = []
        self._direct: dict[str, ProcessLink] = {}
        """Cameras whose frames the pipe's thread hands to the consumer itself (latest-frame-wins
        `put`s never block); a `realtime = false` replay's go through its own thread, which waits."""
        self.restarts = 0

    def link(self, camera: CameraConfig, parts: LinkParts) -> ProcessLink:
        """The link for one camera (call once per camera, live additions included)."""
        with self._lock:
            self._assigned.setdefault(camera.id, len(self._assigned) % self.size)
            self._inboxes[camera.id] = queue.SimpleQueue()
            link = ProcessLink(camera, parts, self)
            self._links.append(link)
            if not (camera.is_file and not camera.realtime):
                self._direct[camera.id] = link
        return link

    def forget(self, camera_id: str) -> None:
        """A camera removed for good: its process serves it no more."""
        with self._lock:
            self._assigned.pop(camera_id, None)
            self._inboxes.pop(camera_id, None)
            self._direct.pop(camera_id, None)
            self._links = [link for link in self._links if link.camera.id != camera_id]

    def pids(self) -> list[int]:
        """The running decoder processes' ids (for tests and tools)."""
        return [p.process.pid for p in self._procs if p is not None and p.alive]

    def _inbox(self, camera_id: str) -> queue.SimpleQueue[tuple[Any, ...]]:
        return self._inboxes[camera_id]

    def _process_for(self, camera_id: str) -> _Process:
        """The camera's live process, started (again) where it is not running."""
        with self._lock:
            if self._closed:
                raise ConnectionLostError("stopping")
            index = self._assigned[camera_id]
            proc = self._procs[index]
            if proc is None or not proc.alive:
                if proc is not None:
                    proc.process.join(0.5)
                    self.restarts += 1
                proc = self._procs[index] = self._start(index)
            return proc

    def _start(self, index: int) -> _Process:
        ours, theirs = self._context.Pipe(duplex=True)
        process = self._context.Process(
            target=decoder_proc.serve, args=(theirs, self._log_setup), name=f"beltsight-decoder-{index}", daemon=True
        )
        process.start()
        theirs.close()
        proc = _Process(index, process, ours, threading.Lock())
        proc.dispatch = threading.Thread(target=self._dispatch, args=(proc,), name=f"decoder-{index}-pipe", daemon=True)
        proc.dispatch.start()
        log.info("decoder_process_started", process=index, pid=process.pid, restarts=self.restarts)
        return proc

    def _send(self, proc: _Process, message: tuple[Any, ...]) -> None:
        try:
            with proc.lock:
                proc.pipe.send(message)
        except (OSError, ValueError):
            raise ConnectionLostError("decoder process exited") from None

    def _dispatch(self, proc: _Process) -> None:
        """The process's messages, each to its camera's inbox (counters straight to the registry)."""
        try:
            while True:
                message = proc.pipe.recv()
                if message[0] == "metrics":
                    self._relay(message[1])
                    continue
                direct = self._direct.get(message[1]) if message[0] == "frame" else None
                if direct is not None:  # a live camera's frame: to the consumer from here, one thread wake less
                    self._hand_on(direct, proc, message)
                    continue
                inbox = self._inboxes.get(message[1])
                if inbox is not None:
                    inbox.put(message)
        except (EOFError, OSError):
            pass
        finally:
            proc.alive = False
            proc.process.join(1.0)
            if not self._closed:
                log.error("decoder_process_exited", process=proc.index, exitcode=proc.process.exitcode)
            with self._lock:
                cameras = [c for c, i in self._assigned.items() if i == proc.index]
            for camera_id in cameras:
                inbox = self._inboxes.get(camera_id)
                if inbox is not None:
                    inbox.put(("died", camera_id, proc))

    @staticmethod
    def _hand_on(link: ProcessLink, proc: _Process, message: tuple[Any, ...]) -> None:
        try:
            link._frame(proc, message, link._parts.stop)
        except Exception as exc:  # a bug: this camera's frame is lost, never the process's pipe
            trace = SECRETS.scrub("".join(traceback.format_exception(exc)))
            log.error("camera_thread_crashed", camera=link.camera.id, error=type(exc).__name__, traceback=trace)

    def _relay(self, deltas: Mapping[tuple[str, tuple[tuple[str, str], ...]], float]) -> None:
        counters = {
            "beltsight_frames_decoded": self._metrics.frames_decoded,
            "beltsight_corrupt_packets": self._metrics.corrupt_packets,
            "beltsight_frames_dropped": self._metrics.frames_dropped,
            "beltsight_stage_cpu_seconds": self._metrics.stage_cpu_seconds,
        }
        for (name, labels), delta in deltas.items():
            counter = counters.get(name)
            if counter is not None:
                counter.labels(**dict(labels)).inc(delta)

    def close(self, timeout_s: float = 5.0) -> None:
        """Ask every process to exit, wait for them (killing what does not end) and for the threads
        reading their pipes (each ends at its process's end)."""
        with self._lock:
            self._closed = True
            procs = [p for p in self._procs if p is not None]
        for proc in procs:
            try:
                with proc.lock:
                    proc.pipe.send(("exit",))
            except (OSError, ValueError):
                pass
        for proc in procs:
            proc.process.join(timeout_s)
            if proc.process.is_alive():
                proc.process.kill()
                proc.process.join(timeout_s)
            if proc.dispatch is not None:
                proc.dispatch.join(timeout_s)
            proc.pipe.close()
        for link in self._links:
            link.died()


class ProcessLink:
    """One camera read in a decoder process (`daemon.ingest.link.Link`; see the module text)."""

    def __init__(self, camera: CameraConfig, parts: LinkParts, pool: DecoderPool) -> None:
        self.camera = camera
        self._parts = parts
        self._pool = pool
        self._ring: SlotRing | None = None
        self._ring_of: _Process | None = None
        self._letterbox: Letterbox | None = None
        self._fps = 0.0
        self.frames = 0
        self.last_frame_mono: float | None = None

    @property
    def fps(self) -> float:
        return self._fps

    @property
    def expects_frames(self) -> bool:
        return True

    @property
    def refused(self) -> Mapping[str, Mapping[str, str]]:
        return {}

    def end_connection(self) -> None:
        self._fps = 0.0

    def attempt(self) -> Outcome:
        proc = self._pool._process_for(self.camera.id)
        inbox = self._pool._inbox(self.camera.id)
        while not inbox.empty():  # a previous process's leftovers
            inbox.get_nowait()
        if self._ring_of is not proc:
            self._retire_ring()
        self._pool._send(proc, ("attempt", self.camera, self._pool.yuv))
        return _Attempt(self, proc, inbox).run()

    def _retire_ring(self) -> None:
        if self._ring is not None:
            self._ring.retire()
        self._ring = None
        self._ring_of = None

    def _route(self, proc: _Process, width: int, height: int) -> None:
        letterbox = self._parts.geometry.letterbox_for(width, height)
        self._letterbox = letterbox
        if letterbox is None:
            self._pool._send(proc, ("routed", self.camera.id, None, None, 0, False))
            return
        # YUV for the device's letterbox where the planes can be rebuilt as an I420 frame (even sizes)
        yuv = self._pool.yuv and width % 2 == 0 and height % 2 == 0
        shape = (height, width) if yuv else (letterbox.new_h, letterbox.new_w)
        if self._ring is None or self._ring.shape != shape or self._ring.yuv != yuv:
            self._retire_ring()
            self._ring = SlotRing.create(shape, yuv=yuv)
            self._ring_of = proc
        self._pool._send(proc, ("routed", self.camera.id, letterbox, self._ring.name, self._ring.slots, yuv))

    def _frame(self, proc: _Process, message: Sequence[Any], stop: threading.Event) -> bool:
        """Hand one frame on; False when a replay's put was stopped."""
        _, camera_id, slot, seq, captured_ms, captured_mono, frames, fps, colour = message
        self.frames, self._fps, self.last_frame_mono = frames, fps, captured_mono
        ring, letterbox = self._ring, self._letterbox
        if ring is None or letterbox is None:
            return True
        a, b, c = ring.lease_planes(slot)  # R, G, B, or Y, U, V
        if ring.yuv:
            matrix, full_range = colour  # the decoder sends a YUV slot's colour with it
            yuv = YuvFrame(letterbox.src_w, letterbox.src_h, a, b, c, matrix=matrix, full_range=full_range)
            pixels = partial(scale_yuv, yuv, letterbox)  # the host path's (a breaker's CPU fallback, the live view)
            frame = Frame(camera_id, seq, captured_ms, captured_mono, letterbox, pixels, decoded=yuv)
        else:
            frame = Frame(camera_id, seq, captured_ms, captured_mono, letterbox, (a, b, c))
        del a, b, c
        if not (self.camera.is_file and not self.camera.realtime):
            self._parts.consumer.put(frame, wait=False)
            return True
        if not self._parts.consumer.put(frame, wait=True, stop=stop):
            return False
        self._pool._send(proc, ("taken", camera_id))
        return True

    def died(self) -> None:
        self._retire_ring()


class _Attempt:
    """One connection read by the camera's process, seen from the camera's thread."""

    def __init__(self, link: ProcessLink, proc: _Process, inbox: queue.SimpleQueue[tuple[Any, ...]]) -> None:
        self._link = link
        self._proc = proc
        self._inbox = inbox
        self._parts = link._parts
        self._conn: Connection | None = None
        self._stop_sent_mono: float | None = None

    def run(self) -> Outcome:
        stop = self._parts.stop
        while True:
            try:
                message = self._inbox.get(timeout=0.1)
            except queue.Empty:
                if stop.is_set():
                    self._ask_stop()
                continue
            kind = message[0]
            if kind == "frame":
                if not self._link._frame(self._proc, message, stop):
                    self._ask_stop()
            elif kind == "route":
                self._link._route(self._proc, message[2], message[3])
            elif kind == "up":
                self._up(*message[2:])
            elif kind == "status":
                self._parts.status(message[2], message[3])
            elif kind == "end":
                return self._end(*message[2:])
            elif kind == "died" and message[2] is self._proc:
                self._link.died()
                stalled = self._conn is not None and self._conn.up
                raise ConnectionLostError("decoder process exited", stalled=stalled)

    def _ask_stop(self) -> None:
        now = self._parts.clock.monotonic()
        if self._stop_sent_mono is None:
            self._stop_sent_mono = now
            self._link._pool._send(self._proc, ("stop", self._link.camera.id))
        elif now - self._stop_sent_mono > STOP_WAIT_S:
            raise ConnectionLostError("stopped (decoder process did not answer)")

    def _up(self, width: int, height: int, codec: str, connect_s: float) -> None:
        now = self._parts.clock.monotonic()
        self._conn = Connection(codec, now - connect_s, now, 25.0)
        self._parts.on_up(width, height, self._conn, now)

    def _end(self, kind: str, reason: str, stalled: bool, trace: str | None) -> Outcome:
        if kind == "failed":
            raise ConnectionLostError(reason, stalled=stalled)
        if kind == "crashed":
            log.error("camera_thread_crashed", camera=self._link.camera.id, error=reason, traceback=trace)
            return Outcome("failed", f"internal error ({reason})")
        if kind in ("loop", "finished", "stopped"):
            return Outcome(kind, reason, stalled)  # type: ignore[arg-type]
        return Outcome("failed", reason, stalled)
