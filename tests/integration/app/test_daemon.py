"""The whole daemon against real servers: RTSP cameras -> ONNX Runtime -> Redis Streams."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import av
import onnxruntime as ort
import pytest

from tests.support.daemon_harness import (
    MODELS,
    REPO,
    InProcessDaemon,
    offline_detections,
    run_cli,
    write_config,
)
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip, RtspServer
from tests.support.streams import entries
from tests.support.waits import wait_until
from tools.kit import leash
from tools.model.coco_eval import evaluate

NAMES = ["bolt", "hex_nut", "washer", "l_bracket"]


def test_two_rtsp_cameras_of_different_resolutions_reach_redis_through_different_models(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    rtsp_server: Callable[..., RtspServer],
    clip_factory: Callable[..., Clip],
) -> None:
    small = clip_factory(640, 480, fps=10, seconds=3, seed=11, synthetic=True)
    large = clip_factory(1280, 720, fps=10, seconds=3, seed=12, synthetic=True)
    rtsp = rtsp_server({"small": small.path, "large": large.path})
    redis = redis_server()
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[
            {"id": "cam-small", "url": rtsp.url("small"), "read_timeout_s": 2.0},
            {"id": "cam-large", "url": rtsp.url("large"), "read_timeout_s": 2.0},
        ],
    )
    with InProcessDaemon(config) as d:
        wait_until(
            lambda: len(entries(redis, "cam-small")) >= 8 and len(entries(redis, "cam-large")) >= 8,
            90,
            "entries from both cameras",
            d,
        )
        port = d.daemon.health.port if d.daemon.health else 0
        health = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).read())
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()

    for camera, clip, size in (("cam-small", small, 640), ("cam-large", large, 800)):
        got = entries(redis, camera)
        assert {e["v"] for e in got} == {"1"}
        assert {e["model"].split(":")[0] for e in got} == {str(size)}
        assert {(e["w"], e["h"]) for e in got} == {(str(clip.width), str(clip.height))}
        seqs = [int(e["seq"]) for e in got]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        dets = [det for e in got for det in json.loads(e["dets"])]
        assert dets, f"no detections at all from {camera}"
        assert sum(int(e["n"]) for e in got) == len(dets)
        for det in dets:
            x1, y1, x2, y2 = det["box"]
            assert 0 <= x1 < x2 <= clip.width and 0 <= y1 < y2 <= clip.height
            assert det["label"] == NAMES[det["cls"]]
            assert 0.0 < det["score"] <= 1.0
        assert all(int(e["published_ms"]) >= int(e["captured_ms"]) for e in got)
    assert health["cameras"]["cam-small"]["state"] == "up"
    expected_workers = min(len(os.sched_getaffinity(0)), 4)  # engine.workers auto on the CPU provider
    for size in ("640", "800"):
        lane = health["models"][size]
        assert lane["workers"] == expected_workers and lane["batches"] > 0, lane
        assert lane["providers"] == ["CPUExecutionProvider"]
    assert 'beltsight_frames_inferred_total{camera="cam-large",model="800"}' in metrics


def _frames_of(clip: Clip) -> list[Any]:
    with av.open(str(clip.path)) as container:
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


def _ground_truth(clip: Clip) -> dict[int, list[tuple[int, list[float]]]]:
    assert clip.gt_path is not None
    gt = json.loads(clip.gt_path.read_text())
    return {int(i): [(a["cls"], a["box"]) for a in anns] for i, anns in gt["annotations"].items()}


@pytest.mark.parametrize(("width", "height", "size"), [(640, 480, 640), (1280, 720, 800)])
def test_pipeline_accuracy_matches_the_model_run_offline(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    clip_factory: Callable[..., Clip],
    width: int,
    height: int,
    size: int,
) -> None:
    """File source replayed frame-exact: every frame once, seq = frame index, same mAP as offline."""
    clip = clip_factory(width, height, fps=10, seconds=3, seed=21 + size, synthetic=True)
    redis = redis_server()
    conf, iou = 0.05, 0.5
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[{"id": "replay", "url": str(clip.path), "realtime": False}],
        conf_threshold=conf,
        iou_threshold=iou,
    )
    with InProcessDaemon(config) as d:
        wait_until(lambda: len(entries(redis, "replay")) >= clip.frames, 120, "every frame in Redis", d)
    got = entries(redis, "replay")
    assert [int(e["seq"]) for e in got] == list(range(clip.frames))
    assert {e["model"].split(":")[0] for e in got} == {str(size)}

    truth = _ground_truth(clip)
    daemon_dets = {int(e["seq"]): [(d["cls"], d["score"], d["box"]) for d in json.loads(e["dets"])] for e in got}
    session = ort.InferenceSession(str(MODELS[size]), providers=["CPUExecutionProvider"])
    offline = {
        i: offline_detections(MODELS[size], frame, size, conf, iou, session) for i, frame in enumerate(_frames_of(clip))
    }
    through_daemon = evaluate(truth, daemon_dets, NAMES, width, height)["mAP50"]
    reference = evaluate(truth, offline, NAMES, width, height)["mAP50"]
    assert reference >= 0.7, f"the model itself scores only {reference:.3f} on this clip"
    assert abs(through_daemon - reference) <= 0.02, (through_daemon, reference)


def test_configuration_error_exits_78_naming_the_key(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "bad.toml",
        redis_url="redis://127.0.0.1:1/0",
        cameras=[{"id": "a", "url": "rtsp://u:topsecret@127.0.0.1:1/x", "stall_s": -1}],
        max_batch=0,
    )
    result = run_cli("run", "-c", str(config))
    assert result.returncode == 78
    assert "engine.max_batch" in result.stderr
    assert "cameras.0.stall_s" in result.stderr
    assert "topsecret" not in result.stderr + result.stdout


def test_session_without_its_first_provider_refuses_to_start(tmp_path: Path) -> None:
    """No CUDA on this machine: asking for ["cuda", "cpu"] must not quietly run on the CPU."""
    config = write_config(
        tmp_path / "cuda.toml",
        redis_url="redis://127.0.0.1:1/0",
        cameras=[{"id": "a", "url": "rtsp://127.0.0.1:1/x", "model": 416}],
        providers=["cuda", "cpu"],
    )
    result = run_cli("run", "-c", str(config))
    assert result.returncode == 69, result.stdout + result.stderr
    logs = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert any(entry["event"] == "provider_unavailable" for entry in logs)


def test_broken_model_file_stops_startup_with_78_naming_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken-640.onnx"
    broken.write_bytes(b"this is not an onnx model")
    config = write_config(
        tmp_path / "m.toml", redis_url="redis://127.0.0.1:1/0", cameras=[{"id": "a", "url": "rtsp://127.0.0.1:1/x"}]
    )
    config.write_text(config.read_text().replace(str(MODELS[640]), str(broken)))
    result = run_cli("run", "-c", str(config))
    assert result.returncode == 78
    assert "broken-640.onnx" in result.stdout


def test_sigterm_drains_and_exits_0(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    clip = clip_factory(640, 480, fps=10, seconds=3, seed=31, synthetic=True)
    redis = redis_server()
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[{"id": "file", "url": str(clip.path), "realtime": True, "loop": True}],
    )
    proc = leash.spawn(
        [sys.executable, "-m", "daemon", "run", "-c", str(config)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until(lambda: len(entries(redis, "file")) >= 5, 60, "entries before SIGTERM")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out
    events = [json.loads(line)["event"] for line in out.splitlines() if line.startswith("{")]
    assert "shutdown_complete" in events


def test_class_filter_with_unknown_label_exits_78(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "c.toml",
        redis_url="redis://127.0.0.1:1/0",
        cameras=[{"id": "a", "url": "rtsp://127.0.0.1:1/x", "classes": ["bolt", "gear"]}],
    )
    result = run_cli("run", "-c", str(config))
    assert result.returncode == 78
    assert "cameras.0.classes" in result.stderr and "gear" in result.stderr
