"""`python -m tools.bench`'s command line: its flags, what they default to, and the checks on them
(`--model` a size or a file, `--cameras` one count unless --null-model)."""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path

import tools.bench
from daemon.inference.seam import ModelError, load_model_info
from tools.bench.experiments import EXPERIMENTS
from tools.kit.daemon_config import MODELS
from tools.kit.run_output import WHERE, run_dir


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(tools.bench.__doc__ or "").split("\n\n")[0])
    add_bench_args(p)
    add_stream_args(p)
    add_phase_args(p)
    args = p.parse_args(argv)
    args.model = model_size(p, args.model)
    if not args.null_model:
        if args.cameras is not None and not args.cameras.isdigit():
            p.error("--cameras: one count (lists only with --null-model; see --sweep)")
        args.cameras = int(args.cameras or 4)
    wrong = set(args.lanes.split(",")) - {"gpu", "cpu", "device"}
    if wrong:
        p.error(f"--lanes: {', '.join(sorted(wrong))} is not a lane shape; give gpu, device, cpu or a list (cpu,gpu)")
    if args.ultralytics is not None:
        check_ultralytics(p, args)
    args.width, args.height = (int(v) for v in args.size.lower().split("x"))
    args.out = (args.out or run_dir("bench")).resolve()  # redis-server chdirs
    return args


