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
    spatial: tuple[int | str, int | str] | None = None,
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
        [helper.make_tensor_value_info("images", input_dtype, [batch_dim, channels, *(spatial or (size, size))])],
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


# --- one detector, every layout: thin export wrappers around the committed demo network ------------

DEMO_MODELS = Path(__file__).resolve().parents[2] / "models"
WRAPPED_KINDS = (
    "yolov8",
    "yolov8-transposed",
    "yolov5",
    "yolox-raw",
    "yolox-decoded",
    "end2end",
    "end2end-four",
    "end2end-batch-rows",
    "segment",
)


class _Graph:
    """Nodes and constants appended around the demo graph (`onnx.helper` only)."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def const(self, value: npt.ArrayLike, dtype: type = np.float32) -> str:
        self._n += 1
        name = f"w_const{self._n}"
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(self, op_type: str, inputs: list[str], out: str | None = None, **attrs: object) -> str:
        self._n += 1
        name = out or f"w_{op_type.lower()}{self._n}"
        self.nodes.append(helper.make_node(op_type, inputs, [name], **attrs))
        return name

    def take(self, x: str, start: int, end: int, axis: int) -> str:
        return self.op(
            "Slice", [x, self.const([start], np.int64), self.const([end], np.int64), self.const([axis], np.int64)]
        )


def _pre(g: _Graph, x: str, *, bgr: bool, raw_pixels: bool, size: int, shift: tuple[int, int]) -> str:
    """From the wrapped model's input convention to the demo's (RGB, 0..1, centred letterbox)."""
    if bgr:
        x = g.op("Gather", [x, g.const([2, 1, 0], np.int64)], axis=1)
    if raw_pixels:
        x = g.op("Mul", [x, g.const(np.float32(1 / 255))])
    dx, dy = shift  # top-left content rolled to where the centred letterbox puts it
    for axis, d in ((2, dy), (3, dx)):
        if d:
            x = g.op("Concat", [g.take(x, size - d, size, axis), g.take(x, 0, size - d, axis)], axis=axis)
    return x


def _nms(g: _Graph, out: str, num_classes: int, *, conf: float, iou: float, k: int) -> dict[str, str]:
    """The daemon's own rule in the graph: best class per anchor, class-aware NMS, top K."""
    boxes = g.op("Transpose", [g.take(out, 0, 4, 1)], perm=[0, 2, 1])  # [N, A, 4] cx, cy, w, h
    to_xyxy = [[1, 0, 1, 0], [0, 1, 0, 1], [-0.5, 0, 0.5, 0], [0, -0.5, 0, 0.5]]
    xyxy = g.op("MatMul", [boxes, g.const(to_xyxy)])
    scores = g.take(out, 4, 4 + num_classes, 1)  # [N, C, A]
    best = g.op("ReduceMax", [scores, g.const([1], np.int64)], keepdims=1)
    cls = g.op("ArgMax", [scores], axis=1, keepdims=1)
    onehot = g.op("Cast", [g.op("Equal", [cls, g.const(np.arange(num_classes).reshape(1, -1, 1), np.int64)])], to=1)
    per_class = g.op("Mul", [onehot, best])
    selected = g.op(
        "NonMaxSuppression",
        [xyxy, per_class, g.const([k], np.int64), g.const([iou]), g.const([conf])],
    )
    picked = g.op("GatherND", [per_class, selected])
    mask = g.op(
        "ScatterND", [g.op("Mul", [per_class, g.const(np.float32(0))]), selected, g.op("Div", [picked, picked])]
    )
    kept = g.op("ReduceMax", [g.op("Mul", [per_class, mask]), g.const([1], np.int64)], keepdims=0)  # [N, A]
    top = g.op("TopK", [kept, g.const([k], np.int64)], axis=1)
    g.nodes[-1].output.append("w_topk_idx")
    top_boxes = g.op("GatherND", [xyxy, g.op("Unsqueeze", ["w_topk_idx", g.const([2], np.int64)])], batch_dims=1)
    cls_f = g.op("Cast", [g.op("Squeeze", [cls, g.const([1], np.int64)])], to=1)
    top_cls = g.op("GatherElements", [cls_f, "w_topk_idx"], axis=1)
    b_c_a = [g.take(selected, i, i + 1, 1) for i in range(3)]
    row_boxes = g.op("GatherND", [xyxy, g.op("Concat", [b_c_a[0], b_c_a[2]], axis=1)])
    as_f = [g.op("Cast", [b_c_a[0]], to=1), g.op("Cast", [b_c_a[1]], to=1)]
    batch_rows = g.op(
        "Concat", [as_f[0], row_boxes, as_f[1], g.op("Unsqueeze", [picked, g.const([1], np.int64)])], axis=1
    )
    return {"boxes": top_boxes, "scores": top, "classes": top_cls, "batch_rows": batch_rows}


