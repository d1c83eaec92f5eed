"""Pre-processing inside the graph: a model that takes the letterboxed frame's `uint8` pixels.

`engine.preprocess = "graph"` builds every session from `with_pixel_input(model, convention)`:
the file's float input `[N, 3, S, S]` becomes a `uint8` input of the same name and shape (the
planes swscale writes, letterboxed, in the model's channel order), and a prefix makes the float
tensor the graph expects: `Cast` to the input's float type, then the convention's scale. The
scale is folded into the first convolution's weights where the graph allows it (the input feeds
exactly one `Conv`, whose weights are an initializer no other node reads): a convolution is linear
and pads with zeros, so `conv(x * s, W) = conv(x, W * s)` and the `Mul` disappears. The pixels then
cross into ONNX Runtime as a quarter of the bytes, and the per-pixel work runs inside
`session.run`, outside the interpreter lock, the same on the CPU and the CUDA providers. The
letterbox padding stays in the `uint8` batch tensor (written once per geometry, as before).

Not for TensorRT (its engine cache is keyed by the file) nor for the device path (`engine.device`
other than "cpu": its fill writes the float tensor on the GPU): there the file runs as it is.

This module imports `onnx`, which only `engine.preprocess = "graph"` needs (the config refuses
"graph" where it is not installed): the engine imports it only then.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from daemon.config.engine import EngineConfig
from daemon.inference.layouts import InputConvention
from daemon.inference.model_file import ModelInfo

PIXELS = "__beltsight_pixels"
"""The prefix's output: the float tensor the original graph reads (its input renamed)."""


def pixels_in_graph(cfg: EngineConfig) -> bool:
    """Whether sessions built from `cfg` take `uint8` pixels (see the module docstring)."""
    return cfg.pixels_in_graph


def pixel_model_bytes(info: ModelInfo) -> bytes:
    """`info`'s file with the pixel prefix, serialised for `ort.InferenceSession`."""
    model, _folded = with_pixel_input(onnx.load(str(info.path)), info.convention)
    data: bytes = model.SerializeToString()
    return data


def with_pixel_input(model: onnx.ModelProto, convention: InputConvention) -> tuple[onnx.ModelProto, bool]:
    """A copy of `model` taking `uint8` pixels; and whether the scale was folded into the first `Conv`."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inp = graph.input[0]
    float_type = inp.type.tensor_type.elem_type
    for node in graph.node:
        node.input[:] = [PIXELS if name == inp.name else name for name in node.input]
    scale = float(convention.scale)
    folded = scale != 1.0 and _fold_scale(graph, scale)
    cast_to = PIXELS if folded or scale == 1.0 else f"{PIXELS}_unscaled"
    prefix = [helper.make_node("Cast", [inp.name], [cast_to], to=float_type, name="beltsight_pixels_cast")]
    if cast_to != PIXELS:
        dtype = np.float16 if float_type == TensorProto.FLOAT16 else np.float32
        graph.initializer.append(numpy_helper.from_array(np.array(scale, dtype=dtype), f"{PIXELS}_scale"))
        prefix.append(helper.make_node("Mul", [cast_to, f"{PIXELS}_scale"], [PIXELS], name="beltsight_pixels_scale"))
    nodes = prefix + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    inp.type.tensor_type.elem_type = TensorProto.UINT8
    return out, folded


def _fold_scale(graph: onnx.GraphProto, scale: float) -> bool:
    """Scale the weights of the one `Conv` reading the input (see the module docstring); False
    where the graph does not allow it (nothing changed then)."""
    readers = [n for n in graph.node if PIXELS in n.input]
    if len(readers) != 1 or readers[0].op_type != "Conv" or list(readers[0].input).index(PIXELS) != 0:
        return False
    conv = readers[0]
    if len(conv.input) < 2:
        return False
    weight_name = conv.input[1]
    inits = {init.name: init for init in graph.initializer}
    shared = sum(weight_name in n.input for n in graph.node) > 1
    if weight_name not in inits or shared:
        return False
    weight = inits[weight_name]
    array = numpy_helper.to_array(weight)
    if array.dtype not in (np.float32, np.float16):
        return False
    scaled = (array.astype(np.float64) * scale).astype(array.dtype)
    weight.CopyFrom(numpy_helper.from_array(scaled, weight_name))
    return True
