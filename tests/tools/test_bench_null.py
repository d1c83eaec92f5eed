"""tools/bench/null_model.py, gil.py and the null bench's per-thread reading: the null model is a
model the daemon accepts in place of the demo one and finds exactly its fixed boxes in; the GIL
summary sorts native stacks as CPython 3.11 shows them; the busiest thread is the one that used
the most CPU between two readings."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from daemon.core.frames import FrameResult
from daemon.inference.model_file import load_model_info
from daemon.inference.pixel_input import with_pixel_input
from daemon.inference.postprocess import decode_batch
from daemon.publish.schema import encode_entry
from tests.support.fixtures_redis import RedisServer
from tools.bench.cli import parse_args
from tools.bench.gil import summarise
from tools.bench.null_bench import Mode, lane_shape, modes, startup_line
from tools.bench.null_model import make_null_model
from tools.bench.phase_figures import startup_figures
from tools.bench.procs import busiest_thread, nice_process
from tools.kit.stats import percentile

REPO = Path(__file__).resolve().parents[2]
DEMO_416 = REPO / "models" / "conveyor-416.onnx"


def test_the_null_model_has_the_demo_models_interface_and_returns_its_fixed_boxes(tmp_path: Path) -> None:
    null = make_null_model(DEMO_416, tmp_path / "null-416.onnx", boxes=7)
    demo, info = load_model_info(DEMO_416), load_model_info(null)
    assert (info.size, info.names, info.layout, info.anchors, info.version) == (
        demo.size,
        demo.names,
        demo.layout,
        demo.anchors,
        demo.version,
    )
    assert {p.key: p.value for p in onnx.load(str(null)).metadata_props} == {
        p.key: p.value for p in onnx.load(str(DEMO_416)).metadata_props
    }
    session = ort.InferenceSession(str(null), providers=["CPUExecutionProvider"])
    images = np.random.default_rng(1).random((2, 3, info.size, info.size), dtype=np.float32)
    out = session.run(None, {info.input_name: images})[0]
    assert out.shape == (2, 4 + len(info.names), info.anchors)
    rows = decode_batch(
        np,
        out,
        conf_threshold=np.array([0.25, 0.25], dtype=np.float32),
        iou_threshold=0.5,
        max_det=300,
        layout=info.decoding,
        images=2,
    )
    assert [len(r) for r in rows] == [7, 7]  # every box survives NMS: they do not overlap
    np.testing.assert_array_equal(rows[0], rows[1])  # the same for every image


def test_a_pixel_prefix_folds_into_the_null_models_first_conv_as_into_a_detectors(tmp_path: Path) -> None:
    null = make_null_model(DEMO_416, tmp_path / "null-416.onnx")
    info = load_model_info(null)
    prefixed, folded = with_pixel_input(onnx.load(str(null)), info.convention)
    assert folded
    pixels = np.random.default_rng(2).integers(0, 256, (1, 3, info.size, info.size), dtype=np.uint8)
    out = ort.InferenceSession(prefixed.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {info.input_name: pixels}
    )[0]
    assert out.shape == (1, 4 + len(info.names), info.anchors)


def test_gil_summary_sorts_idle_lock_waits_and_running_samples_by_role() -> None:
    raw = "\n".join(
        [
            # a reader taking the GIL back after the decoder released it: take_gil shows as its cond wait
            "thread (0x1): source-cam3;CodecContext__decode (context.c:1);pthread_cond_timedwait (libc.so.6) 6",
            # a reader decoding
            "thread (0x1): source-cam3;CodecContext__decode (context.c:1);ff_h264_decode (libavcodec.so) 2",
            # a worker blocked on its queue (a lock wait, even though the kernel call is the same)
            "thread (0x2): beltsight-infer-640-0_0;_queue_SimpleQueue_get_impl (q.c:1);"
            "PyThread_acquire_lock_timed (libpython3.11.so);pthread_cond_timedwait (libc.so.6) 3",
            "thread (0x3): bench-daemon;select_epoll_poll_impl (s.c:1);epoll_wait (libc.so.6) 1",
            "thread (0x3): bench-daemon;select_epoll_poll_impl (s.c:1);pthread_cond_timedwait (libc.so.6) 3",
        ]
    )
    s = summarise(raw)
    assert s["camera readers"]["gil"] == 75.0 and s["camera readers"]["running"] == 25.0
    assert s["camera readers"]["gil_after"] == {"CodecContext__decode": 75.0}
    assert "inference workers" not in s  # only ever idle: left out
    assert s["event loop"]["gil"] == 75.0 and s["event loop"]["idle"] == 25.0


def test_busiest_thread_is_the_one_that_used_most_cpu_in_between() -> None:
    before = {1: ("source-cam0", 10.0), 2: ("beltsight-infer-640-0_0", 50.0)}
    after = {1: ("source-cam0", 14.0), 2: ("beltsight-infer-640-0_0", 52.0), 3: ("bench-daemon", 3.0)}
    assert busiest_thread(before, after, 8.0) == {"name": "source-cam0", "core_pct": 50.0}


def test_null_bench_lanes_take_a_gpu_lanes_shape_unless_told_otherwise() -> None:
    """The null model stands in for a GPU: one session and batches up to max_batch, not the CPU lanes'
    session per core and frame per batch; explicit --workers / --worker-batch win, --lanes lists phases."""
    shapes = {
        name: lane_shape(parse_args(argv), lanes)
        for name, argv, lanes in (
            ("default", ["--null-model"], "gpu"),
            ("max batch", ["--null-model", "--max-batch", "16"], "gpu"),
            ("cpu", ["--null-model"], "cpu"),
            ("device", ["--null-model", "--lanes", "device"], "device"),
            ("told", ["--null-model", "--workers", "2", "--worker-batch", "3"], "gpu"),
        )
    }
    assert shapes == {"default": (1, 8), "max batch": (1, 16), "cpu": (0, 0), "device": (1, 8), "told": (2, 3)}
    assert modes(parse_args(["--null-model"])) == [Mode("host", "auto", "gpu")]
    assert modes(parse_args(["--null-model", "--lanes", "cpu,gpu", "--processes", "1,auto"])) == [
        Mode("host", "1", "cpu"),
        Mode("host", "auto", "cpu"),
        Mode("host", "1", "gpu"),
        Mode("host", "auto", "gpu"),
    ]


def test_an_unknown_lane_shape_is_refused_before_anything_starts(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--null-model", "--lanes", "gpu,tpu"])
    assert "--lanes: tpu is not a lane shape" in capsys.readouterr().err


def test_startup_freshness_counts_only_the_entries_published_in_the_settle_span(
    redis_server: Callable[..., RedisServer],
) -> None:
    client = redis_server().client()
    try:
        for cam, lateness in (("cam0", 10), ("cam1", 300)):
            for i, published in enumerate((900, 1000, 1500, 2000, 2500)):  # ms; the span is [1.0 s, 2.5 s)
                result = FrameResult(cam, i, published - lateness, 0.0, 640, 480, 640, "demo", ())
                client.xadd(f"s:{cam}", encode_entry(result, published))
        got = startup_figures(client, {"cam0": "s:cam0", "cam1": "s:cam1"}, (1.0, 2.5))
    finally:
        client.close()
    assert got["entries"] == 6  # 1000, 1500 and 2000 of each camera: not 900 (before), not 2500 (the window's)
    assert got["latency_ms"] == {
        "p50": percentile([10, 10, 10, 300, 300, 300], 50, 1),
        "p99": percentile([10, 10, 10, 300, 300, 300], 99, 1),
        "max": 300,
    }
    assert startup_line(got).startswith("2 s") and "max    300" in startup_line(got)
    assert startup_line(None) == "none (--settle 0)"


def test_nice_process_sets_every_thread_of_the_process() -> None:
    script = (
        "import threading, time\n"
        "for _ in range(3): threading.Thread(target=time.sleep, args=(30,)).start()\n"
        "time.sleep(30)"
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 10
        while len(os.listdir(f"/proc/{proc.pid}/task")) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        nice_process(proc.pid, os.getpriority(os.PRIO_PROCESS, 0) + 3)
        tasks = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task")]
        assert len(tasks) == 4
        assert {os.getpriority(os.PRIO_PROCESS, t) for t in tasks} == {os.getpriority(os.PRIO_PROCESS, 0) + 3}
    finally:
        proc.kill()
        proc.wait()
