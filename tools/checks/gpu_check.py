"""Prove the GPU pipeline on a GPU host, in one run (under 5 minutes): the same frames and batches
through the CPU path and the GPU path, compared, and each stage timed on both.

Run on the GPU box / Jetson after installing `beltsight[gpu]` (or `[jetson]`)::

    python -m tools.checks.gpu_check --require-gpu --json gpu_check.json

Checks (each prints PASS / FAIL / SKIP with why; exit status 1 if any failed, and with
`--require-gpu` also if a GPU check was skipped):
  1. environment: CuPy and its device, NVML, NVDEC, ORT's providers and CUDA version;
     thermal (tools/checks/gpu_thermal.py): the daemon's real NVML reader on the device:
     temperature, slowdown thresholds, clock-event reasons, power, and the governor's limit;
  2. pre-processing: the YUV letterbox (daemon.inference.device_preprocess) under NumPy against the CPU
     path (swscale + BatchTensor), under CuPy (xp path, and the CUDA kernel) against NumPy, and the
     kernel on frames as a decoder process's YUV slot holds them, uploaded through pinned buffers;
  3. NVDEC frames against CPU-decoded frames (Y plane, and the letterboxed batch);
  4. inference: IO binding against `session.run` (on the CPU here, on CUDA where it exists),
     `run_device` against `run`;
  5. post-processing: `decode_batch` and `greedy_nms` under CuPy against NumPy (identical kept
     indices, max box difference), on random outputs and the model's own;
  6. the time per batch of each stage on both paths, as a table and (with --json) a JSON file.
Without a GPU it still runs every CPU-side check and says what it skipped and why.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import av
import numpy as np
import onnxruntime as ort

from daemon.config.seam import CudaOptions, EngineConfig
from daemon.core.seam import Frame, Letterbox, cupy_status, get_xp, nvml, to_host, yuv
from daemon.inference.seam import (
    BatchTensor,
    DeviceBatchTensor,
    Engine,
    EngineError,
    ModelLayout,
    decode_batch,
    greedy_nms,
    load_model_info,
    run_bound,
)
from daemon.ingest.seam import hwdecode, scale
from daemon.ops.seam import ort_cuda_version
from tools.checks.gpu_thermal import thermal_checks
from tools.kit.synth.video import h264_writer

REPORT: dict[str, Any] = {"checks": [], "skipped": [], "timings": {}, "host": platform.node()}
POST: dict[str, Any] = {"conf_threshold": 0.25, "iou_threshold": 0.5, "max_det": 300}


def check(name: str, ok: bool, detail: str = "") -> None:
    print(f"[{'PASS' if ok else 'FAIL'}] {name}{': ' + detail if detail else ''}", flush=True)
    REPORT["checks"].append({"name": name, "ok": ok, "detail": detail})


def skip(name: str, why: str) -> None:
    print(f"[SKIP] {name}: {why}", flush=True)
    REPORT["skipped"].append({"name": name, "why": why})


T = TypeVar("T")


def timed(stage: str, path: str, fn: Callable[[], T], cupy: Any | None = None, repeat: int = 5) -> T:
    """Run `fn` once to warm up, then `repeat` times; records the median ms per batch."""
    result = fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        if cupy is not None:
            cupy.cuda.Device().synchronize()
        times.append((time.perf_counter() - start) * 1000)
    REPORT["timings"].setdefault(stage, {})[path] = round(statistics.median(times), 2)
    return result


def make_clip(folder: Path, width: int, height: int, count: int) -> Path:
    path = folder / f"check_{width}x{height}.mp4"
    render: Callable[[int, int, int | None], tuple[np.ndarray, list[dict[str, Any]]]] | None
    try:
        from tools.kit.synth.scene import render_image  # noqa: PLC0415 - Pillow, a dev/demo dependency

        render = render_image
    except ImportError:
        render = None
    rng = np.random.default_rng(0)
    with h264_writer(path, width, height, 10, crf=18, preset="veryfast") as write:
        for i in range(count):
            if render is not None:
                write(render(i + 1, width, height)[0])
            else:
                write(rng.integers(0, 255, (height, width, 3), dtype=np.uint8))
    return path


def decode_cpu(path: Path) -> list[av.VideoFrame]:
    with av.open(str(path)) as container:
        return list(container.decode(video=0))


def environment(device_id: int) -> Any | None:
    ok, detail = cupy_status(device_id)
    if ok:
        check("CuPy sees the device", True, detail)
    else:
        skip("every CuPy/CUDA check", detail)
    print(f"       NVML: {nvml.describe(device_id)[1]}")
    print(f"       NVDEC: {hwdecode.nvdec_status(device_id).line()}")
    print(
        f"       onnxruntime {ort.__version__} (CUDA {ort_cuda_version()}), providers {ort.get_available_providers()}"
    )
    return get_xp("cuda", device_id) if ok else None


def preprocess(cupy: Any | None, frames: list[av.VideoFrame], info: Any) -> np.ndarray:
    """The batch on every path; returns the NumPy xp path's batch (host)."""
    size, conv, n = info.size, info.convention, len(frames)
    lb = Letterbox.fit(frames[0].width, frames[0].height, size)
    cpu_tensor = BatchTensor(n, size, conv)

    def cpu_path() -> Any:
        made = [Frame("cam", i, 0, 0.0, lb, scale(f, lb)) for i, f in enumerate(frames)]
        return cpu_tensor.fill(made)

    reference = timed("pre-processing", "cpu (swscale + BatchTensor)", cpu_path)
    np_tensor = DeviceBatchTensor(np, n, size, conv)
    host: np.ndarray = timed(
        "pre-processing",
        "numpy (device_preprocess)",
        lambda: np_tensor.fill([(yuv.yuv_frame(f, np), lb) for f in frames]),
    ).copy()
    diff = np.abs(host.astype(np.float32) - reference.astype(np.float32))
    check("letterbox numpy vs the CPU path (swscale)", float(diff.mean()) < 2.5 * conv.scale, f"mean {diff.mean():.2e}")
    if cupy is None:
        skip("letterbox cupy vs numpy (xp path and kernel)", "no usable CUDA device / CuPy")
        return host
    from daemon.inference.seam import LetterboxKernel  # noqa: PLC0415 - compiles CUDA on first use

    uploaded = timed("upload (YUV planes)", "cupy", lambda: [yuv.yuv_frame(f, cupy) for f in frames], cupy)
    for name, tensor in (
        ("cupy xp path", DeviceBatchTensor(cupy, n, size, conv)),
        ("cupy kernel", DeviceBatchTensor(cupy, n, size, conv, kernel=LetterboxKernel(cupy))),
    ):

        def fill(t: DeviceBatchTensor = tensor) -> Any:
            return t.fill([(f, lb) for f in uploaded])

        out = timed("pre-processing", name, fill, cupy)
        worst = float(np.abs(to_host(out).astype(np.float32) - host.astype(np.float32)).max())
        check(f"letterbox {name} vs numpy", worst < 2e-3 * max(1.0, conv.scale * 255), f"max {worst:.2e}")
    # a decoder process's YUV slot (`[engine] processes` on a box without NVDEC): host I420 planes cut to the
    # picture, uploaded through pinned staging buffers (`YuvUploader`), as the daemon's device path does
    slots = [_slot_copy(yuv.yuv_frame(f, np)) for f in frames]
    uploader = yuv.YuvUploader(cupy)
    kernel_tensor = DeviceBatchTensor(cupy, n, size, conv, kernel=LetterboxKernel(cupy))

    def from_slots() -> Any:
        return kernel_tensor.fill([(uploader.upload(i, f), lb) for i, f in enumerate(slots)])

    out = timed("pre-processing", "cupy kernel, YUV slots (pinned upload)", from_slots, cupy)
    worst = float(np.abs(to_host(out).astype(np.float32) - host.astype(np.float32)).max())
    check("letterbox of YUV slot frames vs numpy", worst < 2e-3 * max(1.0, conv.scale * 255), f"max {worst:.2e}")
    return host


