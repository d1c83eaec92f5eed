"""The whole daemon on its device path with NumPy as the array module (no GPU here), against the
CPU path: a real RTSP camera, real Redis, the demo models on ONNX Runtime.

`Daemon(device=...)` replaces `choose_device`'s pick with "cuda" on NumPy, so the sources open
their streams through `daemon.ingest.hwdecode` (NVDEC is refused here: `hwdecode_fallback`, then CPU
decoding) and hand the decoded frames on, and the lanes fill their batches with the YUV letterbox
and call `run_device` (a real CPU session behind the DeviceEngine interface: `CudaStandIn`). Both
daemons run side by side on the same looping clip; entries of the same frame (`seq` mod the
clip's length: every RTSP client starts at the first frame) must carry the same objects.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import structlog

from daemon.app import Daemon
from daemon.config.settings import Settings
from daemon.core.xp import cupy_status
from tests.support.daemon_harness import InProcessDaemon, http_get, run_cli, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip, RtspServer
from tests.support.streams import entries
from tests.support.waits import wait_until
from tools.kit.device_standin import SEAM, CudaStandIn, StandInFactory

FRAMES_EACH = 24


def _by_frame(got: list[dict[str, str]], frames: int) -> dict[int, list[dict[str, object]]]:
    return {int(e["seq"]) % frames: json.loads(e["dets"]) for e in got}


def _same_objects(cpu: list[dict[str, object]], dev: list[dict[str, object]], tolerance_px: float) -> bool:
    if sorted(int(str(d["cls"])) for d in cpu) != sorted(int(str(d["cls"])) for d in dev):
        return False
    for det in cpu:
        box = [float(v) for v in det["box"]]  # type: ignore[attr-defined]
        near = [
            max(abs(a - float(b)) for a, b in zip(box, d["box"], strict=True))  # type: ignore[call-overload]
            for d in dev
            if d["cls"] == det["cls"]
        ]
        if min(near) >= tolerance_px:
            return False
    return True


def test_device_path_on_numpy_publishes_what_the_cpu_path_publishes(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    rtsp_server: Callable[..., RtspServer],
    clip_factory: Callable[..., Clip],
) -> None:
    clip = clip_factory(640, 480, fps=10, seconds=3, seed=41, synthetic=True)
    rtsp = rtsp_server({"belt": clip.path})
    redis = redis_server()
    camera = {"url": rtsp.url("belt"), "read_timeout_s": 2.0}
    cpu_config, dev_config = (
        write_config(
            tmp_path / f"{name}.toml",
            redis_url=redis.url,
            cameras=[{"id": f"{name}-cam", **camera}],
            workers=1,
            conf_threshold=0.4,
        )
        for name in ("cpu", "dev")
    )
    factories: list[StandInFactory] = []

    def device_daemon(d: InProcessDaemon) -> InProcessDaemon:
        settings: Settings = d.daemon.settings
        factories.append(StandInFactory(settings.engine, d.metrics))
        d.daemon = Daemon(settings, metrics=d.metrics, engine_factory=factories[0], device=SEAM)
        return d

    def enough() -> bool:
        return len(entries(redis, "cpu-cam")) >= FRAMES_EACH and len(entries(redis, "dev-cam")) >= FRAMES_EACH

    with (
        structlog.testing.capture_logs() as logs,
        InProcessDaemon(cpu_config) as cpu,
        device_daemon(InProcessDaemon(dev_config)) as dev,
    ):
        wait_until(enough, 120, f"{FRAMES_EACH} entries from each path", cpu)
        assert dev.error is None
    stand_ins = [e for _, e in factories[0].built if isinstance(e, CudaStandIn)]
    assert sum(e.device_runs for e in stand_ins) >= FRAMES_EACH  # every batch through run_device ...
    assert sum(e.runs for e in stand_ins) == 0  # ... none through the host path
    fallbacks = [e for e in logs if e["event"] == "hwdecode_fallback"]
    assert fallbacks and {e["camera"] for e in fallbacks} == {"dev-cam"}  # opened through hwdecode, CPU path not

    cpu_got, dev_got = entries(redis, "cpu-cam"), entries(redis, "dev-cam")
    for got in (cpu_got, dev_got):
        assert {e["model"].split(":")[0] for e in got} == {"640"}
        assert {(e["w"], e["h"]) for e in got} == {("640", "480")}
    cpu_frames, dev_frames = _by_frame(cpu_got, clip.frames), _by_frame(dev_got, clip.frames)
    both = sorted(set(cpu_frames) & set(dev_frames))
    assert len(both) >= 8, (sorted(cpu_frames), sorted(dev_frames))  # latest-frame-wins: most frames are shared
    assert sum(len(cpu_frames[i]) for i in both) >= len(both)  # the scenes have parts to find
    agreeing = [i for i in both if _same_objects(cpu_frames[i], dev_frames[i], tolerance_px=4.0)]
    # bilinear (device) against swscale's area filter (CPU): a borderline score may cross the threshold
    assert len(agreeing) >= 0.8 * len(both), {i: (cpu_frames[i], dev_frames[i]) for i in both if i not in agreeing}


@pytest.mark.skipif(cupy_status()[0], reason="CuPy can use a CUDA device here: device = cuda may be served")
def test_run_with_device_cuda_and_no_cuda_session_exits_69_saying_why(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "cuda.toml",
        redis_url="redis://127.0.0.1:1/0",
        cameras=[{"id": "a", "url": "rtsp://127.0.0.1:1/x"}],
        providers=["cpu"],
        device="cuda",
    )
    result = run_cli("run", "-c", str(config))
    assert result.returncode == 69, result.stdout + result.stderr
    logs = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    failed = [entry for entry in logs if entry["event"] == "gpu_unavailable"]
    assert len(failed) == 1, logs
    assert '[engine] device = "cuda"' in failed[0]["error"] and "CUDAExecutionProvider" in failed[0]["error"]
    assert not any(entry["event"] == "daemon_ready" for entry in logs)


def _device_replay(
    tmp_path: Path, redis: RedisServer, clips: dict[str, Clip], processes: int
) -> tuple[dict[str, list[dict[str, str]]], list[CudaStandIn], InProcessDaemon]:
    """Every frame of `clips` (frame-exact replays) through the device path on NumPy."""
    config = write_config(
        tmp_path / f"dev-{processes}.toml",
        redis_url=redis.url,
        cameras=[{"id": cam, "url": str(clip.path), "realtime": False} for cam, clip in clips.items()],
        processes=processes,
        workers=1,
    )
    d = InProcessDaemon(config)
    factory = StandInFactory(d.daemon.settings.engine, d.metrics)
    d.daemon = Daemon(d.daemon.settings, metrics=d.metrics, engine_factory=factory, device=SEAM)
    with d:
        wait_until(
            lambda: all(len(entries(redis, cam)) >= clip.frames for cam, clip in clips.items()),
            120,
            "every frame of every replay in Redis",
            d,
        )
        decoders = d.daemon.pipeline.decoders if d.daemon.pipeline is not None else None
        assert (decoders is not None) == (processes > 1)
        assert decoders is None or decoders.yuv, "lanes on the device take the decoded YUV planes"
        if decoders is not None:  # the live view: RGB made from the slot's YUV planes on the host
            assert d.daemon.health is not None
            reply = http_get(d.daemon.health.port, f"/cameras/{next(iter(clips))}/snapshot.jpg")
            assert reply.status == 200 and reply.body[:2] == b"\xff\xd8"
    got = {cam: entries(redis, cam) for cam in clips}
    redis.client().flushall()
    return got, [e for _, e in factory.built if isinstance(e, CudaStandIn)], d


def test_decoder_processes_hand_the_device_path_the_planes_the_threads_decode(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    """Lanes on the device with NVDEC unavailable (PyAV here has no CUDA): `processes = 2` decodes in a
    decoder process, whose shared-memory slots carry the decoded YUV planes (not RGB scaled there); the
    device letterboxes them as it does the threads' decoded frames: the same entries, frame by frame."""
    clips = {
        "a": clip_factory(640, 480, fps=10, seconds=2, seed=51, synthetic=True),
        "b": clip_factory(1280, 720, fps=10, seconds=2, seed=52, synthetic=True),
    }
    redis = redis_server()
    with structlog.testing.capture_logs() as logs:
        threads, _, _ = _device_replay(tmp_path, redis, clips, 1)
        procs, stand_ins, _ = _device_replay(tmp_path, redis, clips, 2)
    plans = [e for e in logs if e["event"] == "engine_processes"]
    assert [(e["processes"], e["frames"]) for e in plans] == [(1, "yuv"), (2, "yuv")], plans
    assert sum(e.device_runs for e in stand_ins) > 0 and sum(e.runs for e in stand_ins) == 0, "all on run_device"
    for cam, clip in clips.items():
        assert [int(e["seq"]) for e in procs[cam]] == list(range(clip.frames))
        assert [int(e["seq"]) for e in threads[cam]] == list(range(clip.frames))
        for one, two in zip(threads[cam], procs[cam], strict=True):
            assert (one["w"], one["h"], one["model"], one["n"]) == (two["w"], two["h"], two["model"], two["n"])
            assert json.loads(one["dets"]) == json.loads(two["dets"]), "the same planes, the same letterbox"
        assert sum(int(e["n"]) for e in procs[cam]) > 0, "detections at all"
