"""`tools/demo.py --reference`: the plant's own counter beside each demo camera, for the bridge to check
the camera's count against (`[[bridge.reconcile]]`, issue #57).

Each demo camera gets a simulated PLC (`tools.plcsim`: its counter served over Modbus TCP on 127.0.0.1)
whose photo-eye sits downstream of the counting line, at `EYE_X` of the frame's width: the counter
counts a part when the rendered clip's ground truth (`tools.kit.synth.crossings.gt_crossings`) has it pass
that position, so the belt's stops hold the PLC's count back as they hold the camera's. The RTSP
server plays every connection's clip from its first frame, looping, so the PLC's clock is anchored on
the camera's stream: clip time 0 is the `captured_ms` of a detections entry minus its `seq` frames;
the anchor is read again when `seq` starts over (a reconnect restarts the clip). `--reference-miss-every K`
makes the photo-eye miss every K-th part: the bridge's `count_mismatch` shows on the events stream,
in its log and on its `/healthz`.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import redis as redis_py

from tools.kit.ports import free_port
from tools.kit.synth.crossings import gt_crossings
from tools.plcsim.counter import PlcCounter
from tools.plcsim.servers import ModbusPlc, PlcSim

LINE_X = 0.5
"""The demo cameras' counting line (configs/demo.toml: x = 0.5, the belt running to the right)."""
EYE_X = 0.6
"""Where each demo PLC's photo-eye sees the belt, as a share of the frame's width."""
HOURS = 24.0
"""How far ahead the counter's parts are laid out (loops of the clip) from each anchor."""


@dataclass(slots=True)
class CameraPlc:
    """One camera's simulated PLC: the photo-eye times of one loop of its clip, and its counter."""

    camera: str
    fps: float
    loop_s: float
    eye_s: list[float]
    lag_s: float
    sim: PlcSim
    port: int = 0
    seq: int | None = None

    def anchor(self, captured_ms: int, seq: int) -> None:
        """Clip time 0 is `seq` frames before `captured_ms`: lay out the parts from there (the counted
        ones before it stay counted)."""
        clip_zero = time.monotonic() - (time.time() * 1000 - captured_ms) / 1000 - seq / self.fps
        since = clip_zero - self.sim.t0
        kept = self.sim.counter.part_times[: bisect.bisect_right(self.sim.counter.part_times, since)]
        loops = int(HOURS * 3600 / self.loop_s) + 1
        ahead = [since + k * self.loop_s + t for k in range(loops) for t in self.eye_s]
        self.sim.counter.part_times = kept + ahead  # one reference swap: the server thread reads either


def camera_plc(camera: str, gt_path: Path, miss_every: int) -> CameraPlc:
    gt: dict[str, Any] = json.loads(gt_path.read_text())
    at_line = {c.key: c.t_s for c in gt_crossings(gt, LINE_X)}
    at_eye = {c.key: c.t_s for c in gt_crossings(gt, EYE_X)}
    eye_s = sorted(at_eye.values())
    lag_s = statistics.median([at_eye[k] - at_line[k] for k in at_eye if k in at_line] or [1.0])
    missed = set(range(miss_every - 1, 10**7, miss_every)) if miss_every > 0 else set()
    counter = PlcCounter([], bits=16, missed=missed)
    fps = float(gt["fps"])
    return CameraPlc(camera, fps, gt["frames"] / fps, eye_s, round(lag_s, 1), PlcSim(counter))


class DemoReference:
    """The demo cameras' PLCs, served from a thread of their own, anchored on the detections streams."""

    def __init__(self, clips: dict[str, Path], miss_every: int = 0) -> None:
        self.plcs = [camera_plc(cam, clip.with_suffix(".json"), miss_every) for cam, clip in clips.items()]
        for plc in self.plcs:
            plc.port = free_port()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def config_text(self) -> str:
        """The `[[bridge.reconcile]]` tables to append to the demo's config."""
        out = []
        for plc in self.plcs:
            out += [
                "",
                "[[bridge.reconcile]]",
                f'camera = "{plc.camera}"',
                'line = "count"',
                'direction = "in"',
                f'modbus = "127.0.0.1:{plc.port}"',
                "unit = 1",
                "register = 0",
                "words = 1",
                "poll_s = 0.5",
                "window_s = 15",
                f"lag_s = {plc.lag_s}",
                "tolerance = 2",
            ]
        return "\n".join(out) + "\n"

    def start(self, redis_port: int) -> None:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(redis_port, ready), name="demo-plcs", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("the demo's simulated PLCs did not start within 30 s")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self, redis_port: int, ready: threading.Event) -> None:
        asyncio.run(self._serve(redis_port, ready))

    async def _serve(self, redis_port: int, ready: threading.Event) -> None:
        servers = [ModbusPlc(plc.sim, port=plc.port) for plc in self.plcs]
        for server in servers:
            await server.start()
        for plc in self.plcs:
            plc.sim.start()
        ready.set()
        client = redis_py.Redis(port=redis_port, decode_responses=True)
        try:
            while not self._stop.is_set():
                for plc in self.plcs:
                    self._follow(client, plc)
                await asyncio.sleep(0.5)
        finally:
            client.close()
            for server in servers:
                await server.stop()

    @staticmethod
    def _follow(client: redis_py.Redis, plc: CameraPlc) -> None:
        """Anchor the PLC on the camera's newest detections entry when its connection (re)started."""
        try:
            newest = client.xrevrange(f"beltsight:detections:{plc.camera}", count=1)
        except redis_py.RedisError:
            return
        if not newest:
            return
        fields = cast("dict[str, str]", newest[0][1])  # the client decodes responses: str
        seq, captured_ms = int(fields["seq"]), int(fields["captured_ms"])
        if plc.seq is None or seq < plc.seq:
            plc.anchor(captured_ms, seq)
        plc.seq = seq


__all__ = ["DemoReference"]