def _slot_copy(frame: Any) -> Any:
    """`frame`'s planes as a decoder process's YUV slot holds them: I420, cut to the picture, contiguous."""
    u, v = frame.chroma_planes()
    y = np.ascontiguousarray(frame.y[: frame.height, : frame.width])
    return yuv.YuvFrame(
        frame.width, frame.height, y, np.ascontiguousarray(u), np.ascontiguousarray(v), frame.matrix, frame.full_range
    )


def nvdec(cupy: Any | None, clip: Path, cpu_frames: list[av.VideoFrame], size: int, device_id: int) -> None:
    status = hwdecode.nvdec_status(device_id)
    if cupy is None or not status.available:
        skip("NVDEC frames vs CPU-decoded frames", status.reason if not status.available else "no CuPy")
        return

    def decode_hw() -> list[Any]:
        container, on_nvdec = hwdecode.open_input(str(clip), device_id=device_id, on_device=True)
        with container:
            return [yuv.yuv_frame(f, cupy) for f in container.decode(video=0)] if on_nvdec else []

    hw = timed("decode", "nvdec (device frames)", decode_hw, cupy, repeat=2)
    timed("decode", "cpu (libavcodec)", lambda: decode_cpu(clip), repeat=2)
    if len(hw) != len(cpu_frames):
        check("NVDEC decodes every frame", False, f"{len(hw)} of {len(cpu_frames)}")
        return
    w, h = cpu_frames[0].width, cpu_frames[0].height
    worst = max(
        int(np.abs(to_host(d.y)[:h, :w].astype(int) - yuv.yuv_frame(c, np).y[:h, :w]).max())
        for d, c in zip(hw, cpu_frames, strict=True)
    )
    check("NVDEC Y planes vs CPU-decoded", worst <= 2, f"max pixel difference {worst}")
    lb = Letterbox.fit(w, h, size)
    dev = to_host(DeviceBatchTensor(cupy, len(hw), size).fill([(f, lb) for f in hw]))
    ref = DeviceBatchTensor(np, len(hw), size).fill([(yuv.yuv_frame(f, np), lb) for f in cpu_frames])
    diff = float(np.abs(dev - ref).max())
    check("letterbox of NVDEC frames vs CPU-decoded", diff < 3 / 255, f"max {diff:.2e}")


