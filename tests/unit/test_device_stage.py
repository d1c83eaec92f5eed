"""The device path of the inference stage (daemon.device_stage) run with NumPy here: real H.264
frames of rendered conveyor scenes -> YUV letterbox -> the demo model on ONNX Runtime ->
decode_batch, against the CPU path the daemon runs today (swscale + BatchTensor + engine.run).

Same objects, boxes within a few pixels: the two letterboxes differ only in the resampling
filter. On a GPU host the same class runs on CuPy (tests/gpu, tools/gpu_check.py)."""

from __future__ import annotations

import av
import numpy as np
import pytest

from daemon.config_engine import EngineConfig
from daemon.decoding import scale
from daemon.device_stage import DeviceInference
from daemon.engine import Engine, load_model_info
from daemon.frames import Frame, Letterbox
from daemon.inference import BatchTensor
from daemon.postprocess import decode_batch
from tests.onnx_models import DEMO_MODELS
from tools.synth_video import h264_writer

MODEL = DEMO_MODELS / "conveyor-640.onnx"
pytestmark = pytest.mark.skipif(not MODEL.is_file(), reason="demo model not built (tools/bootstrap.sh)")


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> list[av.VideoFrame]:
    render_image = pytest.importorskip("tools.synth").render_image
    path = tmp_path_factory.mktemp("stage") / "scenes.mp4"
    with h264_writer(path, 960, 540, 10, crf=16, preset="veryfast") as write:
        for seed in (3, 4, 5):
            write(render_image(seed, 960, 540)[0])
    with av.open(str(path)) as container:
        return list(container.decode(video=0))


def test_device_path_with_numpy_finds_what_the_cpu_path_finds(frames: list[av.VideoFrame]) -> None:
    info = load_model_info(MODEL, 640)
    engine = Engine.create(info, EngineConfig(providers=["cpu"], max_batch=3, worker_batch=3))
    lb = Letterbox.fit(960, 540, 640)
    args = {"conf_threshold": 0.4, "iou_threshold": 0.5, "max_det": 100, "layout": info.decoding}
    cpu_batch = BatchTensor(3, 640, info.convention).fill(
        [Frame("c", i, 0, 0.0, lb, scale(f, lb)) for i, f in enumerate(frames)]
    )
    cpu_rows = decode_batch(np, engine.run(cpu_batch), **args)
    stage = DeviceInference(np, engine, info, 3)
    out = stage.run([(f, lb) for f in frames])
    dev_rows = decode_batch(np, out, **args)
    assert sum(len(r) for r in cpu_rows) >= 3  # the scenes have parts to find
    for a, b in zip(cpu_rows, dev_rows, strict=True):
        assert sorted(a[:, 5].tolist()) == sorted(b[:, 5].tolist())  # the same classes found
        for row in a:  # each CPU-path box has a device-path box of its class within 3 px
            same = b[b[:, 5] == row[5]]
            assert np.abs(same[:, :4] - row[:4]).max(axis=1).min() < 3.0
    again = stage.run([(f, lb) for f in frames[:2]])  # a smaller batch reuses the tensor
    assert again.shape[0] == 2
    engine.close()
