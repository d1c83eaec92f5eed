"""`[cameras.gige]` applied to an open camera through its GenICam features (Aravis' `ArvCamera`).

Aravis picks the feature each camera has for a setting (`ExposureTime` or `ExposureTimeAbs`,
`Gain` or `GainRaw`, `AcquisitionFrameRate` and its enable switch). Each setting is applied on
its own: one the camera refuses (not an entry, out of range, read-only, not implemented) is named
in the log (`gige_feature_refused`) with the value the camera kept, and returned for /healthz;
the others still apply and the camera is read anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
from gi.repository import GLib

from daemon.config.gige import GigeConfig

log = structlog.get_logger("beltsight.source")

Refused = dict[str, dict[str, str]]
"""Feature -> {"wanted", "kept", "error"}."""

SOFTWARE_TRIGGER_SOURCE = "Software"


def apply_settings(camera: Any, cfg: GigeConfig, camera_id: str) -> Refused:
    """Apply every configured setting to `camera` (an `Aravis.Camera`); the refused ones, with what the camera kept."""
    refused: Refused = {}

    def setting(feature: str, wanted: object, apply: Callable[[], object], read: Callable[[], object]) -> None:
        try:
            apply()
        except GLib.Error as exc:
            kept = _read(read)
            refused[feature] = {"wanted": str(wanted), "kept": kept, "error": exc.message}
            log.warning(
                "gige_feature_refused",
                camera=camera_id,
                feature=feature,
                wanted=str(wanted),
                kept=kept,
                error=exc.message,
            )

    if cfg.pixel_format is not None:
        fmt = cfg.pixel_format
        setting(
            "PixelFormat",
            fmt,
            lambda: camera.set_pixel_format_from_string(fmt),
            camera.get_pixel_format_as_string,
        )
    if cfg.packet_size is not None and camera.is_gv_device():
        size = cfg.packet_size
        setting("GevSCPSPacketSize", size, lambda: camera.gv_set_packet_size(size), camera.gv_get_packet_size)
    _trigger(camera, cfg, setting)
    if cfg.frame_rate is not None and cfg.free_run:
        rate = cfg.frame_rate
        setting("AcquisitionFrameRate", rate, lambda: camera.set_frame_rate(rate), camera.get_frame_rate)
    if cfg.exposure_us is not None:
        exposure = cfg.exposure_us
        setting("ExposureTime", exposure, lambda: camera.set_exposure_time(exposure), camera.get_exposure_time)
    if cfg.gain is not None:
        gain = cfg.gain
        setting("Gain", gain, lambda: camera.set_gain(gain), camera.get_gain)
    return refused


def _trigger(camera: Any, cfg: GigeConfig, setting: Callable[..., None]) -> None:
    """Free run (every trigger off), or frame-start triggered by software or a hardware line."""
    if cfg.free_run:
        setting("TriggerMode", "Off", camera.clear_triggers, lambda: "unknown")
        return
    source = SOFTWARE_TRIGGER_SOURCE if cfg.trigger == "software" else cfg.trigger
    setting("TriggerSource", source, lambda: camera.set_trigger(source), camera.get_trigger_source)


def _read(read: Callable[[], object]) -> str:
    try:
        value = read()
    except GLib.Error:
        return "unknown"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
