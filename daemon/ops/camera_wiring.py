"""The camera set's wiring: each camera's reader made the same way at start and when added live, and
the control of the set (`daemon.ops.cameras`) listed by the live view and served by its API."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import structlog

from daemon.batching.hub import FrameHub
from daemon.batching.router import ModelRouter
from daemon.config.cameras import CameraConfig
from daemon.config.settings import Settings
from daemon.core.frames import StatusEvent
from daemon.core.metrics import Metrics
from daemon.core.xp import DeviceChoice
from daemon.inference.build import ProvedModels
from daemon.ingest.decoder_plan import decoder_pool
from daemon.ingest.decoders import DecoderPool
from daemon.ingest.hwdecode import nvdec_status, source_decode
from daemon.ingest.sources import CameraSource
from daemon.ops.cameras import CameraParts, CamerasControl
from daemon.ops.http import HealthServer
from daemon.ops.http.api_cameras import CamerasApi
from daemon.ops.logging import configure_logging
from daemon.publish.clips.recorder import ClipRecorder

log = structlog.get_logger("beltsight.app")


def decoders(settings: Settings, models: ProvedModels, metrics: Metrics) -> DecoderPool | None:
    """The decoder processes `[engine] processes` asks for (`daemon.ingest.decoder_plan.decoder_pool`), planned
    once for the cameras at start; None: every camera in a thread of the daemon. Lanes on the device
    keep their cameras in threads where NVDEC decodes them (frames stay on the device); where it
    cannot (a PyAV built without CUDA), the processes decode and hand the device their YUV planes."""
    hw = source_decode(models.device, settings.engine.cuda.device_id)
    nvdec = hw is not None and nvdec_status(hw.device_id).available
    logs = partial(configure_logging, settings.logging.format, settings.logging.level)
    cameras = settings.instance_cameras()
    return decoder_pool(
        settings.engine.processes,
        cameras,
        metrics,
        on_device=nvdec,
        yuv=hw is not None,
        clips=settings.clips.enabled,
        log_setup=logs,
    )


@dataclass(frozen=True, slots=True)
class Readers:
    """Where a camera's reader hands its work besides the hub: the decoder processes and the clips."""

    decoders: DecoderPool | None = None
    clips: ClipRecorder | None = None

    def forgetters(self) -> tuple[Callable[[str], None], ...]:
        """What holds a camera removed for good (`CameraParts.forget`)."""
        return tuple(x.forget for x in (self.decoders, self.clips) if x is not None)


def source_factory(
    settings: Settings,
    device: DeviceChoice,
    *,
    hub: FrameHub,
    router: ModelRouter,
    metrics: Metrics,
    on_status: Callable[[StatusEvent], None],
    readers: Readers = Readers(),
) -> Callable[[CameraConfig], CameraSource]:
    """A camera's reader, handing frames to the hub, routed to a model size (at start and when added live);
    in a decoder process where there are some, its packets kept for clips where they are on."""
    hw = source_decode(device, settings.engine.cuda.device_id)  # None: the CPU path

    def make(camera: CameraConfig) -> CameraSource:
        ring = readers.clips.ring_for(camera.id, camera.kind) if readers.clips is not None else None
        return CameraSource(
            camera,
            consumer=hub,
            route=router,
            on_status=on_status,
            metrics=metrics,
            hwdecode=hw,
            decoders=readers.decoders,
            packets=ring,
        )

    return make


def instance_sources(
    settings: Settings, metrics: Metrics, make: Callable[[CameraConfig], CameraSource]
) -> list[CameraSource]:
    """The readers of this instance's cameras ([instance], daemon.config.sharding), none started."""
    cameras = settings.instance_cameras()
    inst = settings.instance
    metrics.instance_cameras.labels(shard=str(inst.shard), shards=str(inst.shards)).set(len(cameras))
    if inst.shards > 1:
        log.info(
            "instance_cameras",
            shard=inst.shard,
            shards=inst.shards,
            cameras=[c.id for c in cameras],
            of=len(settings.enabled_cameras()),
        )
    return [make(camera) for camera in cameras]


def camera_sources(
    settings: Settings,
    models: ProvedModels,
    *,
    hub: FrameHub,
    metrics: Metrics,
    on_status: Callable[[StatusEvent], None],
    readers: Readers,
) -> tuple[ModelRouter, Callable[[CameraConfig], CameraSource], list[CameraSource]]:
    """The cameras' router to a model size, the maker of a camera's reader (at start and when one is
    added live, `daemon.ops.cameras`) and this instance's readers."""
    router = ModelRouter(models.infos, {c.id: c.model for c in settings.instance_cameras() if c.model is not None})
    make_source = source_factory(
        settings, models.device, hub=hub, router=router, metrics=metrics, on_status=on_status, readers=readers
    )
    return router, make_source, instance_sources(settings, metrics, make_source)


def wire_cameras(settings: Settings, parts: CameraParts, health: HealthServer | None) -> CamerasControl:
    """The camera set (`daemon.ops.cameras`), listed by the live view and, on the endpoint, its API."""
    cameras = CamerasControl(settings, parts)
    parts.liveview.configured_from(cameras.listing)
    if health is not None:
        CamerasApi(health, cameras).register()
    return cameras


__all__ = ["Readers", "camera_sources", "decoders", "instance_sources", "source_factory", "wire_cameras"]
