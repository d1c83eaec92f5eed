"""Check the GPU path on a GPU host: CuPy NMS vs NumPy, CUDA sessions, IO binding with CuPy.

Run on the GPU box / Jetson after installing `beltsight[gpu]` (or `[jetson]`)::

    python tools/gpu_check.py [--models models] [--device-id 0]

Checks (each prints PASS/FAIL; exit status 1 if any failed):
  1. CuPy imports and sees the device;
  2. `decode_batch` with CuPy returns the same rows as with NumPy, on random outputs and on
     the real model's outputs for rendered scenes;
  3. a session asked for CUDA really gets `CUDAExecutionProvider`, and its output matches
     the CPU session's;
  4. IO binding: a CuPy batch made on the engine's stream runs without a host copy
     (`run_device`), and matches the host-input result.
It cannot run on a machine without a GPU (nothing is mocked).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from daemon.config_engine import CudaOptions, EngineConfig
from daemon.engine import Engine, EngineError, load_model_info
from daemon.postprocess import decode_batch
from daemon.xp import GpuUnavailableError, cupy_status, get_xp

FAILED: list[str] = []


def report(name: str, ok: bool, detail: str = "") -> None:
    print(f"[{'PASS' if ok else 'FAIL'}] {name}{': ' + detail if detail else ''}", flush=True)
    if not ok:
        FAILED.append(name)


def same_rows(a: list[np.ndarray], b: list[np.ndarray]) -> tuple[bool, str]:
    if [r.shape for r in a] != [r.shape for r in b]:
        return False, f"shapes {[r.shape for r in a]} vs {[r.shape for r in b]}"
    worst = max((float(np.abs(x - y).max()) for x, y in zip(a, b, strict=True) if x.size), default=0.0)
    return worst < 1e-3, f"{sum(len(r) for r in a)} rows, max difference {worst:.2e}"


def check_decode(cupy: Any, outputs: dict[str, np.ndarray]) -> None:
    args: dict[str, Any] = {"conf_threshold": 0.25, "iou_threshold": 0.5, "max_det": 300}
    for name, out in outputs.items():
        on_cpu = decode_batch(np, out, **args)
        decode_batch(cupy, cupy.asarray(out), **args)  # first call compiles kernels
        start = time.perf_counter()
        on_gpu = decode_batch(cupy, cupy.asarray(out), **args)
        gpu_ms = (time.perf_counter() - start) * 1000
        ok, detail = same_rows(on_cpu, on_gpu)
        report(f"decode_batch numpy == cupy ({name})", ok, f"{detail}, cupy {gpu_ms:.1f} ms")


def random_output(rng: np.random.Generator, batch: int, size: int = 640) -> np.ndarray:
    anchors = sum((size // s) ** 2 for s in (8, 16, 32))
    out = np.empty((batch, 8, anchors), np.float32)
    out[:, 0:2] = rng.uniform(0, size, (batch, 2, anchors))
    out[:, 2:4] = rng.uniform(4, 120, (batch, 2, anchors))
    out[:, 4:] = rng.uniform(0, 1, (batch, 4, anchors)) ** 8
    return out


def scene_batch(size: int, count: int) -> np.ndarray:
    batch = np.full((count, 3, size, size), 114 / 255, np.float32)
    try:
        from tools.synth import render_image  # noqa: PLC0415 - needs PIL, a dev dependency
    except ImportError:
        return np.random.default_rng(0).uniform(0, 1, batch.shape).astype(np.float32)
    for i in range(count):
        image, _ = render_image(i + 1, size, size)
        batch[i] = image.transpose(2, 0, 1) / 255
    return batch


def check_sessions(cupy: Any, model: Path, device_id: int) -> np.ndarray | None:
    info = load_model_info(model)
    cuda_opts = CudaOptions(device_id=device_id)
    cpu = Engine.create(info, EngineConfig(providers=["cpu"], max_batch=4))
    try:
        gpu = Engine.create(info, EngineConfig(providers=["cuda", "cpu"], max_batch=4, cuda=cuda_opts))
    except EngineError as exc:
        report(f"CUDA session for {model.name}", False, str(exc))
        return None
    report(
        f"CUDA session for {model.name}",
        gpu.on_cuda,
        f"providers {list(gpu.providers)}, warm-up {gpu.warmup_s or 0:.3f} s, shared stream {gpu.cuda_stream}",
    )
    batch = scene_batch(info.size, 4)
    host_in = gpu.run(batch)
    ref = cpu.run(batch)
    diff = float(np.abs(host_in - ref).max())
    report("CUDA output == CPU output (host input)", diff < 1e-2, f"max difference {diff:.2e}")
    stream = gpu.cuda_stream if gpu.cuda_stream is not None else cupy.cuda.get_current_stream()
    with cupy.cuda.Device(device_id), stream:
        device_batch = cupy.asarray(batch)
    start = time.perf_counter()
    device_out = gpu.run_device(device_batch)
    run_ms = (time.perf_counter() - start) * 1000
    is_cupy = type(device_out).__module__.startswith("cupy")
    diff = float(np.abs(cupy.asnumpy(device_out) - host_in).max()) if is_cupy else float("inf")
    report("IO binding with a CuPy batch", is_cupy and diff < 1e-4, f"max difference {diff:.2e}, {run_ms:.1f} ms")
    gpu.close()
    cpu.close()
    return ref


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=Path, default=Path("models"))
    parser.add_argument("--device-id", type=int, default=0)
    args = parser.parse_args()
    ok, detail = cupy_status(args.device_id)
    report("CuPy sees the device", ok, detail)
    if not ok:
        return 1
    try:
        cupy = get_xp("cuda", args.device_id)
    except GpuUnavailableError as exc:
        report("CuPy module", False, str(exc))
        return 1
    rng = np.random.default_rng(0)
    outputs = {"random batch 1": random_output(rng, 1), "random batch 8": random_output(rng, 8)}
    for model in sorted(args.models.glob("*.onnx")):
        ref = check_sessions(cupy, model, args.device_id)
        if ref is not None:
            outputs[f"{model.name} on rendered scenes"] = ref
    check_decode(cupy, outputs)
    print("all checks passed" if not FAILED else f"FAILED: {FAILED}")
    return 1 if FAILED else 0


if __name__ == "__main__":
    raise SystemExit(main())
