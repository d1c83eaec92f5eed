"""A GigE Vision camera's settings (`[cameras.gige]`), and whether this Python can read such a camera.

A `gige://<device>` camera is read through Aravis (the GenICam / GigE Vision library) and its Python
binding (PyGObject's `gi`); both are optional: `aravis_problem` names what is missing, and a
`gige://` camera on a box without them fails `check-config` with that message.
"""

from __future__ import annotations

import functools
import re
from typing import Literal, Self
from urllib.parse import unquote

from pydantic import Field, field_validator, model_validator

from daemon.config.base import Section

GIGE_SCHEME = "gige"
ARAVIS_API = "0.8"
"""The Aravis API version (its GObject introspection namespace `Aravis-0.8`)."""
INSTALL_HINT = "tools/bootstrap.sh --gige (or: apt-get install gir1.2-aravis-0.8; pip install 'beltsight[gige]')"

PixelFormat = Literal["Mono8", "BayerRG8", "BayerGB8", "BayerGR8", "BayerBG8", "RGB8", "BGR8"]
"""The pixel formats the reader converts (GenICam PFNC names)."""

_TRIGGER = re.compile(r"^(free|software|[A-Za-z][A-Za-z0-9_]{0,31})$")


class GigeConfig(Section):
    """A GigE Vision camera's settings, applied through its GenICam features when the camera is opened
    and again after every reconnect. A feature the camera refuses is logged (`gige_feature_refused`)
    and shown on /healthz (`cameras.<id>.refused`) with the value the camera kept; the camera is read
    anyway. A key left out leaves the camera's own value."""

    frame_rate: float | None = Field(None, gt=0, le=1000)
    """Frames per second: the camera's `AcquisitionFrameRate` in free run; with `trigger = "software"`,
    the rate at which the daemon triggers the camera."""
    exposure_us: float | None = Field(None, gt=0)
    """Exposure time in microseconds (`ExposureTime`, or `ExposureTimeAbs` on older cameras)."""
    gain: float | None = Field(None, ge=0)
    """Gain (`Gain`, in dB on SFNC cameras; `GainRaw` units on older ones)."""
    pixel_format: PixelFormat | None = None
    """`PixelFormat`: Mono8, BayerRG8, BayerGB8, BayerGR8, BayerBG8 (de-Bayered), RGB8 or BGR8."""
    packet_size: int | None = Field(None, ge=576, le=16384)
    """GigE Vision stream packet size in bytes (`GevSCPSPacketSize`); jumbo frames need the NIC's MTU
    raised to match. Left out: Aravis negotiates the largest size the path carries."""
    trigger: str = "free"
    """`free` (free run at `frame_rate`), `software` (the daemon triggers each frame at `frame_rate`)
    or a hardware trigger line (`TriggerSource`, e.g. `Line0` for a photo-eye). A hardware-triggered
    camera may send nothing for as long as the belt is empty: only a lost control channel (no
    heartbeat reply) counts as down, never a pause between frames."""
    buffers: int = Field(8, ge=2, le=64)
    """Frame buffers queued for the stream (Aravis fills them in its own thread)."""

    @field_validator("trigger")
    @classmethod
    def _check_trigger(cls, v: str) -> str:
        if not _TRIGGER.match(v):
            raise ValueError("must be 'free', 'software' or a trigger line name such as 'Line0'")
        return v

    @model_validator(mode="after")
    def _check_software_rate(self) -> Self:
        if self.trigger == "software" and self.frame_rate is None:
            raise ValueError("trigger = 'software' needs frame_rate (the rate the daemon triggers at)")
        return self

    @property
    def free_run(self) -> bool:
        return self.trigger == "free"

    @property
    def hardware_trigger(self) -> bool:
        return self.trigger not in ("free", "software")


def gige_device(url: str) -> str:
    """`gige://<device>` -> the device as Aravis names it (an id, a serial number or an address)."""
    return unquote(url.split("://", 1)[1]).rstrip("/")


@functools.cache
def aravis_problem() -> str | None:
    """Why this Python cannot read GigE Vision cameras (the missing package named), or None."""
    try:
        import gi  # noqa: PLC0415 - optional: only where a gige:// camera is configured
    except ImportError:
        return f"gige:// cameras need PyGObject (the Python module gi), which is not installed: {INSTALL_HINT}"
    try:
        gi.require_version("Aravis", ARAVIS_API)
        from gi.repository import Aravis  # noqa: PLC0415, F401
    except (ValueError, ImportError):
        return (
            f"gige:// cameras need Aravis {ARAVIS_API} (Debian package gir1.2-aravis-0.8), which is not installed: "
            f"{INSTALL_HINT}"
        )
    return None


__all__ = ["GIGE_SCHEME", "GigeConfig", "PixelFormat", "aravis_problem", "gige_device"]
