"""The null model: a detector's inputs, outputs and metadata around a body that costs next to nothing.

    .venv/bin/python -m tools.bench.null_model [--model 640|FILE.onnx] [--boxes 7] [--out FILE.onnx]

`make_null_model(source, out)` reads a YOLOv8-layout ONNX file (`[N, 3, S, S]` in, `[N, 4 + C, A]`
out; the demo models at 416, 640 and 800) and writes a model with the same input, the same output
(name, shape, dtype) and the same metadata (names, layout, imgsz, strides, version, ...), whose
output is a few fixed, non-overlapping boxes, the same for every image. The daemon loads, checks
and recognises it like the source. It stands in for a fast GPU: `python -m tools.bench
--null-model` measures everything the daemon does around the model.

The body starts as a detector does, with a convolution reading the input (one output channel, a 1x1
kernel at stride 32, so it costs next to nothing), whose least value, multiplied by zero, is added to
the boxes: what runs before it inside the graph (a pre-processing prefix) is not pruned away as dead
code, and a prefix's scale folds into that convolution as it does into a detector's first one, so the
null model carries the same prefix as the model it stands in for.
Built with the `onnx` helper API, nothing else.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from daemon.inference.seam import load_model_info

OPSET = 18
SCORE = 0.9


def fixed_output(size: int, classes: int, anchors: int, boxes: int) -> np.ndarray:
    """`[1, 4 + classes, anchors]`: `boxes` boxes (cx, cy, w, h in input pixels) on a grid across
    the image, apart from each other, score `SCORE` in class `i % classes`; every other anchor 0."""
    out = np.zeros((1, 4 + classes, anchors), dtype=np.float32)
    cols = int(np.ceil(np.sqrt(boxes)))
    rows = int(np.ceil(boxes / cols))
    cell_w, cell_h = size / cols, size / rows
    for i in range(boxes):
        r, c = divmod(i, cols)
        anchor = (i * anchors) // boxes  # spread over the anchors, distinct
        out[0, :4, anchor] = ((c + 0.5) * cell_w, (r + 0.5) * cell_h, 0.4 * cell_w, 0.4 * cell_h)
        out[0, 4 + i % classes, anchor] = SCORE
    return out


def null_model(source: onnx.ModelProto, size: int, classes: int, anchors: int, boxes: int) -> onnx.ModelProto:
    """The null model of `source` (see the module docstring)."""
    graph = source.graph
    inp, out = graph.input[0], graph.output[0]
    dtype = np.float16 if inp.type.tensor_type.elem_type == TensorProto.FLOAT16 else np.float32
    inits = [
        numpy_helper.from_array(fixed_output(size, classes, anchors, boxes), "fixed_boxes"),
        numpy_helper.from_array(np.full((1, 3, 1, 1), 1 / 3, dtype=dtype), "stem_weight"),
        numpy_helper.from_array(np.array([0, -1], dtype=np.int64), "flat_shape"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
        numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2"),
        numpy_helper.from_array(np.zeros((), dtype=np.float32), "zero"),
    ]
    nodes = [
        helper.make_node("Conv", [inp.name, "stem_weight"], ["stem"], kernel_shape=[1, 1], strides=[32, 32]),
        helper.make_node("Reshape", ["stem", "flat_shape"], ["flat"]),
        helper.make_node("ReduceMin", ["flat", "axis1"], ["least"], keepdims=1),  # [N, 1]
        helper.make_node("Cast", ["least"], ["least_f32"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["least_f32", "axis2"], ["least_3d"]),  # [N, 1, 1]
        helper.make_node("Mul", ["least_3d", "zero"], ["nothing"]),
        helper.make_node("Add", ["fixed_boxes", "nothing"], [out.name]),  # [N, 4 + C, A]
    ]
    body = helper.make_graph(nodes, f"null-{size}", [inp], [out], initializer=inits)
    model = helper.make_model(body, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tools.bench")
    model.ir_version = min(source.ir_version, model.ir_version) or model.ir_version
    for prop in source.metadata_props:
        model.metadata_props.add(key=prop.key, value=prop.value)
    onnx.checker.check_model(model)
    return model


def make_null_model(source: Path, out: Path, boxes: int = 7) -> Path:
    """Write the null model of `source` to `out` (see the module docstring); returns `out`."""
    info = load_model_info(source)
    if info.decoding.name != "yolov8" or info.batch is not None:
        raise ValueError(f"{source}: the null model needs a yolov8 layout with a dynamic batch, found {info.layout}")
    model = null_model(onnx.load(str(source)), info.size, info.num_classes, info.anchors, boxes)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    onnx.save(model, str(tmp))
    tmp.replace(out)
    return out


def main() -> None:
    from tools.kit.daemon_config import MODELS  # noqa: PLC0415

    p = argparse.ArgumentParser(description="Write the null model of a detector (see tools/bench/null_model.py).")
    p.add_argument("--model", default="640", help="416/640/800 (the demo model) or an ONNX file")
    p.add_argument("--boxes", type=int, default=7)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    source = MODELS[int(args.model)] if args.model.isdigit() else Path(args.model)
    out = args.out or source.with_name(f"null-{source.stem}.onnx")
    print(make_null_model(source, out, args.boxes))


if __name__ == "__main__":
    main()
