"""The device rooms on CuPy against NumPy (GPU hosts only; skipped elsewhere): the YUV letterbox
(xp path and the CUDA kernel), IO binding through `Engine.run_device` for several layouts, and
NMS ordered on the engine's stream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from daemon.config.engine import EngineConfig
from daemon.core.frames import Letterbox
from daemon.core.xp import GpuUnavailableError, choose_device, get_xp, to_host
from daemon.inference.device_preprocess import DeviceBatchTensor
from daemon.inference.engine import Engine
from daemon.inference.layouts import InputConvention
from daemon.inference.model_file import load_model_info
from daemon.inference.postprocess import decode_batch
from tests.support.onnx_models import DEMO_MODELS, wrap_demo
from tests.support.yuv_planes import frame_of, planes

cupy = pytest.importorskip("cupy")
try:
    xp_gpu = get_xp("cuda")
except GpuUnavailableError as exc:
    pytest.skip(f"no usable CUDA device: {exc}", allow_module_level=True)

pytestmark = pytest.mark.gpu
SIZE = 416
CONVENTIONS = [InputConvention(), InputConvention(color="bgr", scale=1.0, padding="top-left", dtype="float16")]


@pytest.mark.parametrize(("w", "h"), [(640, 480), (641, 361), (1919, 1081), (97, 55)])
@pytest.mark.parametrize("conv", CONVENTIONS, ids=["rgb-f32", "bgr-f16-topleft"])
@pytest.mark.parametrize("nv12", [False, True], ids=["i420", "nv12"])
def test_letterbox_on_the_device_matches_numpy(w: int, h: int, conv: InputConvention, nv12: bool) -> None:
    from daemon.inference.letterbox_kernel import LetterboxKernel  # noqa: PLC0415

    y, u, v = planes(w, h, seed=w + h)
    lb = Letterbox.fit(w, h, SIZE)
    host = DeviceBatchTensor(np, 2, SIZE, conv).fill([(frame_of(np, w, h, y, u, v, nv12=nv12, extra=40), lb)] * 2)
    device_frame = frame_of(cupy, w, h, y, u, v, nv12=nv12, extra=40)
    tol = 2e-3 * max(1.0, conv.scale * 255)
    for kernel in (None, LetterboxKernel(cupy)):
        out = DeviceBatchTensor(cupy, 2, SIZE, conv, kernel=kernel).fill([(device_frame, lb)] * 2)
        np.testing.assert_allclose(to_host(out).astype(np.float32), host.astype(np.float32), atol=tol, rtol=2e-3)


def test_auto_picks_cuda_for_a_cuda_session() -> None:
    choice = choose_device("auto", ("CUDAExecutionProvider", "CPUExecutionProvider"))
    assert choice.device == "cuda" and choice.xp is xp_gpu


@pytest.mark.skipif(not (DEMO_MODELS / f"conveyor-{SIZE}.onnx").is_file(), reason="demo model not built")
@pytest.mark.parametrize("kind", ["yolov8", "yolov5", "end2end-four"])
def test_run_device_matches_the_host_run_and_nms_stays_on_the_stream(tmp_path: Path, kind: str) -> None:
    info = load_model_info(wrap_demo(tmp_path / f"{kind}.onnx", kind, SIZE))
    engine = Engine.create(info, EngineConfig(providers=["cuda"], max_batch=2))
    assert engine.on_cuda and engine.cuda_stream is not None
    batch = np.random.default_rng(0).uniform(0, 1, (2, 3, SIZE, SIZE)).astype(info.convention.dtype)
    host = engine.run(batch)
    args: dict[str, Any] = {"conf_threshold": 0.25, "iou_threshold": 0.5, "max_det": 100, "layout": info.decoding}
    with engine.cuda_stream:
        device_out = engine.run_device(cupy.asarray(batch), synchronize=False)
        rows_gpu = decode_batch(xp_gpu, device_out, **args)  # queued after ORT's kernels on one stream
    np.testing.assert_allclose(to_host(device_out), host, atol=1e-4)
    rows_cpu = decode_batch(np, host, **args)
    assert [r.shape for r in rows_cpu] == [r.shape for r in rows_gpu]
    for a, b in zip(rows_cpu, rows_gpu, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-3)
    engine.close()