def inference(cupy: Any | None, model: Path, batch: np.ndarray, device_id: int) -> np.ndarray:
    info = load_model_info(model)
    n = int(batch.shape[0])
    cpu = Engine.create(info, EngineConfig(providers=["cpu"], max_batch=n, worker_batch=n))
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    names = list(info.output_names)
    want = sess.run(names, {info.input_name: batch})
    images = np.ascontiguousarray(batch)
    got = run_bound(
        sess, images, input_name=info.input_name, output_names=names, device_id=0, cupy=np, device_type="cpu"
    )
    same = all(np.array_equal(a, b) for a, b in zip(want, got, strict=True))
    check(f"IO binding vs session.run on the CPU ({model.name})", same)
    ref = timed("inference", f"cpu session.run ({model.name})", lambda: cpu.run(batch))
    cpu.close()
    if cupy is None:
        skip(f"CUDA session, run_device ({model.name})", "no usable CUDA device / CuPy")
        return ref
    cfg = EngineConfig(providers=["cuda", "cpu"], max_batch=n, cuda=CudaOptions(device_id=device_id))
    try:
        gpu = Engine.create(info, cfg)
    except EngineError as exc:
        check(f"CUDA session ({model.name})", False, str(exc))
        return ref
    check(f"CUDA session ({model.name})", gpu.on_cuda, f"providers {list(gpu.providers)}, warm-up {gpu.warmup_s:.2f} s")
    host_in = timed("inference", f"cuda run, host in/out ({model.name})", lambda: gpu.run(batch), cupy)
    diff = float(np.abs(host_in - ref).max())
    check(f"CUDA output vs CPU output ({model.name})", diff < 2e-2, f"max {diff:.2e}")
    with cupy.cuda.Device(device_id), gpu.cuda_stream or cupy.cuda.get_current_stream():
        device_batch = cupy.asarray(batch)
        out = timed(
            "inference", f"cuda run_device, IO binding ({model.name})", lambda: gpu.run_device(device_batch), cupy
        )
    diff = float(np.abs(to_host(out) - host_in).max())
    check(f"IO binding run_device vs run ({model.name})", diff < 1e-4, f"max {diff:.2e}")
    gpu.close()
    return ref


def random_output(rng: np.random.Generator, batch: int, layout: ModelLayout) -> np.ndarray:
    """A channels-first output shaped as the model's (`4 + classes` x anchors), random boxes and scores."""
    anchors, classes = layout.rows, layout.num_classes
    out = np.empty((batch, 4 + classes, anchors), np.float32)
    out[:, 0:2] = rng.uniform(0, layout.size, (batch, 2, anchors))
    out[:, 2:4] = rng.uniform(4, 120, (batch, 2, anchors))
    out[:, 4:] = rng.uniform(0, 1, (batch, classes, anchors)) ** 8
    return out


