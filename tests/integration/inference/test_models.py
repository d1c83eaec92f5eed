"""The committed demo detectors (models/conveyor-{416,640,800}.onnx): ONNX contract, parity, accuracy.

Needs onnxruntime, PyAV and faster-coco-eval, not torch.  The accuracy tests render a short clip with
``tools.kit.synth.video.render_video``, decode the MP4 frame by frame, letterbox each frame to the model size, and score
the detections (mapped back to camera pixels) against the clip's ground truth with ``tools.model.coco_eval``.
"""

from __future__ import annotations

import json
from pathlib import Path

import av
import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from daemon.inference.model_file import load_model_info
from tools.kit.synth.parts import NAMES
from tools.kit.synth.video import render_video
from tools.model.coco_eval import evaluate
from tools.model.eval import OnnxDetector, compare_models, letterbox

ort = pytest.importorskip("onnxruntime")

MODELS = Path(__file__).resolve().parents[3] / "models"
SIZES = (416, 640, 800)
META_KEYS = {"names", "layout", "imgsz", "strides", "version", "description", "task", "pad_value"}


def _anchors(s: int) -> int:
    return sum((s // st) ** 2 for st in (8, 16, 32))


def _session(s: int):  # type: ignore[no-untyped-def]
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    return ort.InferenceSession(str(MODELS / f"conveyor-{s}.onnx"), so, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("s", SIZES)
def test_onnx_contract(s: int) -> None:
    sess = _session(s)
    (inp,) = sess.get_inputs()
    (out,) = sess.get_outputs()
    assert inp.name == "images" and inp.type == "tensor(float)"
    assert isinstance(inp.shape[0], str) and inp.shape[1:] == [3, s, s]
    assert out.name == "output0" and out.type == "tensor(float)"
    assert isinstance(out.shape[0], str) and out.shape[1:] == [8, _anchors(s)]
    meta = sess.get_modelmeta().custom_metadata_map
    assert set(meta) >= META_KEYS
    assert json.loads(meta["names"]) == ["bolt", "hex_nut", "washer", "l_bracket"] == NAMES
    assert meta["layout"] == "yolov8" and meta["task"] == "detect" and meta["pad_value"] == "114"
    assert json.loads(meta["imgsz"]) == [s, s] and json.loads(meta["strides"]) == [8, 16, 32]
    y = sess.run(None, {"images": np.full((2, 3, s, s), 114 / 255, dtype=np.float32)})[0]
    assert y.shape == (2, 8, _anchors(s)) and y.dtype == np.float32
    assert np.all((y[:, 4:] >= 0) & (y[:, 4:] <= 1))
    # an empty (all-pad) frame has no confident detection
    assert y[:, 4:].max() < 0.25
    # anchor layout: stride-8 grid first, row-major; predicted centres lie near their anchor cells
    cx, cy = y[0, 0, : (s // 8) ** 2], y[0, 1, : (s // 8) ** 2]
    gx = (np.arange((s // 8) ** 2) % (s // 8) + 0.5) * 8
    gy = (np.arange((s // 8) ** 2) // (s // 8) + 0.5) * 8
    assert np.abs(cx - gx).max() < 8 * 8 and np.abs(cy - gy).max() < 8 * 8


def test_onnx_matches_pytorch() -> None:
    ref = np.load(MODELS / "conveyor-parity.npz")
    x, expected = ref["input"], ref["output"]
    s = int(x.shape[-1])
    y = _session(s).run(None, {"images": x})[0]
    assert y.shape == expected.shape
    np.testing.assert_allclose(y[:, :4], expected[:, :4], atol=1e-3 * s, rtol=0)  # pixels
    np.testing.assert_allclose(y[:, 4:], expected[:, 4:], atol=1e-3, rtol=0)  # scores


def test_same_weights_in_every_size() -> None:
    def weights(s: int) -> dict[int, float]:
        m = onnx.load(str(MODELS / f"conveyor-{s}.onnx"))
        return {
            int(np.prod(t.dims)): float(np.abs(numpy_helper.to_array(t)).sum())
            for t in m.graph.initializer
            if len(t.dims) == 4
        }

    w = [weights(s) for s in SIZES]
    assert w[0] and w[0] == w[1] == w[2]


def _clip_map(tmp_path: Path, width: int, height: int, model_size: int, seed: int) -> dict:
    mp4, gt_json = tmp_path / "clip.mp4", tmp_path / "clip.json"
    render_video(mp4, gt_json, width, height, fps=10, seconds=2.5, seed=seed)
    gt = json.loads(gt_json.read_text())
    det = OnnxDetector(MODELS / f"conveyor-{model_size}.onnx")
    assert det.size == model_size
    gts, dets = {}, {}
    with av.open(str(mp4)) as c:
        for i, frame in enumerate(c.decode(c.streams.video[0])):
            img = frame.to_ndarray(format="rgb24")
            assert img.shape == (height, width, 3)
            gts[i] = [(o["cls"], o["box"]) for o in gt["annotations"][str(i)]]
            dets[i] = det(img)
    assert len(gts) == gt["frames"]
    res = evaluate(gts, dets, NAMES, width, height)
    assert res["n_gt"] >= 20, "clip too empty to be a meaningful test"
    return res


@pytest.mark.slow
@pytest.mark.parametrize(("width", "height", "model_size", "seed"), [(1280, 720, 800, 2024), (640, 480, 640, 7)])
def test_clip_accuracy(tmp_path: Path, width: int, height: int, model_size: int, seed: int) -> None:
    res = _clip_map(tmp_path, width, height, model_size, seed)
    assert res["mAP50"] >= 0.9, res


def test_letterbox_geometry() -> None:
    frame = np.zeros((720, 1280, 3), dtype=np.uint8)
    frame[96:208, 320:512] = 255  # -> x 200..320, y 60..130 (+175 pad) at r = 0.625
    x, r, (left, top) = letterbox(frame, 800)
    assert x.shape == (3, 800, 800) and x.dtype == np.float32
    assert r == pytest.approx(0.625) and (left, top) == (0, 175)
    assert np.allclose(x[:, :175], 114 / 255) and np.allclose(x[:, -175:], 114 / 255)
    ys, xs = np.nonzero(x[0] > 0.5)
    got = np.array([xs.min(), xs.max() + 1, ys.min(), ys.max() + 1])
    assert np.abs(got - np.array([200, 320, 60 + 175, 130 + 175])).max() <= 1, got


def test_fp16_and_int8_variants_hold_accuracy_and_load_in_the_daemon() -> None:
    """The committed FP16 model within 0.01 mAP50 of FP32, INT8 within 0.02, on the same held-out frames."""
    fp32, fp16, int8 = (MODELS / f"conveyor-640{suffix}.onnx" for suffix in ("", "-fp16", "-int8"))
    for path in (fp16, int8):
        info = load_model_info(path, 640)
        assert (info.layout, info.names, info.convention.dtype) == ("yolov8", tuple(NAMES), "float32")
    base, half, quant = compare_models([fp32, fp16, int8], count=24, seed=12_345_678)
    assert base["mAP50"] >= 0.9
    assert abs(half["mAP50"] - base["mAP50"]) <= 0.01, (half, base)
    assert base["mAP50"] - quant["mAP50"] <= 0.02, (quant, base)
