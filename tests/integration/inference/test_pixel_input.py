"""`engine.preprocess = "graph"`: the session takes uint8 pixels, the graph casts and scales them.

Against the host path on the same pixels (real ONNX Runtime, the committed demo models and the
parity file's images): the same outputs, the scale folded into the first convolution where the
graph allows, and the same detections through a whole `InferenceStage`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort
import pytest

from daemon.config.engine import EngineConfig
from daemon.core.frames import Frame, Letterbox
from daemon.core.metrics import Metrics
from daemon.inference.engine import Engine
from daemon.inference.model_file import load_model_info
from daemon.inference.pixel_input import pixels_in_graph, with_pixel_input
from daemon.inference.stage import BatchTensor, InferenceStage, PostprocessConfig

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "models"
HOST = EngineConfig(providers=["cpu"], max_batch=2, worker_batch=2, intra_op_threads=1)
GRAPH = HOST.model_copy(update={"preprocess": "graph"})


def parity_pixels() -> npt.NDArray[np.uint8]:
    """The parity file's two 416 images as the 8-bit pixels the daemon would hand over."""
    x = np.load(MODELS / "conveyor-parity.npz")["input"]
    pixels: npt.NDArray[np.uint8] = np.clip(np.rint(x * 255), 0, 255).astype(np.uint8)
    return pixels


def session(model: onnx.ModelProto | Path) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    source = str(model) if isinstance(model, Path) else model.SerializeToString()
    return ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])


def test_the_prefix_gives_the_host_paths_outputs_with_the_scale_folded_into_the_first_conv() -> None:
    path = MODELS / "conveyor-416.onnx"
    info = load_model_info(path)
    pixels = parity_pixels()
    prefixed, folded = with_pixel_input(onnx.load(str(path)), info.convention)
    assert folded
    assert [n.op_type for n in prefixed.graph.node[:2]] == ["Cast", "Conv"]  # no Mul left
    host = session(path).run(None, {"images": pixels.astype(np.float32) * np.float32(1 / 255)})[0]
    graph = session(prefixed).run(None, {"images": pixels})[0]
    np.testing.assert_allclose(graph[:, :4], host[:, :4], atol=1e-3 * info.size, rtol=0)  # pixels
    np.testing.assert_allclose(graph[:, 4:], host[:, 4:], atol=1e-3, rtol=0)  # scores


def test_a_graph_that_does_not_allow_the_fold_gets_a_cast_and_a_mul() -> None:
    path = MODELS / "conveyor-640-int8.onnx"
    info = load_model_info(path)
    prefixed, folded = with_pixel_input(onnx.load(str(path)), info.convention)
    assert not folded
    assert [n.op_type for n in prefixed.graph.node[:2]] == ["Cast", "Mul"]
    pixels = np.random.default_rng(3).integers(0, 256, (1, 3, info.size, info.size), dtype=np.uint8)
    host = session(path).run(None, {"images": pixels.astype(np.float32) * np.float32(1 / 255)})[0]
    np.testing.assert_allclose(session(prefixed).run(None, {"images": pixels})[0], host, atol=1e-3, rtol=0)


def test_graph_preprocess_applies_on_the_host_path_only() -> None:
    assert pixels_in_graph(GRAPH) and not pixels_in_graph(HOST)
    assert not pixels_in_graph(GRAPH.model_copy(update={"device": "cuda"}))
    assert not pixels_in_graph(GRAPH.model_copy(update={"providers": ["tensorrt", "cuda", "cpu"]}))


def test_an_engine_built_for_pixels_takes_uint8_and_still_accepts_a_float_batch() -> None:
    info = load_model_info(MODELS / "conveyor-416.onnx")
    pixels = parity_pixels()
    host, graph = Engine.create(info, HOST), Engine.create(info, GRAPH)
    try:
        assert graph.pixels and not host.pixels
        want = host.run(pixels.astype(np.float32) * np.float32(1 / 255))
        np.testing.assert_allclose(graph.run(pixels), want, atol=1e-3 * info.size, rtol=0)
        np.testing.assert_allclose(graph.run(pixels / np.float32(255)), want, atol=1e-3 * info.size, rtol=0)
        with pytest.raises(ValueError, match="uint8"):
            host.run(pixels)
    finally:
        host.close()
        graph.close()


def _frames(pixels: npt.NDArray[np.uint8], lb: Letterbox) -> list[Frame]:
    """The parity images' content regions as the planes swscale would hand over, per camera."""
    rows, cols = slice(lb.pad_y, lb.pad_y + lb.new_h), slice(lb.pad_x, lb.pad_x + lb.new_w)
    return [
        Frame(f"cam{i}", i, 0, 0.0, lb, tuple(image[c, rows, cols] for c in range(3))) for i, image in enumerate(pixels)
    ]


def test_the_pixel_batch_tensor_holds_the_host_tensors_pixels() -> None:
    lb = Letterbox.fit(416, 312, 416)
    frames = _frames(parity_pixels(), lb)
    host = BatchTensor(2, 416).fill(frames)
    pixels = BatchTensor(2, 416, pixels=True).fill(frames)
    assert pixels.dtype == np.uint8
    np.testing.assert_allclose(pixels.astype(np.float32) * np.float32(1 / 255), host, rtol=1e-6, atol=0)  # 1 ulp


def test_a_stage_on_pixels_finds_the_host_stages_detections() -> None:
    info = load_model_info(MODELS / "conveyor-416.onnx")
    lb = Letterbox.fit(416, 312, 416)
    frames = _frames(parity_pixels(), lb)
    post = PostprocessConfig(0.25, 0.5, 300)
    results = []
    for cfg in (HOST, GRAPH):
        engine = Engine.create(info, cfg)
        try:
            stage = InferenceStage(
                info, engine, max_batch=2, post=post, rules={}, metrics=Metrics(), pixels=pixels_in_graph(cfg)
            )
            results.append(stage.infer(frames))
        finally:
            engine.close()
    host, graph = results
    assert sum(len(r.detections) for r in host) > 0
    for a, b in zip(host, graph, strict=True):
        assert [d.label for d in a.detections] == [d.label for d in b.detections]
        for da, db in zip(a.detections, b.detections, strict=True):
            assert abs(da.score - db.score) <= 1e-3
            np.testing.assert_allclose(da.box, db.box, atol=1e-3 * info.size)
