"""The device path of the inference stage (daemon.inference.device_stage) run with NumPy here: real H.264
frames of rendered conveyor scenes -> YUV letterbox -> the demo model on ONNX Runtime ->
decode_batch, against the CPU path the daemon runs today (swscale + BatchTensor + engine.run).

Same objects, boxes within a few pixels: the two letterboxes differ only in the resampling
filter. On a GPU host the same class runs on CuPy (tests/gpu, tools/checks/gpu_check.py)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import cast

import av
import numpy as np
import pytest

from daemon.config.engine import BreakerConfig, EngineConfig
from daemon.core.frames import Frame, FrameResult, Letterbox, StatusEvent
from daemon.core.metrics import Metrics
from daemon.core.model_spec import ModelOverrides
from daemon.inference.device_stage import DeviceInference
from daemon.inference.engine import Engine, InferenceError
from daemon.inference.model_file import ModelInfo, load_model_info
from daemon.inference.placement import device_path
from daemon.inference.postprocess import decode_batch
from daemon.inference.protocols import DeviceEngine
from daemon.inference.serving import ServingEngine
from daemon.inference.stage import BatchTensor, InferenceStage, PostprocessConfig
from daemon.ingest.decoding import scale
from tests.support.clips import scene_frames
from tests.support.onnx_models import DEMO_MODELS, wrap_demo
from tools.kit.device_standin import SEAM, CudaStandIn, StandInFactory

MODEL = DEMO_MODELS / "conveyor-640.onnx"
pytestmark = pytest.mark.skipif(not MODEL.is_file(), reason="demo model not built (tools/bootstrap.sh)")


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> list[av.VideoFrame]:
    return scene_frames(tmp_path_factory.mktemp("stage") / "scenes.mp4", (3, 4, 5), crf=16)


def test_device_path_with_numpy_finds_what_the_cpu_path_finds(frames: list[av.VideoFrame]) -> None:
    info = load_model_info(MODEL, 640)
    engine = Engine.create(info, EngineConfig(providers=["cpu"], max_batch=3, worker_batch=3))
    lb = Letterbox.fit(960, 540, 640)
    args = {"conf_threshold": 0.4, "iou_threshold": 0.5, "max_det": 100, "layout": info.decoding}
    cpu_batch = BatchTensor(3, 640, info.convention).fill(
        [Frame("c", i, 0, 0.0, lb, scale(f, lb)) for i, f in enumerate(frames)]
    )
    cpu_rows = decode_batch(np, engine.run(cpu_batch), **args)
    stage = DeviceInference(np, info, 3)
    out = stage.run(engine, [(f, lb) for f in frames])
    dev_rows = decode_batch(np, out, **args)
    assert sum(len(r) for r in cpu_rows) >= 3  # the scenes have parts to find
    for a, b in zip(cpu_rows, dev_rows, strict=True):
        assert sorted(a[:, 5].tolist()) == sorted(b[:, 5].tolist())  # the same classes found
        for row in a:  # each CPU-path box has a device-path box of its class within 3 px
            same = b[b[:, 5] == row[5]]
            assert np.abs(same[:, :4] - row[:4]).max(axis=1).min() < 3.0
    again = stage.run(engine, [(f, lb) for f in frames[:2]])  # a smaller batch reuses the tensor
    assert again.shape[0] == 2
    engine.close()


# -- the inference stage with its device path (the daemon's wiring), on NumPy ---------------------


CPU_CFG = EngineConfig(providers=["cpu"], max_batch=3, worker_batch=3, workers=1)
POST = PostprocessConfig(conf_threshold=0.4, iou_threshold=0.5, max_det=100)


def stage_of(engine: DeviceEngine, info: ModelInfo, device: DeviceInference | None) -> InferenceStage:
    return InferenceStage(info, engine, max_batch=3, post=POST, rules={}, metrics=Metrics(), device=device)


def live_frames(frames: list[av.VideoFrame], lb: Letterbox, *, decoded: bool = True) -> list[Frame]:
    """Frames as a source on the device path hands them over: lazy swscale planes and the decoded frame."""
    return [
        Frame("c", i, 0, 0.0, lb, partial(scale, f, lb), decoded=f if decoded else None) for i, f in enumerate(frames)
    ]


def agree(host: list[FrameResult], device: list[FrameResult], tolerance_px: float) -> None:
    """Same objects per frame, each host box matched by a device box of its class within tolerance."""
    assert sum(len(r.detections) for r in host) >= 3  # the scenes have parts to find
    for a, b in zip(host, device, strict=True):
        assert (a.camera_id, a.seq, a.width, a.height) == (b.camera_id, b.seq, b.width, b.height)
        assert sorted(d.cls for d in a.detections) == sorted(d.cls for d in b.detections)
        for det in a.detections:
            same = np.array([d.box for d in b.detections if d.cls == det.cls])
            assert np.abs(same - np.array(det.box)).max(axis=1).min() < tolerance_px


def on_cuda(engine: ServingEngine) -> bool:
    return engine.on_cuda  # a call, so mypy does not carry an earlier narrowing over


@pytest.fixture(scope="module")
def info() -> ModelInfo:
    return load_model_info(MODEL, 640)


def test_the_stage_with_a_device_inference_on_numpy_publishes_what_the_host_path_does(
    frames: list[av.VideoFrame], info: ModelInfo
) -> None:
    lb = Letterbox.fit(960, 540, 640)
    host_engine = Engine.create(info, CPU_CFG)
    device_engine = CudaStandIn(Engine.create(info, CPU_CFG))
    try:
        host = stage_of(host_engine, info, None).infer(live_frames(frames, lb, decoded=False))
        stage = stage_of(device_engine, info, device_path(SEAM, info, 3))
        device = stage.infer(live_frames(frames, lb))
        assert (device_engine.device_runs, device_engine.runs) == (1, 0)  # YUV fill -> run_device
        agree(host, device, tolerance_px=4.5)  # 3 px of the model input, x 1.5 to camera pixels
        again = stage.infer(live_frames(frames, lb, decoded=False))  # no decoded planes: host path
        assert (device_engine.device_runs, device_engine.runs) == (1, 1)
        assert again == host  # exactly the CPU pipeline's results
    finally:
        host_engine.close()
        device_engine.close()


def test_an_open_breaker_switches_the_stage_to_the_host_path_and_no_frame_is_lost(
    frames: list[av.VideoFrame], info: ModelInfo
) -> None:
    lb = Letterbox.fit(960, 540, 640)
    factory = StandInFactory(CPU_CFG)
    cfg = EngineConfig(
        providers=["cuda", "cpu"], max_batch=3, worker_batch=3, breaker=BreakerConfig(fail_max=2, reset_timeout_s=600)
    )
    primary = cast(CudaStandIn, factory.build(info, "configured"))
    events: list[StatusEvent] = []
    engine = ServingEngine(factory, info, cfg, primary, metrics=Metrics(), on_status=events.append)
    host_engine = Engine.create(info, CPU_CFG)
    try:
        engine.wait_builds(30)
        host = stage_of(host_engine, info, None).infer(live_frames(frames, lb))
        stage = stage_of(engine, info, device_path(SEAM, info, 3))
        on_device = stage.infer(live_frames(frames, lb))
        assert primary.device_runs == 1 and engine.on_cuda
        primary.failing = True  # the GPU faults: each failed batch is retried on the CPU fallback
        assert [stage.infer(live_frames(frames, lb)) for _ in range(2)] == [on_device, on_device]
        assert primary.device_runs == 3 and engine.breaker_state == "open"
        assert [e.kind for e in events] == ["breaker_open"]
        assert not on_cuda(engine)
        fallback_path = stage.infer(live_frames(frames, lb))  # now the host path: swscale + BatchTensor
        assert primary.device_runs == 3 and primary.runs == 0
        assert fallback_path == host  # exactly what the CPU pipeline publishes
        assert on_device != host  # (bilinear vs swscale's area: the paths are told apart by their scores)
        agree(host, on_device, tolerance_px=4.5)
    finally:
        engine.close()
        host_engine.close()


def test_boxes_map_back_through_the_placement_the_device_fill_used(frames: list[av.VideoFrame], tmp_path: Path) -> None:
    """A BGR, 0..255, top-left-padded export: the device fill puts the content at the top-left
    and the stage maps its boxes back from there, as the host path does (a centred mapping would
    be 140 model pixels off)."""
    lb = Letterbox.fit(960, 540, 640)
    assert lb.pad_y == 140
    path = wrap_demo(tmp_path / "v8_bgr_tl.onnx", "yolov8", 640, bgr=True, raw_pixels=True, top_left_shift=(0, 140))
    overrides = ModelOverrides(color="bgr", scale=1.0, padding="top-left", pad_value=114)
    tl_info = load_model_info(path, 640, overrides)
    assert tl_info.convention.padding == "top-left"
    host_engine = Engine.create(tl_info, CPU_CFG)
    device_engine = CudaStandIn(Engine.create(tl_info, CPU_CFG))
    try:
        host = stage_of(host_engine, tl_info, None).infer(live_frames(frames, lb))
        device = stage_of(device_engine, tl_info, device_path(SEAM, tl_info, 3)).infer(live_frames(frames, lb))
        assert device_engine.device_runs == 1
        agree(host, device, tolerance_px=4.5)
    finally:
        host_engine.close()
        device_engine.close()


class _Format:
    def __init__(self, name: str) -> None:
        self.name = name


class TenBitDeviceFrame:
    """What NVDEC hands over for a 10-bit stream (a device frame in p010): the few attributes
    `yuv_frame` reads (no GPU here to decode one)."""

    width, height, colorspace, color_range = 960, 540, 1, 1
    format = _Format("cuda")
    sw_format = _Format("p010le")


def test_a_frame_the_device_cannot_letterbox_fails_its_batch_not_the_lane(
    frames: list[av.VideoFrame], info: ModelInfo
) -> None:
    lb = Letterbox.fit(960, 540, 640)
    engine = CudaStandIn(Engine.create(info, CPU_CFG))
    try:
        stage = stage_of(engine, info, device_path(SEAM, info, 3))
        bad = [Frame("c", 0, 0, 0.0, lb, partial(scale, frames[0], lb), decoded=TenBitDeviceFrame())]
        with pytest.raises(InferenceError, match="p010le"):  # the lane logs it and counts engine_error
            stage.infer(bad)
        assert len(stage.infer(live_frames(frames, lb))) == 3  # the next batch runs
    finally:
        engine.close()
