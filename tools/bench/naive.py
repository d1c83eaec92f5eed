"""The naive pipeline the field ships, as a baseline for `python -m tools.bench`.

One loop, one camera after another: read the next frame from its RTSP stream (PyAV), letterbox
it with NumPy (nearest-neighbour index arithmetic, no swscale resize), `session.run` at batch 1,
decode + NMS with `daemon.inference.postprocess.decode_batch` (NumPy), XADD with redis-py (sync).

Latency is measured against when the camera SENT the frame: expected capture time = stream
start (wall clock when `av.open` returned, or earlier if a frame proves it) + frame index / fps.
Reading streams one after another leaves frames queued in socket and FFmpeg buffers, so the
decode time of a frame says nothing about how old it is; this does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import av
import numpy as np
import onnxruntime as ort
import redis
from redis.typing import EncodableT, FieldT

from daemon.core.seam import LETTERBOX_PAD_VALUE, FrameResult, Letterbox
from daemon.inference.seam import ModelInfo, decode_batch, to_detections
from daemon.publish.seam import encode_entry

AV_OPTIONS = {"rtsp_transport": "tcp", "timeout": "2000000", "analyzeduration": "0", "probesize": "32"}


@dataclass
class NaiveCamera:
    camera_id: str
    url: str
    fps: float
    container: av.container.InputContainer | None = None
    frames: object = None
    opened_wall: float = 0.0
    index: int = 0
    xadd_wall: list[float] = field(default_factory=list)
    decoded_wall: list[float] = field(default_factory=list)

    def open(self) -> None:
        self.container = av.open(self.url, options=AV_OPTIONS, timeout=(5, 2))
        self.opened_wall = time.time()
        self.frames = self.container.decode(video=0)

    def latencies(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(XADD wall s, ms since the expected capture, ms since decode) per frame, in order."""
        xadd, decoded = np.array(self.xadd_wall), np.array(self.decoded_wall)
        index = np.arange(len(xadd))
        start = min(self.opened_wall, float((decoded - index / self.fps).min(initial=self.opened_wall)))
        return xadd, (xadd - (start + index / self.fps)) * 1000, (xadd - decoded) * 1000

    def close(self) -> None:
        if self.container is not None:
            self.container.close()


def letterbox_nearest(rgb: np.ndarray, lb: Letterbox) -> np.ndarray:
    """(1, 3, S, S) float32 0..1: nearest-neighbour resize by index arithmetic, grey padding."""
    ys = (np.arange(lb.new_h) * rgb.shape[0] // lb.new_h).astype(np.intp)
    xs = (np.arange(lb.new_w) * rgb.shape[1] // lb.new_w).astype(np.intp)
    out = np.full((1, 3, lb.size, lb.size), LETTERBOX_PAD_VALUE / 255.0, dtype=np.float32)
    small = rgb[ys[:, None], xs[None, :]]
    out[0, :, lb.pad_y : lb.pad_y + lb.new_h, lb.pad_x : lb.pad_x + lb.new_w] = small.transpose(2, 0, 1) / 255.0
    return out


def run_naive(
    cams: list[NaiveCamera],
    session: ort.InferenceSession,
    info: ModelInfo,
    client: redis.Redis,
    seconds: float,
    conf: float = 0.25,
    iou: float = 0.5,
) -> tuple[float, float]:
    """Run the loop for `seconds`; records per-frame times in each camera; returns (start wall s, elapsed s)."""
    for cam in cams:
        cam.open()
    letterboxes: dict[str, Letterbox] = {}
    start = time.time()
    while time.time() - start < seconds:
        for cam in cams:
            vframe = next(cam.frames)  # type: ignore[call-overload]
            decoded = time.time()
            rgb = vframe.to_ndarray(format="rgb24")  # colour conversion only; the resize is NumPy's
            lb = letterboxes.get(cam.camera_id) or Letterbox.fit(rgb.shape[1], rgb.shape[0], info.size)
            letterboxes[cam.camera_id] = lb
            out = session.run([info.output_name], {info.input_name: letterbox_nearest(rgb, lb)})[0]
            rows = decode_batch(np, out, conf_threshold=conf, iou_threshold=iou, max_det=300, layout=info.decoding)[0]
            dets = to_detections(rows, lb, info.names, conf_threshold=conf)
            result = FrameResult(
                camera_id=cam.camera_id,
                seq=cam.index,
                captured_ms=int(decoded * 1000),
                captured_mono=0.0,
                width=lb.src_w,
                height=lb.src_h,
                model_size=info.size,
                model_name=info.name,
                detections=dets,
            )
            now = time.time()
            entry: dict[FieldT, EncodableT] = {k: v for k, v in encode_entry(result, int(now * 1000)).items()}
            client.xadd(f"bench:naive:{cam.camera_id}", entry)
            cam.xadd_wall.append(now)
            cam.decoded_wall.append(decoded)
            cam.index += 1
    elapsed = time.time() - start
    for cam in cams:
        cam.close()
    return start, elapsed
