"""Run the real daemon in-process (its own thread and event loop) or as a subprocess, for tests.

Configs come from the one config writer, tools/kit/daemon_config.py (`write_config`, `MODELS`).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from PIL import Image

from daemon.app import Daemon
from daemon.config.settings import Settings, load_settings
from daemon.core.metrics import Metrics
from daemon.inference.protocols import EngineBuilder
from tools.kit import leash
from tools.kit.daemon_config import MODELS, write_config

REPO = Path(__file__).resolve().parents[2]
__all__ = [
    "MODELS",
    "REPO",
    "InProcessDaemon",
    "http_get",
    "offline_detections",
    "run_cli",
    "write_config",
]


class InProcessDaemon:
    """`with InProcessDaemon(config) as d:` runs `Daemon.run()` in a thread until the block ends."""

    def __init__(
        self, config: Path, engine_factory: Callable[[Settings, Metrics], EngineBuilder] | None = None
    ) -> None:
        self.metrics = Metrics()
        settings = load_settings(config)
        factory = engine_factory(settings, self.metrics) if engine_factory is not None else None
        self.daemon = Daemon(settings, metrics=self.metrics, engine_factory=factory, config_path=config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="daemon-under-test")

    def _main(self) -> None:
        async def run() -> None:
            self._loop = asyncio.get_running_loop()
            self._started.set()
            await self.daemon.run()

        try:
            asyncio.run(run())
        except BaseException as exc:
            self.error = exc
        finally:
            self._started.set()

    def __enter__(self) -> InProcessDaemon:
        self._thread.start()
        self._started.wait(30)
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        if self._loop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self.daemon.request_stop)
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), "daemon did not stop"

    def reload(self) -> None:
        """What SIGHUP does: re-read the config file and apply it (asynchronously, on the daemon's loop)."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self.daemon.request_reload)

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self.error is not None:
            raise self.error

    def counter(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0


@dataclass(frozen=True, slots=True)
class HttpReply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def http_get(port: int, path: str, *, method: str = "GET", timeout_s: float = 5.0) -> HttpReply:
    """One request to the daemon's health endpoint on loopback (error statuses are replies too)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return HttpReply(response.status, dict(response.headers.items()), response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return HttpReply(exc.code, dict(exc.headers.items()), exc.read())


def run_cli(*args: str, timeout_s: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **(env or {})}
    return leash.run([sys.executable, "-m", "daemon", *args], cwd=REPO, text=True, timeout=timeout_s, env=env)


# -- an independent offline reference: PIL letterbox, ORT, numpy decode + per-class NMS ----------
def oracle_nms(boxes: np.ndarray, scores: np.ndarray, iou: float) -> list[int]:
    """Textbook greedy NMS (one class): the test oracle the daemon's `grouped_nms` is checked against,
    written independently of it on purpose."""
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    order = np.argsort(-scores)
    keep: list[int] = []
    while order.size:
        i = int(order[0])
        keep.append(i)
        rest = order[1:]
        xx1 = np.maximum(boxes[i, 0], boxes[rest, 0])
        yy1 = np.maximum(boxes[i, 1], boxes[rest, 1])
        xx2 = np.minimum(boxes[i, 2], boxes[rest, 2])
        yy2 = np.minimum(boxes[i, 3], boxes[rest, 3])
        inter = np.clip(xx2 - xx1, 0, None) * np.clip(yy2 - yy1, 0, None)
        order = rest[inter / (areas[i] + areas[rest] - inter + 1e-9) <= iou]
    return keep


def offline_detections(
    model: Path, frame_rgb: np.ndarray, size: int, conf: float, iou: float, session: ort.InferenceSession | None = None
) -> list[tuple[int, float, list[float]]]:
    """Run the model on one camera frame the textbook way; boxes in camera pixels."""
    sess = session or ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    h, w = frame_rgb.shape[:2]
    scale = min(size / w, size / h)
    nw, nh = round(w * scale), round(h * scale)
    px, py = (size - nw) // 2, (size - nh) // 2
    canvas = np.full((size, size, 3), 114, np.uint8)
    canvas[py : py + nh, px : px + nw] = np.asarray(Image.fromarray(frame_rgb).resize((nw, nh), Image.BILINEAR))
    x = canvas.transpose(2, 0, 1)[None].astype(np.float32) / 255.0
    out = sess.run(None, {sess.get_inputs()[0].name: x})[0][0]  # (4 + C, A)
    scores = out[4:].max(0)
    classes = out[4:].argmax(0)
    mask = scores >= conf
    cx, cy, bw, bh = out[0, mask], out[1, mask], out[2, mask], out[3, mask]
    boxes = np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], 1)
    scores, classes = scores[mask], classes[mask]
    result = []
    for cls in np.unique(classes):
        idx = np.nonzero(classes == cls)[0]
        for k in oracle_nms(boxes[idx], scores[idx], iou):
            b = boxes[idx[k]]
            box = [
                float(np.clip((b[0] - px) * w / nw, 0, w)),
                float(np.clip((b[1] - py) * h / nh, 0, h)),
                float(np.clip((b[2] - px) * w / nw, 0, w)),
                float(np.clip((b[3] - py) * h / nh, 0, h)),
            ]
            result.append((int(cls), float(scores[idx[k]]), box))
    return result
