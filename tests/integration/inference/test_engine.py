"""Model files, sessions and providers with the real ONNX Runtime (no mocks).

The models are small graphs written by `tests/support/onnx_models.py`; the demo models in `models/`
are used too when they are present. This machine has no CUDA, so asking for CUDA is the real
"ORT silently gave us the CPU" path.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import structlog
from onnx import TensorProto

from daemon.config.engine import EngineConfig
from daemon.core.frames import Frame, Letterbox
from daemon.core.metrics import Metrics
from daemon.inference.engine import Engine, EngineFactory, InferenceError
from daemon.inference.model_file import ModelError, ModelInfo, load_model_info
from daemon.inference.postprocess import decode_batch, to_detections
from daemon.inference.providers import ProviderError
from daemon.inference.stage import InferenceStage, PostprocessConfig
from daemon.ops.doctor.report import doctor_report
from tests.support.onnx_models import NAMES, anchors_for, default_metadata, template_output, write_yolo_model

SIZE = 416
ANCHORS = anchors_for(SIZE)
REPO = Path(__file__).resolve().parents[3]
DEMO_640 = REPO / "models" / "conveyor-640.onnx"

CPU = EngineConfig(providers=["cpu"], max_batch=4, worker_batch=4, intra_op_threads=1)


def cuda_was_used(cfg: EngineConfig) -> bool:
    return "CUDAExecutionProvider" in cfg.providers


@pytest.fixture
def good_model(tmp_path: Path) -> Path:
    template = template_output(SIZE)
    template[0, :4, 10] = (100, 120, 40, 60)  # one bolt at (80, 90)-(120, 150), score 0.8
    template[0, 4, 10] = 0.8
    return write_yolo_model(tmp_path / "good.onnx", SIZE, template=template)


def test_load_model_info_reads_the_contract(good_model: Path) -> None:
    info = load_model_info(good_model, expected_size=SIZE)
    assert (info.size, info.num_classes, info.anchors, info.strides) == (SIZE, 4, ANCHORS, (8, 16, 32))
    assert (info.input_name, info.output_name, info.layout, info.batch) == ("images", "output0", "yolov8", None)
    assert info.names == NAMES
    assert info.name == "good@0.0.1-test"
    assert info.path == good_model


def test_an_ultralytics_style_export_is_accepted(tmp_path: Path) -> None:
    meta = {"names": "{0: 'bolt', 1: 'hex_nut', 2: 'washer', 3: 'l_bracket'}", "stride": "32", "imgsz": "[416, 416]"}
    path = write_yolo_model(tmp_path / "yolov8n.onnx", SIZE, metadata=meta, batch_dim=1)
    info = load_model_info(path)
    assert (info.names, info.strides, info.layout, info.batch, info.name) == (
        NAMES,
        (8, 16, 32),
        "yolov8",
        1,
        "yolov8n",
    )


def _meta(**changes: str | None) -> dict[str, str]:
    meta = default_metadata(SIZE)
    for key, value in changes.items():
        if value is None:
            meta.pop(key)
        else:
            meta[key] = value
    return meta


BAD_MODELS: dict[str, tuple[Callable[[Path], object], str]] = {
    "missing": (lambda p: None, "file not found"),
    "directory": (lambda p: p.mkdir(), "is a directory"),
    "empty": (lambda p: p.write_bytes(b""), "file is empty"),
    "garbage": (lambda p: p.write_bytes(os.urandom(256)), "not a loadable ONNX model"),
    "one_channel": (lambda p: write_yolo_model(p, SIZE, channels=1), "expected [N, 3, S, S]"),
    "uint8_input": (lambda p: write_yolo_model(p, SIZE, input_dtype=TensorProto.UINT8), "expected float32"),
    "other_size": (lambda p: write_yolo_model(p, 640), "input is 640x640 but the file is configured as the 416"),
    "wrong_anchors": (
        lambda p: write_yolo_model(p, SIZE, template=np.zeros((1, 8, 1000), np.float32)),
        f"expected [N, 4 + C, {ANCHORS}]",
    ),
    "names_count": (
        lambda p: write_yolo_model(p, SIZE, metadata=_meta(names=json.dumps(["a", "b", "c"]))),
        "'names' has 3 labels but the output has 4 classes",
    ),
    "names_garbage": (lambda p: write_yolo_model(p, SIZE, metadata=_meta(names="bolt, nut")), "not a list of labels"),
    "layout": (lambda p: write_yolo_model(p, SIZE, metadata=_meta(layout="yolov5")), "'layout' is 'yolov5'"),
    "imgsz": (lambda p: write_yolo_model(p, SIZE, metadata=_meta(imgsz="[640, 640]")), "'imgsz' is [640, 640]"),
    "strides": (lambda p: write_yolo_model(p, SIZE, metadata=_meta(strides="8,16")), "'strides' must be"),
}


@pytest.mark.parametrize("kind", sorted(BAD_MODELS))
def test_bad_models_name_the_file_and_the_problem(tmp_path: Path, kind: str) -> None:
    make, problem = BAD_MODELS[kind]
    path = tmp_path / f"{kind}.onnx"
    make(path)
    with pytest.raises(ModelError) as err:
        load_model_info(path, expected_size=SIZE)
    assert err.value.path == path
    assert str(path) in str(err.value)
    assert problem in err.value.what


_LOAD_AND_SAY = """
import sys
from daemon.inference.model_file import ModelError, load_model_info
try:
    load_model_info(sys.argv[1])