def _post(g: _Graph, out: str, kind: str, size: int, *, conf: float, iou: float, k: int) -> dict[str, str]:
    """From the demo's [N, 4 + C, A] to the wrapped layout's outputs (name -> tensor)."""
    num_classes = len(NAMES)
    if kind == "yolov8":
        return {"output0": out}
    if kind == "segment":  # 32 mask coefficients after the classes, and a prototype output
        zeros = g.op("Mul", [g.take(out, 0, 1, 1), g.const(np.float32(0))])
        masks = g.op("Tile", [zeros, g.const([1, 32, 1], np.int64)])
        protos = g.op(
            "Tile",
            [
                g.take(g.take(g.op("Unsqueeze", [zeros, g.const([3], np.int64)]), 0, size // 4, 2), 0, 1, 1),
                g.const([1, 32, 1, size // 4], np.int64),
            ],
        )
        return {"output0": g.op("Concat", [out, masks], axis=1), "output1": protos}
    anchors_first = g.op("Transpose", [out], perm=[0, 2, 1])  # [N, A, 4 + C]
    if kind == "yolov8-transposed":
        return {"output0": anchors_first}
    if kind.startswith("end2end"):
        nms = _nms(g, out, num_classes, conf=conf, iou=iou, k=k)
        if kind == "end2end-batch-rows":
            return {"output": nms["batch_rows"]}
        if kind == "end2end-four":
            positive = g.op("Cast", [g.op("Greater", [nms["scores"], g.const(np.float32(0))])], to=TensorProto.INT32)
            num = g.op("ReduceSum", [positive, g.const([1], np.int64)], keepdims=1)
            cls_i = g.op("Cast", [nms["classes"]], to=TensorProto.INT32)
            return {"num_dets": num, "det_boxes": nms["boxes"], "det_scores": nms["scores"], "det_classes": cls_i}
        one = g.const([2], np.int64)
        parts = [nms["boxes"], g.op("Unsqueeze", [nms["scores"], one]), g.op("Unsqueeze", [nms["classes"], one])]
        if kind == "end2end-pose":  # Ultralytics pose `nms=True`: 17 x 3 keypoint values after each row
            zeros = g.op("Mul", [g.take(nms["boxes"], 0, 1, 2), g.const(np.float32(0))])
            parts.append(g.op("Tile", [zeros, g.const([1, 1, 51], np.int64)]))
        return {"output0": g.op("Concat", parts, axis=2)}
    xywh = g.take(anchors_first, 0, 4, 2)
    scores = g.take(anchors_first, 4, 4 + num_classes, 2)
    obj = g.op("Max", [g.op("ReduceMax", [scores, g.const([2], np.int64)], keepdims=1), g.const(np.float32(1e-6))])
    cls = g.op("Div", [scores, obj])  # objectness x class score == the demo's score
    if kind == "yolox-raw":
        strides = np.concatenate([np.full((size // s) ** 2, s, np.float32) for s in STRIDES]).reshape(1, -1, 1)
        cells = np.concatenate(
            [np.stack(np.divmod(np.arange((size // s) ** 2), size // s)[::-1], 1) for s in STRIDES]
        ).astype(np.float32)[None]
        stride = g.const(strides)
        xy = g.op("Sub", [g.op("Div", [g.take(xywh, 0, 2, 2), stride]), g.const(cells)])
        wh = g.op("Log", [g.op("Div", [g.take(xywh, 2, 4, 2), stride])])
        xywh = g.op("Concat", [xy, wh], axis=2)
    dense = g.op("Concat", [xywh, obj, cls], axis=2)
    if kind == "yolov5":  # 3 anchors per cell: two empty copies (objectness 0)
        empty = g.op("Mul", [dense, g.const(np.float32(0))])
        dense = g.op("Concat", [dense, empty, empty], axis=1)
    return {"output0" if kind != "yolox-raw" and kind != "yolox-decoded" else "output": dense}


def wrap_demo(
    path: Path,
    kind: str,
    size: int = 416,
    *,
    batch: int | None = None,
    bgr: bool = False,
    raw_pixels: bool = False,
    top_left_shift: tuple[int, int] = (0, 0),
    metadata: Mapping[str, str] | None = None,
    conf: float = 0.25,
    iou: float = 0.5,
    k: int = 100,
) -> Path:
    """The demo network of `models/conveyor-<size>.onnx` exported as layout `kind` (WRAPPED_KINDS).

    The wrapped model takes its own convention (BGR planes, 0..255 pixels, content at the
    top-left: the roll `top_left_shift` = (dx, dy) puts it back where the demo expects it and
    the boxes are moved back by it) and batch (`batch`: static) and gives the same detections as
    the demo in that layout. End-to-end kinds run the daemon's own rule in the graph (best class
    per anchor, class-aware NMS at `iou`, scores above `conf`, the best `k`). Metadata: the
    demo's, without `layout`, unless `metadata` is given (YOLOX exports carry none).
    """
    model = onnx.load(str(DEMO_MODELS / f"conveyor-{size}.onnx"))
    graph = model.graph
    for node in graph.node:
        node.input[:] = ["w_inner_in" if i == "images" else i for i in node.input]
        node.output[:] = ["w_inner_out" if o == "output0" else o for o in node.output]
    g = _Graph()
    inner_in = _pre(g, "images", bgr=bgr, raw_pixels=raw_pixels, size=size, shift=top_left_shift)
    pre_nodes = list(g.nodes)
    g.nodes.clear()
    pre_nodes.append(helper.make_node("Identity", [inner_in], ["w_inner_in"]))
    out = "w_inner_out"
    dx, dy = top_left_shift
    if dx or dy:
        offset = np.zeros((1, 4 + len(NAMES), 1), np.float32)
        offset[0, 0, 0], offset[0, 1, 0] = -dx, -dy
        out = g.op("Add", [out, g.const(offset)])
    outputs = _post(g, out, kind, size, conf=conf, iou=iou, k=k)
    finals = [helper.make_node("Identity", [tensor], [name]) for name, tensor in outputs.items()]
    nodes = pre_nodes + list(graph.node) + g.nodes + finals
    dim: int | str = batch if batch is not None else "batch"
    new_graph = helper.make_graph(
        nodes,
        f"beltsight_{kind}",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [dim, 3, size, size])],
        [helper.make_tensor_value_info(name, _out_type(kind, name), None) for name in outputs],
        initializer=list(graph.initializer) + g.inits,
    )
    wrapped = helper.make_model(new_graph, opset_imports=list(model.opset_import))
    wrapped.ir_version = model.ir_version
    meta = {p.key: p.value for p in model.metadata_props if p.key != "layout"} if metadata is None else metadata
    for key, value in meta.items():
        wrapped.metadata_props.append(onnx.StringStringEntryProto(key=key, value=value))
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(wrapped, str(path))
    return path


def _out_type(kind: str, name: str) -> int:
    return TensorProto.INT32 if kind == "end2end-four" and name in ("num_dets", "det_classes") else TensorProto.FLOAT
