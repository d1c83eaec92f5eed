"""Convert an ONNX detector to float16 weights and compute, then report accuracy and speed against the original.

    .venv/bin/python -m tools.model.convert_fp16 models/conveyor-640.onnx models/conveyor-640-fp16.onnx \
        [--keep-io-types | --fp16-io] [--count 100] [--seed 12345678]

Conversion is ONNX Runtime's own converter (`onnxruntime.transformers.float16`). With
`--keep-io-types` (the default) the input and outputs stay float32 and the graph casts at its
edges, so the daemon fills the same tensor as for the original; `--fp16-io` makes the input
float16 too (the daemon then fills a float16 tensor: `beltsight doctor` shows the dtype).
Metadata (names, layout, imgsz, ...) is carried over, with `precision = fp16`.

After converting, the same held-out frames go through both files (`tools.model.eval`), and
one line per file gives mAP50, mAP50-95 and the CPU time per image measured in the same run.
FP16 speeds up GPUs (tensor cores); on a CPU without FP16 arithmetic it is usually slower.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import onnx


def convert(src: Path, dst: Path, *, keep_io_types: bool = True) -> Path:
    """Write the float16 version of `src` to `dst` (metadata kept, `precision` = fp16)."""
    from onnxruntime.transformers.float16 import convert_float_to_float16  # noqa: PLC0415

    model = onnx.load(str(src))
    converted = convert_float_to_float16(model, keep_io_types=keep_io_types, disable_shape_infer=False)
    _sort_nodes(converted.graph)
    del converted.metadata_props[:]
    for prop in model.metadata_props:
        if prop.key != "precision":
            converted.metadata_props.append(onnx.StringStringEntryProto(key=prop.key, value=prop.value))
    converted.metadata_props.append(onnx.StringStringEntryProto(key="precision", value="fp16"))
    onnx.checker.check_model(converted)
    dst.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(converted, str(dst))
    return dst


def _sort_nodes(graph: onnx.GraphProto) -> None:
    """Order nodes so each comes after its inputs' producers (the converter appends its Casts at
    the end, and repeats the Cast of a constant two nodes share)."""
    ready = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    seen: set[str] = set()
    pending, ordered = [], []
    for node in graph.node:  # a constant shared by two nodes gets two identical Casts: keep one
        if not any(o in seen for o in node.output):
            pending.append(node)
            seen.update(node.output)
    while pending:
        progress = [n for n in pending if all(i in ready for i in n.input)]
        if not progress:
            raise ValueError(f"graph has a cycle or a missing input near {pending[0].name}")
        for node in progress:
            ready.update(node.output)
        ordered += progress
        pending = [n for n in pending if all(n is not p for p in progress)]
    del graph.node[:]
    graph.node.extend(ordered)


def main() -> None:
    from tools.model.eval import compare_models  # noqa: PLC0415

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    io = ap.add_mutually_exclusive_group()
    io.add_argument("--keep-io-types", dest="keep_io", action="store_true", default=True)
    io.add_argument("--fp16-io", dest="keep_io", action="store_false")
    ap.add_argument("--count", type=int, default=100, help="held-out images to evaluate (0: skip)")
    ap.add_argument("--seed", type=int, default=12_345_678)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    convert(args.src, args.dst, keep_io_types=args.keep_io)
    print(f"wrote {args.dst} ({args.dst.stat().st_size / 1e6:.1f} MB, was {args.src.stat().st_size / 1e6:.1f} MB)")
    if args.count:
        compare_models([args.src, args.dst], count=args.count, seed=args.seed, threads=args.threads)


if __name__ == "__main__":
    main()
