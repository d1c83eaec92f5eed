"""The one place a camera's kind picks its link: the URL's scheme.

RTSP and files go through PyAV (`daemon.ingest.av_link`), `gige://` through Aravis
(`daemon.ingest.gige`, imported only where such a camera is configured, so a box without Aravis
still runs RTSP cameras).
"""

from __future__ import annotations

from daemon.config.cameras import CameraConfig
from daemon.ingest.av_link import AvLink
from daemon.ingest.hwdecode import HwDecode
from daemon.ingest.link import Link, LinkParts


def make_link(camera: CameraConfig, parts: LinkParts, hwdecode: HwDecode | None) -> Link:
    """The link for the camera's kind (its URL's scheme)."""
    if camera.kind == "gige":
        from daemon.ingest.gige.link import GigeLink  # noqa: PLC0415 - Aravis only where a gige:// camera runs

        return GigeLink(camera, parts)
    return AvLink(camera, parts, hwdecode)
