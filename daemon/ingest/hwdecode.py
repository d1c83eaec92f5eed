"""Hardware decoding on NVDEC through PyAV's `HWAccel`, never a silent fallback; frames as YUV planes.

PyAV (>= 17; the installed one is checked at run time) decodes on NVDEC when given
`av.codec.hwaccel.HWAccel("cuda", allow_software_fallback=False, is_hw_owned=...)`: with the
fallback off, a stream NVDEC cannot take, or a host where FFmpeg cannot create a CUDA device,
is an error instead of quiet CPU decoding. `open_input` turns that error into CPU decoding with
a WARNING `hwdecode_fallback` saying why; `nvdec_status` is what `doctor` reports. PyAV's
Linux x86_64 wheels include NVDEC; its aarch64 wheels (Jetson) have no CUDA: there the daemon
decodes on the CPU and uploads the YUV planes.

`yuv_frame` turns a decoded frame into a `YuvFrame` for `daemon.inference.device_preprocess`: a device
(CUDA) frame's NV12 planes through DLPack (`xp.from_dlpack`, pitched, no copy) when `xp` is
CuPy; a CPU frame's planes as NumPy views of FFmpeg's buffers, uploaded when `xp` is CuPy.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import av
import av.container
import av.error
import numpy as np
import structlog

from daemon.core.redaction import SECRETS
from daemon.core.xp import DeviceChoice
from daemon.ingest.decoding import error_text

log = structlog.get_logger("beltsight.hwdecode")

MIN_PYAV = (17, 0)
"""`is_hw_owned` (frames kept on the device, DLPack export) arrived in PyAV 17."""


@dataclass(frozen=True, slots=True)
class HwDecodeStatus:
    """Whether NVDEC decoding is available to this process, and why (or why not)."""

    available: bool
    reason: str
    pyav: str = av.__version__

    def line(self) -> str:
        return f"{'available' if self.available else 'unavailable'}: {self.reason} (PyAV {self.pyav})"


def _version(text: str) -> tuple[int, int]:
    parts = [int("".join(ch for ch in p if ch.isdigit()) or 0) for p in text.split(".")[:2]]
    major, minor, *_ = [*parts, 0, 0]
    return major, minor


def _hwaccel_module() -> Any | None:
    try:
        from av.codec import hwaccel  # noqa: PLC0415 - absent from PyAV < 14
    except ImportError:
        return None
    return hwaccel


def hwaccel(device_id: int = 0, *, on_device: bool) -> Any:
    """The HWAccel to open a stream with: CUDA `device_id`, no software fallback; frames stay
    on the device when `on_device` (for CuPy), else they come back to host memory as NV12."""
    module = _hwaccel_module()
    if module is None:
        raise RuntimeError(f"PyAV {av.__version__} has no av.codec.hwaccel")
    return module.HWAccel("cuda", device=str(device_id), allow_software_fallback=False, is_hw_owned=on_device)


def nvdec_status(device_id: int = 0) -> HwDecodeStatus:
    """Can FFmpeg in this PyAV open a CUDA device for H.264 decoding? (creates one and frees it)."""
    if _version(av.__version__) < MIN_PYAV:
        return HwDecodeStatus(False, f"PyAV {av.__version__} is older than 17 (no device frames)")
    module = _hwaccel_module()
    if module is None:
        return HwDecodeStatus(False, "this PyAV has no av.codec.hwaccel")
    if "cuda" not in module.hwdevices_available():
        why = "PyAV's aarch64 wheels (Jetson) are built without CUDA" if platform.machine() == "aarch64" else ""
        return HwDecodeStatus(False, f"this PyAV's FFmpeg was built without CUDA {why}".strip())
    try:
        hwaccel(device_id, on_device=False).create(av.Codec("h264", "r"))
    except (av.error.FFmpegError, NotImplementedError, RuntimeError, ValueError) as exc:
        return HwDecodeStatus(False, f"FFmpeg could not create CUDA device {device_id} for NVDEC ({_why(exc)})")
    return HwDecodeStatus(True, f"NVDEC on CUDA device {device_id}")


def _why(exc: BaseException) -> str:
    text = error_text(exc)
    if "not permitted" in text.lower():
        text += ": no usable NVIDIA driver or GPU"
    return SECRETS.scrub(text)


def open_input(
    url: str,
    *,
    options: Mapping[str, str] | None = None,
    timeout: float | tuple[float, float] | None = None,
    device_id: int = 0,
    on_device: bool = False,
    camera: str = "",
) -> tuple[Any, bool]:
    """(container, decoding on NVDEC): NVDEC when this stream can have it, else CPU decoding
    with a WARNING `hwdecode_fallback` saying why (never silently)."""
    opts = dict(options or {})
    try:
        accel = hwaccel(device_id, on_device=on_device)
        container = av.open(url, options=opts, timeout=timeout, hwaccel=accel)
    except (av.error.FFmpegError, NotImplementedError, RuntimeError) as exc:
        if isinstance(exc, av.error.ExitError | TimeoutError):
            raise  # the camera did not answer: not a decoder matter
        log.warning("hwdecode_fallback", camera=camera, device=device_id, reason=_why(exc))
        return av.open(url, options=opts, timeout=timeout), False
    return container, True


@dataclass(frozen=True, slots=True)
class HwDecode:
    """How a camera source opens its streams when the lanes run on the device: NVDEC on CUDA
    `device_id` where the stream allows (else CPU decoding, logged), frames left in device memory
    when `on_device` (`xp` is CuPy), else copied back to the host as NV12."""

    device_id: int = 0
    on_device: bool = False

    def open(
        self,
        url: str,
        *,
        options: Mapping[str, str] | None = None,
        timeout: float | tuple[float, float] | None = None,
        camera: str = "",
    ) -> av.container.InputContainer:
        """The opened input container (see `open_input`)."""
        container: av.container.InputContainer
        container, _nvdec = open_input(
            url, options=options, timeout=timeout, device_id=self.device_id, on_device=self.on_device, camera=camera
        )
        return container


def source_decode(choice: DeviceChoice | None, device_id: int) -> HwDecode | None:
    """How camera sources open their streams for a lane on the device (None: the CPU path)."""
    if choice is None or choice.device != "cuda":
        return None
    return HwDecode(device_id, on_device=choice.xp is not np)