except ModelError as exc:
    print("ModelError:", exc)
else:
    print("read it")
"""


def test_unreadable_model_says_permission_denied(good_model: Path) -> None:
    good_model.chmod(0)
    if os.geteuid() != 0:
        with pytest.raises(ModelError, match="permission denied"):
            load_model_info(good_model)
        return
    # root reads files regardless of permissions: the same load in a root process without the
    # capabilities that override them (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), as any other user
    drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]
    done = subprocess.run(
        [*drop, sys.executable, "-c", _LOAD_AND_SAY, str(good_model)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ModelError:") and "permission denied" in done.stdout, done.stdout


def test_cpu_engine_warms_up_and_runs_a_batch(good_model: Path) -> None:
    info = load_model_info(good_model, SIZE)
    engine = Engine.create(info, CPU)
    assert engine.providers == ("CPUExecutionProvider",)
    assert not engine.on_cuda and engine.max_batch == 4
    assert engine.warmup_s is not None and engine.warmup_s > 0
    batch = np.stack([np.full((3, SIZE, SIZE), v, np.float32) for v in (0.0, 0.25, 0.5)])
    out = engine.run(batch)
    assert out.shape == (3, 8, ANCHORS) and out.dtype == np.float32
    np.testing.assert_allclose(out[:, 4, 0], [0.0, 0.25, 0.5], atol=1e-6)  # image order is kept
    rows = decode_batch(np, out, conf_threshold=0.2, iou_threshold=0.5, max_det=10, layout=info.decoding)
    assert [len(r) for r in rows] == [1, 2, 2]
    np.testing.assert_allclose(rows[0][0], [80, 90, 120, 150, 0.8, 0], atol=1e-5)
    engine.close()
    with pytest.raises(InferenceError, match="closed"):
        engine.run(batch)


def test_run_rejects_batches_of_the_wrong_shape(good_model: Path) -> None:
    engine = Engine.create(load_model_info(good_model), EngineConfig(providers=["cpu"], max_batch=2, worker_batch=2))
    with pytest.raises(ValueError, match="float32"):
        engine.run(np.zeros((1, 3, 640, 640), np.float32))
    with pytest.raises(ValueError, match="float32"):
        engine.run(np.zeros((1, 3, SIZE, SIZE), np.float64))
    with pytest.raises(ValueError, match=r"1\.\.2"):
        engine.run(np.zeros((3, 3, SIZE, SIZE), np.float32))


def test_a_failing_session_run_is_an_inference_error(good_model: Path) -> None:
    info = dataclasses.replace(load_model_info(good_model), input_name="not_there")
    with pytest.raises(InferenceError, match=r"good@0\.0\.1-test on CPUExecutionProvider"):
        Engine.create(info, CPU)


def test_on_the_cpu_the_session_is_sized_for_the_worker_batch_not_max_batch(good_model: Path) -> None:
    """Auto `worker_batch` is 1 on the CPU: the session warms up (and its arena grows) for the
    batch it will run, not for an 8-frame batch it never sees."""
    engine = Engine.create(load_model_info(good_model, SIZE), EngineConfig(providers=["cpu"], max_batch=8))
    assert engine.max_batch == 1
    with pytest.raises(ValueError, match=r"1\.\.1"):
        engine.run(np.zeros((2, 3, SIZE, SIZE), np.float32))


def test_a_fixed_batch_model_limits_max_batch(tmp_path: Path) -> None:
    path = write_yolo_model(tmp_path / "fixed.onnx", SIZE, batch_dim=1)
    engine = Engine.create(load_model_info(path), CPU)
    assert engine.max_batch == 1


def test_cuda_first_without_fallback_raises_provider_error(good_model: Path) -> None:
    cfg = EngineConfig(providers=["cuda", "cpu"], allow_fallback=False, max_batch=1)
    try:
        engine = Engine.create(load_model_info(good_model), cfg)
    except ProviderError as exc:
        message = str(exc)
    else:
        assert engine.on_cuda
        pytest.skip("CUDA works on this host")
    assert "CUDAExecutionProvider" in message and "got ['CPUExecutionProvider']" in message
    assert "CUDA 13" in message and 'engine.providers = ["cpu"]' in message


def test_cuda_first_with_fallback_logs_an_error_and_serves_on_cpu(good_model: Path) -> None:
    cfg = EngineConfig(providers=["cuda", "cpu"], allow_fallback=True, max_batch=1)
    with structlog.testing.capture_logs() as logs:
        engine = Engine.create(load_model_info(good_model), cfg)
    if engine.on_cuda:
        pytest.skip("CUDA works on this host")
    assert engine.providers == ("CPUExecutionProvider",)
    fallback = [e for e in logs if e["event"] == "provider_fallback"]
    assert len(fallback) == 1 and fallback[0]["log_level"] == "error"
    assert fallback[0]["got"] == ["CPUExecutionProvider"]
    assert engine.run(np.zeros((1, 3, SIZE, SIZE), np.float32)).shape == (1, 8, ANCHORS)


def test_factory_builds_cpu_engines_and_counts_them(good_model: Path) -> None:
    metrics = Metrics()
    factory = EngineFactory(EngineConfig(providers=["cuda", "cpu"], max_batch=2), metrics)
    info = load_model_info(good_model)
    engine = factory.build(info, placement="cpu", reason="fallback")
    assert engine.providers == ("CPUExecutionProvider",)
    count = metrics.registry.get_sample_value(
        "beltsight_session_builds_total", {"model": str(SIZE), "reason": "fallback"}
    )
    assert count == 1.0


def test_doctor_is_not_ok_when_cuda_is_configured_but_not_used(good_model: Path, tmp_path: Path) -> None:
    cfg = EngineConfig(providers=["cuda", "cpu"], max_batch=1)
    report = doctor_report(cfg, {SIZE: good_model})
    if report.models[0].providers[0] == "CUDAExecutionProvider":
        pytest.skip("CUDA works on this host")
    assert not report.ok
    (check,) = report.models
    assert (check.ok, check.providers, check.name) == (False, ("CPUExecutionProvider",), "good@0.0.1-test")
    assert check.problem is not None and "CUDAExecutionProvider" in check.problem
    assert check.warmup_ms is not None and "CUDAExecutionProvider" in report.available_providers
    assert report.lines()[-1].startswith("result: NOT OK")
    assert report.as_dict()["models"][0]["size"] == SIZE

    cpu_report = doctor_report(CPU, {SIZE: good_model, 640: tmp_path / "absent.onnx"})
    assert [m.ok for m in cpu_report.models] == [True, False]
    assert cpu_report.models[1].problem == "file not found" and not cpu_report.ok
    assert doctor_report(CPU, {SIZE: good_model}).ok


# --- the demo model, when it has been trained and committed --------------------------------------


@pytest.mark.skipif(not DEMO_640.exists(), reason="models/conveyor-640.onnx not present")
def test_demo_models_load_and_match_their_parity_outputs() -> None:
    for size in (416, 640, 800):
        path = REPO / "models" / f"conveyor-{size}.onnx"
        if path.exists():
            info = load_model_info(path, expected_size=size)
            assert (info.names, info.anchors) == (NAMES, anchors_for(size))
    parity_file = REPO / "models" / "conveyor-parity.npz"
    if not parity_file.exists():
        return
    parity = np.load(parity_file)
    size = int(parity["imgsz"])
    engine = Engine.create(load_model_info(REPO / "models" / f"conveyor-{size}.onnx", size), CPU)
    np.testing.assert_allclose(engine.run(parity["input"]), parity["output"], atol=1e-3)


@pytest.mark.skipif(not DEMO_640.exists(), reason="models/conveyor-640.onnx not present")
def test_demo_model_finds_parts_in_a_rendered_scene() -> None:
    synth = pytest.importorskip("tools.kit.synth.scene")
    info: ModelInfo = load_model_info(DEMO_640, expected_size=640)
    letterbox = Letterbox.fit(640, 480, 640)  # scale 1: the frame is placed as is, 80 px pad above/below
    batch = np.full((2, 3, 640, 640), 114 / 255, np.float32)
    scenes = [synth.render_image(seed, 640, 480) for seed in (2, 6)]
    for i, (image, _) in enumerate(scenes):
        batch[i, :, letterbox.pad_y : letterbox.pad_y + 480, :] = image.transpose(2, 0, 1) / 255
    engine = Engine.create(info, EngineConfig(providers=["cpu"], max_batch=2, worker_batch=2))
    output = engine.run(batch)
    if output[:, 4:].max() < 0.05:
        pytest.skip(f"the demo model in models/ looks untrained (max score {output[:, 4:].max():.4f})")
    all_rows = decode_batch(np, output, conf_threshold=0.25, iou_threshold=0.5, max_det=300, layout=info.decoding)
    for (_, labels), rows in zip(scenes, all_rows, strict=True):
        dets = to_detections(rows, letterbox, info.names, conf_threshold=0.25)
        found = sum(any(d.cls == gt["cls"] and _iou(d.box, gt["box"]) > 0.5 for d in dets) for gt in labels)
        assert found >= 0.7 * len(labels), (found, labels, dets)


def _iou(a: tuple[float, ...], b: list[float]) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def test_stage_counts_the_inference_threads_cpu_time_next_to_its_wall_time(good_model: Path) -> None:
    """`beltsight_inference_cpu_seconds_total` is the CPU of the thread that ran session.run: more
    than nothing once batches ran, never more than their wall time (it is one thread's clock, not
    the process's, which ORT's own pool threads would push past the wall time)."""
    metrics = Metrics()
    info = load_model_info(good_model, SIZE)
    engine = Engine.create(info, EngineConfig(providers=["cpu"], max_batch=2, worker_batch=2))
    stage = InferenceStage(info, engine, max_batch=2, post=PostprocessConfig(0.25, 0.5, 10), rules={}, metrics=metrics)
    lb = Letterbox.fit(SIZE, SIZE, SIZE)
    planes = np.zeros((3, SIZE, SIZE), np.uint8)
    for seq in range(5):
        stage.infer([Frame("cam", seq, 0, 0.0, lb, planes), Frame("cam2", seq, 0, 0.0, lb, planes)])
    engine.close()

    def value(name: str) -> float:
        got = metrics.registry.get_sample_value(name, {"model": str(SIZE)})
        assert got is not None, name
        return got

    assert value("beltsight_inference_seconds_count") == 5
    cpu, wall = value("beltsight_inference_cpu_seconds_total"), value("beltsight_inference_seconds_sum")
    assert 0 < cpu <= wall * 1.01 + 1e-4, (cpu, wall)
