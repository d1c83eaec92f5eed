"""Ultralytics' streaming predictor on RTSP streams: the baseline `python -m tools.bench --null-model --ultralytics`
runs beside the daemon.

    PYTHON tools/bench/ultralytics_run.py --model FILE.onnx [--imgsz 640] URL [URL ...]

PYTHON is an interpreter with `ultralytics` and `onnxruntime` installed (not the project's: Ultralytics
needs PyTorch). This file imports nothing of the project, so it runs in that interpreter as it is.
The model (an ONNX file) is loaded as Ultralytics loads any ONNX export (`YOLO(FILE, task="detect")`,
ONNX Runtime's CPU provider) and run on every stream at once, as `yolo predict source=list.streams`
does: `LoadStreams` reads each stream in a thread (OpenCV's FFmpeg, RTSP over TCP as the daemon reads
it) and each batch takes the newest frame of every stream, so every image the predictor yields is a
frame decoded once and run once. Once a second it prints one line on stdout, as `tools.bench.decoders`
does: `<images predicted so far> <this process's CPU seconds so far> <time.monotonic()>`. Runs until
killed; a predictor that stops (a stream ended or failed) exits with status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import tempfile
import threading
import time


def predict(model_path: str, imgsz: int, urls: list[str], counts: list[int]) -> None:
    yolo = importlib.import_module("ultralytics").YOLO  # after main() set the environment; not the project's package
    with tempfile.NamedTemporaryFile("w", suffix=".streams", delete=False) as listing:
        listing.write("\n".join(urls) + "\n")
    model = yolo(model_path, task="detect")
    try:
        for _ in model.predict(source=listing.name, stream=True, imgsz=imgsz, rect=False, verbose=False, save=False):
            if not counts[0]:  # LoadStreams read the list before its first batch; the run ends killed
                os.unlink(listing.name)
            counts[0] += 1
    except Exception as exc:  # any failure ends the run: the measurement is void
        print(f"ultralytics_run: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(listing.name)
    print("ultralytics_run: the predictor stopped", file=sys.stderr, flush=True)
    os._exit(1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="an ONNX file")
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("urls", nargs="+")
    args = p.parse_args()
    os.environ.setdefault("OPENCV_FFMPEG_CAPTURE_OPTIONS", "rtsp_transport;tcp")  # as the daemon reads RTSP
    os.environ.setdefault("YOLO_OFFLINE", "1")  # nothing to download, no update check
    lines = os.fdopen(os.dup(1), "w")  # the per-second lines; everything else (Ultralytics logs on stdout) to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    counts = [0]
    threading.Thread(target=predict, args=(args.model, args.imgsz, args.urls, counts), daemon=True).start()
    while True:
        time.sleep(1.0)
        print(counts[0], round(time.process_time(), 3), round(time.monotonic(), 3), file=lines, flush=True)


if __name__ == "__main__":
    main()