def check_ultralytics(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--ultralytics: an interpreter that imports ultralytics and onnxruntime."""
    try:
        found = subprocess.run(
            [str(args.ultralytics), "-c", "import ultralytics, onnxruntime; print(ultralytics.__version__)"],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "YOLO_OFFLINE": "1"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        p.error(
            f"--ultralytics {args.ultralytics}: cannot run it ({type(exc).__name__}: {exc}); give a Python "
            "interpreter, e.g. runs/ultralytics/bin/python from `python3 -m venv runs/ultralytics`"
        )
    if found.returncode != 0:
        last = (found.stderr.strip().splitlines() or ["no output"])[-1]
        p.error(
            f"--ultralytics {args.ultralytics}: cannot import ultralytics and onnxruntime ({last}); install them "
            f"into it: {args.ultralytics} -m pip install ultralytics onnxruntime"
        )
    args.ultralytics_version = found.stdout.strip().splitlines()[-1]


def add_bench_args(p: argparse.ArgumentParser) -> None:
    """Which bench: the camera count, the null-model bench and its options, the daemon's preprocess/processes."""
    p.add_argument(
        "--cameras",
        help="camera count (default 4); with --null-model a comma list (default 8,16,24,32)",
    )
    p.add_argument(
        "--null-model",
        action="store_true",
        help="the null-model bench (tools/bench/null_bench.py): the model replaced by one that returns fixed "
        "boxes, the daemon at each --cameras count beside a decode-only run of the same streams",
    )
    p.add_argument("--boxes", type=int, default=7, help="--null-model: the fixed boxes per image")
    p.add_argument(
        "--ultralytics",
        type=Path,
        help="an interpreter with ultralytics and onnxruntime installed (e.g. runs/ultralytics/bin/python after "
        "`python3 -m venv runs/ultralytics && runs/ultralytics/bin/pip install ultralytics onnxruntime`): Ultralytics' "
        "streaming predictor on the same streams and model in its own window (tools/bench/ultralytics_run.py), after "
        "the naive loop, or with --null-model after each count's phases",
    )
    p.add_argument(
        "--gil",
        action="store_true",
        help="--null-model: py-spy over the middle third of each daemon phase, where each thread role waits for "
        "the interpreter lock (tools/bench/gil.py; its CPU perturbs that phase's figures)",
    )
    p.add_argument(
        "--preprocess",
        choices=["host", "graph", "both"],
        default="host",
        help="engine.preprocess for the daemon phases; 'both' (--null-model only): a phase with each per "
        "camera count, one after the other",
    )
    p.add_argument(
        "--processes",
        help="engine.processes for the daemon phases (1, a count or auto; default 1, with --null-model auto as "
        "the daemon's); with --null-model a comma list (e.g. 1,auto): a phase with each per camera count",
    )
    p.add_argument(
        "--lanes",
        default="gpu",
        help="--null-model: the lanes' shape where --workers and --worker-batch are left at 0, a comma list (e.g. "
        "cpu,gpu: a phase with each per camera count). 'gpu' (default): as the daemon runs a CUDA lane, which the "
        "null model stands in for (one session, batches of the cameras' share up to max_batch); 'device': the same "
        "shape on the device path, with the GPU's work left out (tools.kit.device_standin.BENCH: YUV planes staged "
        "as for the upload, the letterbox and the model's run not done on the host); 'cpu': as it runs CPU lanes (a "
        "session per core, one frame per batch)",
    )


def add_stream_args(p: argparse.ArgumentParser) -> None:
    """The streams (size, rate, bit-rate, length), the model and the engine's batching and threads."""
    p.add_argument("--fps", type=int, default=15)
    p.add_argument("--size", default="640x480")
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument(
        "--rtsp-nice",
        type=int,
        default=-10,
        help="nice value of the RTSP server's threads (default -10, where allowed): it stands in for cameras, "
        "which do not share the daemon's cores, so a frame it sends late would read as the daemon's lateness",
    )
    p.add_argument(
        "--settle",
        type=float,
        default=15,
        help="seconds a daemon phase runs, once every camera has published, before its window starts: the "
        "start-up (connections, first keyframes, the servers' pipelines) is reported apart, as 'startup'",
    )
    p.add_argument(
        "--model",
        default="640",
        help="model size (416/640/800: the committed demo model) or an ONNX file "
        "(e.g. models/conveyor-416-int8.onnx): the daemon and the bare runs use it at its input size",
    )
    p.add_argument(
        "--bitrate",
        default="1M",
        help="bit-rate cap of the rendered H.264 clips, as an IP camera's encoder sets it "
        "('' = uncapped crf 20: about 3.8 Mbit/s at 640x480 and 15 fps)",
    )
    p.add_argument("--max-batch", type=int)
    p.add_argument("--max-wait-ms", type=float)
    p.add_argument("--intra-op-threads", type=int, default=0, help="engine.intra_op_threads (0: auto)")
    p.add_argument("--workers", type=int, default=0, help="engine.workers (0: auto, one per core on the CPU)")
    p.add_argument("--worker-batch", type=int, default=0, help="engine.worker_batch (0: auto, 1 on the CPU)")


def add_phase_args(p: argparse.ArgumentParser) -> None:
    """The phases: sweeps, the A/B segments, what the daemon does (lines, snapshots), profiles and --out."""
    p.add_argument("--sweep", help="camera counts, e.g. 1,2,4,6 (daemon phase once per count)")
    p.add_argument(
        "--scaling",
        help="camera counts, e.g. 1,2,4,8,16: a sweep, plus the ratio to the bare model and RSS per count "
        "plotted (scaling.png) with the knee named",
    )
    p.add_argument(
        "--stage-ab-seconds",
        type=float,
        default=10,
        help="alternate the stage CPU counters on and off every N seconds of a daemon phase (the budget "
        "comes from the 'on' segments, their cost from on/off pairs); 0: on throughout",
    )
    p.add_argument(
        "--ab",
        choices=sorted(EXPERIMENTS),
        help="switch this experiment (tools/bench/experiments.py) on and off every --stage-ab-seconds of the "
        "daemon phase, the counters on throughout: its effect as ratios in the same run",
    )
    p.add_argument(
        "--lines",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a counting line across each camera's belt, so the tracker counts crossings (tracking is on either way)",
    )
    p.add_argument(
        "--snapshots",
        action="store_true",
        help="[snapshots] on (a JPEG of each crossing's frame, under --out): their cost in the budget",
    )
    p.add_argument(
        "--flame",
        type=Path,
        help="record the main daemon phase with py-spy (up to 60 s) into this SVG (or collapsed stacks: .txt)",
    )
    p.add_argument("--naive-seconds", type=float, help="default: seconds / 2")
    p.add_argument("--bare-seconds", type=float, default=10)
    p.add_argument("--out", type=Path, help=f"the run's folder (default: bench-<time> under {WHERE})")


def model_size(parser: argparse.ArgumentParser, model: str) -> int:
    """`--model`: a size of the demo models, or a file, which then serves that size for this run
    (its entry in the harness's model table, which the daemon config and the bare runs read)."""
    if model.isdigit():
        if int(model) not in MODELS:
            parser.error(f"--model {model}: not one of {sorted(MODELS)} (or give an ONNX file)")
        return int(model)
    path = Path(model).resolve()
    try:
        size = load_model_info(path).size
    except ModelError as exc:
        parser.error(f"--model: {exc}")
    if size not in MODELS:
        parser.error(f"--model {path}: input {size}x{size} is not one of the daemon's sizes {sorted(MODELS)}")
    MODELS[size] = path
    return size
