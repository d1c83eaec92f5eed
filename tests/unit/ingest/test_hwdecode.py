"""NVDEC through PyAV's HWAccel (daemon.ingest.hwdecode): truthful status, a logged (never silent) CPU
fallback, and decoded frames as YUV planes for the device letterbox, on real H.264 clips.

This machine has no NVIDIA GPU: the status must say so and opening a stream must fall back to
CPU decoding with `hwdecode_fallback`. On a GPU host the same tests check the NVDEC side.
"""

from __future__ import annotations

import os
from pathlib import Path

import av
import numpy as np
import pytest
import structlog

from daemon.core.frames import Letterbox
from daemon.core.yuv import yuv_frame
from daemon.inference.device_preprocess import DeviceBatchTensor
from daemon.inference.layouts import InputConvention
from daemon.ingest.hwdecode import nvdec_status, open_input
from tools.kit.synth.video import h264_writer

HAS_NVIDIA = os.path.exists("/dev/nvidia0")


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hw") / "clip.mp4"
    rng = np.random.default_rng(0)
    base = rng.integers(30, 220, (30, 40, 3)).astype(np.uint8).repeat(8, 0).repeat(8, 1)  # 240 x 320
    with h264_writer(path, 320, 240, 10, crf=18, preset="ultrafast") as write:
        for i in range(6):
            write(np.roll(base, i * 4, axis=1))
    return path


def test_status_is_truthful() -> None:
    status = nvdec_status()
    assert status.pyav == av.__version__
    if HAS_NVIDIA:
        assert status.available, status.reason
    else:
        assert not status.available
        assert "CUDA" in status.reason
        assert status.line().startswith("unavailable: ")


def test_a_stream_without_nvdec_falls_back_to_the_cpu_and_says_so(clip: Path) -> None:
    with structlog.testing.capture_logs() as logs:
        container, on_nvdec = open_input(str(clip), camera="cam1")
    with container:
        frames = list(container.decode(video=0))
    assert len(frames) == 6
    fallbacks = [e for e in logs if e["event"] == "hwdecode_fallback"]
    if HAS_NVIDIA and on_nvdec:
        assert not fallbacks
        return
    assert not on_nvdec
    assert len(fallbacks) == 1
    assert fallbacks[0]["camera"] == "cam1"
    assert fallbacks[0]["reason"]
    assert frames[0].format.name == "yuv420p"


def test_cpu_frames_become_views_of_ffmpegs_planes(clip: Path) -> None:
    with av.open(str(clip)) as container:
        vframe = next(container.decode(video=0))
        frame = yuv_frame(vframe, np)
        assert (frame.width, frame.height, frame.nv12) == (320, 240, False)
        assert frame.y.shape == (240, vframe.planes[0].line_size)  # pitched, not copied
        assert not frame.y.flags.owndata
        lb = Letterbox.fit(320, 240, 416)
        out = DeviceBatchTensor(np, 1, 416, InputConvention(scale=1.0)).fill([(frame, lb)])
        gbr = vframe.reformat(width=lb.new_w, height=lb.new_h, format="gbrp", interpolation="BILINEAR")
        sws = np.stack(
            [np.frombuffer(memoryview(gbr.planes[i]), np.uint8).reshape(lb.new_h, -1)[:, : lb.new_w] for i in (2, 0, 1)]
        )
        got = out[0, :, lb.pad_y : lb.pad_y + lb.new_h, lb.pad_x : lb.pad_x + lb.new_w]
        assert np.abs(got - sws).mean() < 2.0  # the clip's sharp 8-pixel tiles; swscale filters a little wider
        nv12 = yuv_frame(vframe.reformat(format="nv12"), np)
        assert nv12.nv12
        again = DeviceBatchTensor(np, 1, 416, InputConvention(scale=1.0)).fill([(nv12, lb)])
        np.testing.assert_array_equal(again, out)  # the same planes, interleaved


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_NVIDIA, reason="no NVIDIA GPU on this machine: NVDEC cannot run")
def test_nvdec_frames_match_cpu_decoded_frames(clip: Path) -> None:
    cupy = pytest.importorskip("cupy")
    container, on_nvdec = open_input(str(clip), on_device=True)
    assert on_nvdec
    with container, av.open(str(clip)) as cpu:
        for hw, sw in zip(container.decode(video=0), cpu.decode(video=0), strict=True):
            dev = yuv_frame(hw, cupy)
            host = yuv_frame(sw, np)
            y = cupy.asnumpy(dev.y)[:240, :320]
            assert np.abs(y.astype(int) - host.y[:240, :320]).max() <= 1
