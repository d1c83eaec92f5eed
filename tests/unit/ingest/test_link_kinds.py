"""Which link reads a camera (daemon/ingest/kinds.make_link): a decoder process where the pool is
given, except for a camera whose packet ring feeds clips (the ring must be in the recorder's process)."""

from __future__ import annotations

import threading

from daemon.config.cameras import CameraConfig
from daemon.core.clock import SYSTEM_CLOCK
from daemon.core.metrics import Metrics
from daemon.core.packets import PacketRing
from daemon.ingest.av_link import AvLink
from daemon.ingest.decoder_plan import decoder_pool
from daemon.ingest.decoders import DecoderPool
from daemon.ingest.geometry import SourceGeometry
from daemon.ingest.hwdecode import HwDecode
from daemon.ingest.kinds import make_link
from daemon.ingest.link import LinkParts


def _parts(packets: PacketRing | None) -> LinkParts:
    geometry = SourceGeometry("cam1", lambda w, h: 640, lambda kind, detail: None)
    return LinkParts(
        None,  # type: ignore[arg-type]  # the consumer is never reached: no link is started
        geometry,
        Metrics(),
        SYSTEM_CLOCK,
        threading.Event(),
        lambda *a: None,
        lambda kind, detail: None,
        packets,
    )


def test_a_camera_recording_clips_is_read_in_the_daemons_process_the_others_in_the_pool() -> None:
    camera = CameraConfig(id="cam1", url="rtsp://127.0.0.1:8554/cam1")
    pool = DecoderPool(2, Metrics())
    try:
        assert not isinstance(make_link(camera, _parts(None), None, pool), AvLink)
        ring = PacketRing("cam1", keep_ms=8000, max_bytes=1 << 20)
        assert isinstance(make_link(camera, _parts(ring), None, pool), AvLink)
        assert isinstance(make_link(camera, _parts(None), None, None), AvLink)
    finally:
        pool.close()


def test_clips_keep_every_camera_in_the_daemons_process_and_say_why() -> None:
    cameras = [CameraConfig(id=f"cam{i}", url=f"rtsp://127.0.0.1:8554/cam{i}") for i in range(24)]
    pool = decoder_pool(3, cameras, Metrics(), on_device=False)
    try:
        assert pool is not None and pool.size == 2
    finally:
        if pool is not None:
            pool.close()
    assert decoder_pool("auto", cameras, Metrics(), on_device=False, clips=True) is None
    assert decoder_pool(3, cameras, Metrics(), on_device=False, clips=True) is None


def test_lanes_on_the_device_keep_nvdec_cameras_in_threads_and_give_the_others_yuv_processes() -> None:
    """Where NVDEC decodes (frames stay on the device) every camera stays in a thread; where it cannot, the
    pool applies and hands on YUV planes, and the camera opened for the device is read in the pool."""
    cameras = [CameraConfig(id=f"cam{i}", url=f"rtsp://127.0.0.1:8554/cam{i}") for i in range(24)]
    assert decoder_pool(3, cameras, Metrics(), on_device=True, yuv=True) is None
    pool = decoder_pool(3, cameras, Metrics(), on_device=False, yuv=True)
    rgb = DecoderPool(1, Metrics())
    try:
        assert pool is not None and pool.yuv and not rgb.yuv
        hw = HwDecode(0, on_device=False)  # a lane on the device (NVDEC unavailable here)
        assert not isinstance(make_link(cameras[0], _parts(None), hw, pool), AvLink)
        assert isinstance(make_link(cameras[0], _parts(None), hw, rgb), AvLink), "an RGB pool never feeds the device"
    finally:
        rgb.close()
        if pool is not None:
            pool.close()
