"""The one place a camera's kind picks its link: the URL's scheme.

RTSP and files go through PyAV (`daemon.ingest.av_link`; in a decoder process with
`daemon.ingest.decoders` where `[engine] processes` asks for them), `gige://` through Aravis
(`daemon.ingest.gige`, imported only where such a camera is configured, so a box without Aravis
still runs RTSP cameras).
"""

from __future__ import annotations

from daemon.config.cameras import CameraConfig
from daemon.ingest.av_link import AvLink
from daemon.ingest.decoders import DecoderPool
from daemon.ingest.hwdecode import HwDecode
from daemon.ingest.link import Link, LinkParts


def make_link(
    camera: CameraConfig, parts: LinkParts, hwdecode: HwDecode | None, decoders: DecoderPool | None = None
) -> Link:
    """The link for the camera's kind (its URL's scheme); RTSP and files in a decoder process where
    `decoders` is given (`[engine] processes` above 1), the frames are decoded on the CPU (no
    `hwdecode`, or a pool that hands lanes on the device their YUV planes: NVDEC unavailable) and
    the camera keeps no packet ring for clips (the ring must live beside the clip recorder)."""
    if camera.kind == "gige":
        from daemon.ingest.gige.link import GigeLink  # noqa: PLC0415 - Aravis only where a gige:// camera runs

        return GigeLink(camera, parts)
    if decoders is not None and (hwdecode is None or decoders.yuv) and parts.packets is None:
        return decoders.link(camera, parts)
    return AvLink(camera, parts, hwdecode)
