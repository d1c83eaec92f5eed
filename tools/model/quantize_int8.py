"""Quantize an ONNX detector to INT8 (ONNX Runtime static quantization, QDQ, per-channel), then
report accuracy and CPU speed against the original in the same run, on the same frames.

    .venv/bin/python -m tools.model.quantize_int8 models/conveyor-416.onnx models/conveyor-416-int8.onnx \
        [--calibration 48] [--count 100] [--seed 12345678]

Calibration images are conveyor frames rendered by `tools/kit/synth/` (seeds from 2_000_000, away
from both the training seeds (< 1_000_000) and the held-out evaluation seeds), letterboxed exactly
as the daemon fills its input. Activations and weights are signed INT8 in QDQ form (what the
CPU, CUDA and TensorRT providers all run), weights per output channel, min/max calibration.
The detection head's last steps (box decode: the DFL softmax, the distance-to-box arithmetic and
the final concatenation) stay in float: their outputs are pixel coordinates, and 8 bits over a
0..S range cost boxes a pixel or more. Metadata is carried over, with `precision = int8`.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx

from tools.kit.synth.scene import render_scene
from tools.model.eval import compare_models, eval_frame_size, letterbox

CALIBRATION_SEED = 2_000_000
_FLOAT_TAIL_OPS = {"Softmax", "Sub", "Add", "Mul", "Div", "Concat", "Sigmoid", "Transpose", "Reshape", "Split", "Slice"}


class SynthCalibration:
    """ONNX Runtime's CalibrationDataReader over rendered, letterboxed conveyor frames."""

    def __init__(self, input_name: str, size: int, count: int, seed: int = CALIBRATION_SEED) -> None:
        self._items: Iterator[dict[str, np.ndarray]] = iter(self._make(input_name, size, count, seed))

    @staticmethod
    def _make(input_name: str, size: int, count: int, seed: int) -> list[dict[str, np.ndarray]]:
        out = []
        for i in range(count):
            w, h = eval_frame_size(seed + i, size)
            img, _ = render_scene(seed + i, w, h)
            x, _, _ = letterbox(img, size)
            out.append({input_name: x[None]})
        return out

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._items, None)


def float_tail(model: onnx.ModelProto) -> list[str]:
    """Nodes after the last convolution that only do arithmetic on the output (kept in float)."""
    nodes = list(model.graph.node)
    last_conv = max(i for i, n in enumerate(nodes) if n.op_type == "Conv")
    return [n.name for n in nodes[last_conv + 1 :] if n.op_type in _FLOAT_TAIL_OPS and n.name]


def quantize(src: Path, dst: Path, *, calibration: int = 48) -> Path:
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static  # noqa: PLC0415
    from onnxruntime.quantization.shape_inference import quant_pre_process  # noqa: PLC0415

    model = onnx.load(str(src))
    input_name = model.graph.input[0].name
    size = int(model.graph.input[0].type.tensor_type.shape.dim[2].dim_value)
    with tempfile.TemporaryDirectory() as tmp:
        prepared = Path(tmp) / "prepared.onnx"
        quant_pre_process(str(src), str(prepared), skip_symbolic_shape=True)
        quantize_static(
            str(prepared),
            str(dst),
            SynthCalibration(input_name, size, calibration),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax,
            nodes_to_exclude=float_tail(onnx.load(str(prepared))),
            extra_options={"ActivationSymmetric": False, "WeightSymmetric": True},
        )
    quantized = onnx.load(str(dst))
    del quantized.metadata_props[:]
    for prop in model.metadata_props:
        if prop.key != "precision":
            quantized.metadata_props.append(onnx.StringStringEntryProto(key=prop.key, value=prop.value))
    quantized.metadata_props.append(onnx.StringStringEntryProto(key="precision", value="int8"))
    onnx.save(quantized, str(dst))
    return dst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    ap.add_argument("--calibration", type=int, default=48, help="rendered calibration images")
    ap.add_argument("--count", type=int, default=100, help="held-out images to evaluate (0: skip)")
    ap.add_argument("--seed", type=int, default=12_345_678)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    quantize(args.src, args.dst, calibration=args.calibration)
    print(f"wrote {args.dst} ({args.dst.stat().st_size / 1e6:.1f} MB, was {args.src.stat().st_size / 1e6:.1f} MB)")
    if args.count:
        compare_models([args.src, args.dst], count=args.count, seed=args.seed, threads=args.threads)


if __name__ == "__main__":
    main()
