"""Small YOLOv8-layout ONNX models built with the `onnx` package (dev-only), for tests.

`write_yolo_model` writes a graph with the contract's input/output and metadata whose output
is a fixed template plus the mean of each image times `image_gain` on one score (anchor 0,
class 0), so tests can tell the images of a batch apart. Every knob that a bad model gets
wrong (input channels/dtype/size, output layout/anchors, names) is a parameter.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

STRIDES = (8, 16, 32)
NAMES = ("bolt", "hex_nut", "washer", "l_bracket")


def anchors_for(size: int, strides: tuple[int, ...] = STRIDES) -> int:
    return sum((size // s) ** 2 for s in strides)


def template_output(size: int, num_classes: int = len(NAMES)) -> npt.NDArray[np.float32]:
    """A [1, 4 + C, A] output with all scores zero and small valid boxes."""
    anchors = anchors_for(size)
    out = np.zeros((1, 4 + num_classes, anchors), dtype=np.float32)
    out[0, 0:2, :] = size / 2
    out[0, 2:4, :] = 4.0
    return out


def default_metadata(size: int, names: tuple[str, ...] = NAMES) -> dict[str, str]:
    return {
        "names": json.dumps(list(names)),
        "layout": "yolov8",
        "imgsz": json.dumps([size, size]),
        "strides": json.dumps(list(STRIDES)),
        "version": "0.0.1-test",
        "description": "test model",
        "pad_value": "114",
    }


def write_yolo_model(
    path: Path,
    size: int = 640,
    *,
    template: npt.NDArray[np.float32] | None = None,
    metadata: Mapping[str, str] | None = None,
    channels: int = 3,
    input_dtype: int = TensorProto.FLOAT,
    batch_dim: int | str = "batch",
    transposed: bool = False,
    image_gain: float = 1.0,
) -> Path:
    """Write a model: output = template (+ image mean x gain at [:, 4, 0]), optionally transposed."""
    tmpl = template_output(size) if template is None else template.astype(np.float32)
    gain = np.zeros_like(tmpl)
    gain[0, 4, 0] = image_gain
    nodes = []
    images = "images"
    if input_dtype != TensorProto.FLOAT:
        nodes.append(helper.make_node("Cast", ["images"], ["images_f"], to=TensorProto.FLOAT))
        images = "images_f"
    nodes += [
        helper.make_node("ReduceMean", [images], ["mean4"], axes=[1, 2, 3], keepdims=1),
        helper.make_node("Reshape", ["mean4", "shape3"], ["mean3"]),
        helper.make_node("Mul", ["mean3", "gain"], ["scaled"]),
        helper.make_node("Add", ["scaled", "template"], ["output0" if not transposed else "raw"]),
    ]
    rows, anchors = tmpl.shape[1], tmpl.shape[2]
    out_shape: list[int | str] = [batch_dim, rows, anchors]
    if transposed:
        nodes.append(helper.make_node("Transpose", ["raw"], ["output0"], perm=[0, 2, 1]))
        out_shape = [batch_dim, anchors, rows]
    graph = helper.make_graph(
        nodes,
        "yolo_stub",
        [helper.make_tensor_value_info("images", input_dtype, [batch_dim, channels, size, size])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, out_shape)],
        initializer=[
            numpy_helper.from_array(tmpl, "template"),
            numpy_helper.from_array(gain, "gain"),
            numpy_helper.from_array(np.array([-1, 1, 1], dtype=np.int64), "shape3"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    meta = default_metadata(size) if metadata is None else metadata
    for key, value in meta.items():
        model.metadata_props.append(onnx.StringStringEntryProto(key=key, value=value))
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path
