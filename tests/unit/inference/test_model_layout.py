"""Layout recognition from output shapes and metadata, the reasons given, and clear refusals."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from daemon.__main__ import main
from daemon.config.settings import EX_CONFIG
from daemon.inference.layouts import LayoutError, ModelLayout, OutputInfo, anchor_grid
from daemon.inference.model_file import ModelError, load_model_info
from daemon.inference.postprocess import join_outputs
from daemon.inference.recognise import recognise
from daemon.ops.logging import reset_logging


@pytest.fixture(autouse=True)
def _undo_cli_logging() -> Iterator[None]:
    """`main([...])` in-process configures logging and (for `run`) installs the process-wide
    exception hooks, and returns without undoing them: undo both after each test."""
    yield
    reset_logging()


ULTRALYTICS = {"stride": "32", "task": "detect", "batch": "1", "imgsz": "[640, 640]"}


def out(name: str, *shape: int, dtype: str = "tensor(float)") -> OutputInfo:
    return OutputInfo(name, tuple(shape), tuple(shape), dtype)


def rec(
    *outputs: OutputInfo, size: int = 640, meta: dict[str, str] | None = None, names: int | None = 80, **kw: object
) -> ModelLayout:
    return recognise(outputs, size=size, strides=(8, 16, 32), meta=meta or {}, names=names, **kw)  # type: ignore[arg-type]


def test_ultralytics_yolov8_and_its_transpose() -> None:
    v8 = rec(out("output0", 1, 84, 8400), meta=ULTRALYTICS)
    assert (v8.name, v8.form, v8.num_classes, v8.rows, v8.extra) == ("yolov8", "channels-first", 80, 8400, 0)
    assert "8400 anchors" in v8.reason
    t = rec(out("output0", 1, 8400, 84), meta=ULTRALYTICS, names=None)
    assert (t.name, t.form, t.num_classes) == ("yolov8", "anchors-first", 80)


def test_yolov5_has_three_anchors_per_cell_and_objectness() -> None:
    v5 = rec(out("output0", 1, 25200, 85), meta={"stride": "32"})
    assert (v5.name, v5.num_classes, v5.rows) == ("yolov5", 80, 25200)
    assert "objectness" in v5.reason


def _yolox_probe(decoded: bool, size: int = 640) -> np.ndarray:
    rng = np.random.default_rng(0)
    cells, steps = anchor_grid(np, size, (8, 16, 32))
    raw = rng.normal(0, 0.3, (1, cells.shape[0], 85)).astype(np.float32)
    if decoded:
        raw[0, :, :2] = (raw[0, :, :2] + cells) * steps[:, None]
    return raw


@pytest.mark.parametrize(("decoded", "form"), [(False, "raw-head"), (True, "decoded")])
def test_yolox_raw_head_told_from_decoded_by_the_grid(decoded: bool, form: str) -> None:
    lay = rec(out("output", 1, 8400, 85), names=None, probe=_yolox_probe(decoded))
    assert (lay.name, lay.form, lay.num_classes) == ("yolox", form, 80)
    assert "anchor grid" in lay.reason


def test_anchor_grid_matches_yolox_demo_postprocess() -> None:
    """YOLOX demo/ONNXRuntime: meshgrid(arange(w), arange(h)) per stride, stacked (x, y), no +0.5."""
    grids, strides = [], []
    for stride in (8, 16, 32):
        n = 416 // stride
        xv, yv = np.meshgrid(np.arange(n), np.arange(n))
        grids.append(np.stack((xv, yv), 2).reshape(-1, 2))
        strides.append(np.full(n * n, stride))
    cells, steps = anchor_grid(np, 416, (8, 16, 32))
    np.testing.assert_array_equal(cells, np.concatenate(grids))
    np.testing.assert_array_equal(steps, np.concatenate(strides))


def test_end2end_forms() -> None:
    rows = rec(out("output0", 1, 300, 6), meta=ULTRALYTICS | {"end2end": "True"})
    assert (rows.name, rows.form, rows.rows, rows.extra) == ("end2end", "rows", 300, 0)
    assert rec(out("output0", 1, 300, 6), names=None).form == "rows"  # YOLOv10 without metadata
    assert rec(out("output", 1, 100, 7)).form == "batch-rows"
    assert rec(out("output", 0, 7)).form == "batch-rows"  # YOLOv7 end-to-end: [D, 7]
    assert rec(out("batchno_classid_x1y1x2y2_score", 0, 7)).form == "batch-class-rows"
    four = rec(
        out("num_dets", 1, 1, dtype="tensor(int32)"),
        out("det_boxes", 1, 100, 4),
        out("det_scores", 1, 100),
        out("det_classes", 1, 100, dtype="tensor(int32)"),
    )
    assert (four.form, four.outputs) == ("four-outputs", ("num_dets", "det_boxes", "det_scores", "det_classes"))


def test_segment_and_pose_extras_are_ignored_not_read_as_classes() -> None:
    seg = rec(out("output0", 1, 116, 8400), out("output1", 1, 32, 160, 160), meta=ULTRALYTICS | {"task": "segment"})
    assert (seg.num_classes, seg.extra) == (80, 32) and "mask" in seg.reason
    no_names = rec(out("output0", 1, 116, 8400), out("output1", 1, 32, 160, 160), names=None)
    assert (no_names.num_classes, no_names.extra) == (80, 32)
    pose = rec(out("output0", 1, 56, 8400), meta=ULTRALYTICS | {"task": "pose"}, names=1)
    assert (pose.num_classes, pose.extra) == (1, 51)
    seg_nms = rec(
        out("output0", 1, 300, 38), out("output1", 1, 32, 160, 160), meta={"task": "segment", "end2end": "True"}
    )
    assert (seg_nms.form, seg_nms.extra) == ("rows", 32)
    bare_seg_nms = rec(out("output0", 1, 300, 38), out("output1", 1, 32, 160, 160), names=None)
    assert (bare_seg_nms.form, bare_seg_nms.extra) == ("rows", 32)


REFUSED = {
    "obb": ((out("output0", 1, 20, 8400),), {"task": "obb"}, "rotated boxes"),
    "image_output": ((out("output0", 1, 3, 640, 640),), {}, "no output of rank 2 or 3"),
    "too_few_channels": ((out("output0", 1, 4, 8400),), {}, "expected [N, 4 + C, 8400]"),
    "classifier": ((out("logits", 1, 1000),), {}, "not a detector output"),
    "unrelated_outputs": ((out("boxes", 1, 1917, 4), out("scores", 1, 1917, 91)), {}, "several unrelated outputs"),
    "wrong_anchors": ((out("output0", 1, 84, 6000),), {}, "[N, 3 * 8400"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_unsupported_outputs_are_refused_with_the_shapes(case: str) -> None:
    outputs, meta, words = REFUSED[case]
    with pytest.raises(LayoutError) as err:
        rec(*outputs, meta=meta, names=None)
    message = str(err.value)
    assert words.replace("3 * 8400", "25200") in message
    if case not in ("obb",):
        assert str(list(outputs[0].shape)) in message


def test_a_configured_layout_that_does_not_fit_is_refused() -> None:
    with pytest.raises(LayoutError, match="yolov5 needs"):
        rec(out("output0", 1, 84, 8400), override="yolov5")
    with pytest.raises(LayoutError, match="not one of"):
        rec(out("output0", 1, 84, 8400), override="ssd")
    with pytest.raises(LayoutError, match="has 3 labels but the output has 80"):
        rec(out("output0", 1, 84, 8400), names=3)


def test_four_outputs_are_joined_into_rows_past_num_dets_never_scored() -> None:
    lay = rec(out("n", 2, 1), out("b", 2, 3, 4), out("s", 2, 3), out("c", 2, 3, dtype="tensor(int64)"))
    boxes = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    joined = join_outputs(np, [np.array([[1], [3]]), boxes, np.full((2, 3), 0.9, np.float32), np.ones((2, 3))], lay)
    assert joined.shape == (2, 3, 6)
    np.testing.assert_array_equal(joined[..., 4], np.array([[0.9, -1, -1], [0.9, 0.9, 0.9]], np.float32))
    np.testing.assert_array_equal(joined[..., :4], boxes)


def _classifier(path: Path, size: int = 416) -> Path:
    nodes = [
        helper.make_node("GlobalAveragePool", ["images"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"]),
        helper.make_node("MatMul", ["flat", "w"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "classifier",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        initializer=[numpy_helper.from_array(np.ones((3, 10), np.float32), "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_a_non_detector_is_refused_naming_the_file_and_shapes(tmp_path: Path) -> None:
    path = _classifier(tmp_path / "resnet-ish.onnx")
    with pytest.raises(ModelError) as err:
        load_model_info(path, 416)
    assert str(path) in str(err.value) and "'logits' is [1, 10]" in str(err.value)


def test_check_config_and_run_exit_78_on_a_non_detector(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _classifier(tmp_path / "resnet-ish.onnx")
    config = tmp_path / "b.toml"
    config.write_text(
        f'[redis]\nurl = "redis://127.0.0.1:1/0"\n\n[models.416]\npath = "{path}"\nlayout = "auto"\n\n'
        '[engine]\nproviders = ["cpu"]\n\n[[cameras]]\nid = "a"\nurl = "rtsp://127.0.0.1:1/x"\n'
    )
    assert main(["check-config", "-c", str(config)]) == EX_CONFIG
    err = capsys.readouterr().err
    assert "resnet-ish.onnx" in err and "[1, 10]" in err
    assert main(["run", "-c", str(config)]) == EX_CONFIG
    captured = capsys.readouterr()
    assert "resnet-ish.onnx" in captured.out + captured.err and "[1, 10]" in captured.out + captured.err


def test_check_config_describes_each_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    demo = Path(__file__).resolve().parents[3] / "models" / "conveyor-416.onnx"
    config = tmp_path / "c.toml"
    config.write_text(
        f'[redis]\nurl = "redis://127.0.0.1:1/0"\n\n[models]\n640 = "missing.onnx"\n\n[models.416]\npath = "{demo}"\n'
        'color = "bgr"\nnms = "class-agnostic"\n\n[[cameras]]\nid = "a"\nurl = "rtsp://127.0.0.1:1/x"\n'
    )
    assert main(["check-config", "-c", str(config)]) == 0
    err = capsys.readouterr().err
    assert "layout: yolov8 (channels-first), 4 classes" in err and "NMS class-agnostic" in err
    assert "BGR, pixel x 1/255, padding symmetric with 114, float32, dynamic batch" in err
    assert "missing.onnx): not checked here: file not found" in err


def test_dynamic_height_and_width_run_at_imgsz_or_the_configured_size(tmp_path: Path) -> None:
    """Ultralytics `dynamic=True` and YOLOv5 `--dynamic` exports leave height and width symbolic."""
    from tests.support.onnx_models import write_yolo_model  # noqa: PLC0415

    meta = {"names": "{0: 'bolt', 1: 'hex_nut', 2: 'washer', 3: 'l_bracket'}", "stride": "32", "imgsz": "[416, 416]"}
    path = write_yolo_model(tmp_path / "dyn.onnx", 416, metadata=meta, spatial=("height", "width"))
    info = load_model_info(path, 416)
    assert (info.size, info.batch, info.layout) == (416, None, "yolov8")
    bare = write_yolo_model(tmp_path / "bare.onnx", 416, metadata={}, spatial=("h", "w"))
    assert load_model_info(bare, 416).size == 416
    with pytest.raises(ModelError, match="square size"):
        load_model_info(bare)
    assert load_model_info(path).size == 416  # no size configured: imgsz