def postprocess(cupy: Any | None, outputs: dict[str, np.ndarray], layout: ModelLayout) -> None:
    for name, out in outputs.items():
        on_cpu = timed("post-processing", f"numpy ({name})", partial(decode_batch, np, out, layout=layout, **POST))
        if cupy is None:
            continue
        dev = cupy.asarray(out)
        on_gpu = timed(
            "post-processing", f"cupy ({name})", partial(decode_batch, cupy, dev, layout=layout, **POST), cupy
        )
        same = [len(a) == len(b) and np.array_equal(a[:, 4:], b[:, 4:]) for a, b in zip(on_cpu, on_gpu, strict=True)]
        worst = max(
            (
                float(np.abs(a[:, :4] - b[:, :4]).max())
                for a, b in zip(on_cpu, on_gpu, strict=True)
                if len(a) and len(a) == len(b)
            ),
            default=0.0,
        )
        rows = sum(len(r) for r in on_cpu)
        check(f"decode_batch cupy vs numpy ({name})", all(same) and worst < 1e-3, f"{rows} rows, max box {worst:.2e}")
    if cupy is None:
        skip("decode_batch / greedy_nms cupy vs numpy", "no usable CUDA device / CuPy")
        return
    rng = np.random.default_rng(1)
    xy = rng.uniform(0, 600, (500, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + rng.uniform(5, 80, (500, 2)).astype(np.float32)], axis=1)
    groups = rng.integers(0, 4, 500)
    kept_np = greedy_nms(np, boxes, groups, 0.45)
    kept_cp = to_host(greedy_nms(cupy, cupy.asarray(boxes), cupy.asarray(groups), 0.45))
    check("greedy_nms kept indices cupy == numpy", np.array_equal(kept_np, kept_cp), f"{len(kept_np)} kept of 500")


def table() -> list[str]:
    lines = ["| stage | path | ms per batch |", "| --- | --- | --- |"]
    for stage, paths in REPORT["timings"].items():
        lines += [f"| {stage} | {path} | {ms} |" for path, ms in paths.items()]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=Path, default=Path("models"))
    parser.add_argument("--model", default="conveyor-640.onnx", help="the model timed and compared (in --models)")
    parser.add_argument("--device-id", type=int, default=0)
    parser.add_argument("--batch", type=int, default=8, help="frames per batch")
    parser.add_argument("--json", type=Path, help="write checks, skips and timings here")
    parser.add_argument("--require-gpu", action="store_true", help="a skipped GPU check is a failure")
    args = parser.parse_args()
    start = time.monotonic()
    cupy = environment(args.device_id)
    thermal_checks(args.device_id, check, skip)
    model = args.models / args.model
    if not model.is_file():
        check(f"model {model}", False, "not found (tools/bootstrap.sh builds the demo models)")
        return 1
    info = load_model_info(model)
    with tempfile.TemporaryDirectory() as tmp:
        clip = make_clip(Path(tmp), 1280, 720, args.batch)
        frames = decode_cpu(clip)
        timed("decode", "cpu (libavcodec)", lambda: decode_cpu(clip), repeat=2)
        batch = preprocess(cupy, frames, info)
        nvdec(cupy, clip, frames, info.size, args.device_id)
    ref = inference(cupy, model, batch.astype(np.float32), args.device_id)
    rng = np.random.default_rng(0)
    postprocess(
        cupy,
        {
            "random, batch 1": random_output(rng, 1, info.decoding),
            f"random, batch {args.batch}": random_output(rng, args.batch, info.decoding),
            f"{model.name} output": ref,
        },
        info.decoding,
    )
    REPORT["seconds"] = round(time.monotonic() - start, 1)
    print("\n" + "\n".join(table()))
    failed = [c["name"] for c in REPORT["checks"] if not c["ok"]]
    print(
        f"\n{len(REPORT['checks']) - len(failed)} passed, {len(failed)} failed, {len(REPORT['skipped'])} skipped "
        f"in {REPORT['seconds']} s"
    )
    for s in REPORT["skipped"]:
        print(f"skipped: {s['name']}: {s['why']}")
    if args.json:
        args.json.write_text(json.dumps(REPORT, indent=2), encoding="utf-8")
    return 1 if failed or (args.require_gpu and REPORT["skipped"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
