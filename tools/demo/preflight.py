"""What `tools/demo.py` checks before it starts anything, with one-line messages a new user can act on.

- the ports it needs are free on 127.0.0.1 (and if not, which process probably holds one and the
  option that chooses another);
- `redis-server` is installed, and the system Python can import GStreamer's RTSP server and the
  elements `tools/kit/rtsp_server.py` uses (and if not, which Debian packages `tools/bootstrap.sh`
  would install).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tools.kit.ports import port_in_use

GST_PACKAGES = (
    "python3-gi gir1.2-gst-rtsp-server-1.0 gstreamer1.0-plugins-base gstreamer1.0-plugins-good "
    "gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly"
)
# What tools/kit/rtsp_server.py builds its pipelines from.
GST_PROBE = """
import gi
gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import Gst, GstRtspServer
Gst.init(None)
missing = [e for e in ("appsrc", "h264parse", "rtph264pay") if Gst.ElementFactory.find(e) is None]
if missing:
    raise SystemExit("missing GStreamer elements: " + ", ".join(missing))
"""


class PreflightError(Exception):
    """A problem the user can fix; `str()` is the one-line message."""


@dataclass(frozen=True, slots=True)
class PortNeed:
    port: int
    what: str  # "Redis", "RTSP server", "health endpoint"
    option: str  # the demo's option that chooses another port


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table, encoding="ascii") as fh:
            next(fh, None)
            for row in fh:
                cols = row.split()
                local, state, inode = cols[1], cols[3], cols[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                    inodes.add(inode)
    return inodes


def port_holder(port: int) -> str | None:
    """`name (pid N)` of a process listening on the port, where /proc lets us see it."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    targets = {f"socket:[{inode}]" for inode in inodes}
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            for fd in (pid_dir / "fd").iterdir():
                if os.readlink(fd) in targets:
                    name = (pid_dir / "comm").read_text().strip()
                    return f"{name} (pid {pid_dir.name})"
        except OSError:
            continue  # gone, or another user's process
    return None


def check_ports(needs: list[PortNeed]) -> None:
    for need in needs:
        if not port_in_use(need.port):
            continue
        holder = port_holder(need.port)
        held = f"held by {holder}" if holder else "held by a process this user cannot see"
        hint = " - probably an earlier demo still running" if holder and _looks_like_demo(holder) else ""
        raise PreflightError(
            f"port {need.port} ({need.what}) on 127.0.0.1 is already in use, {held}{hint}; "
            f"stop it, or choose another port with {need.option} N"
        )


def _looks_like_demo(holder: str) -> bool:
    return holder.split(maxsplit=1)[0] in {"redis-server", "python3", "python", "beltsight"}


def check_redis_server() -> str:
    redis = shutil.which("redis-server")
    if redis is None:
        raise PreflightError(
            "redis-server is not installed (not on PATH): run tools/bootstrap.sh, which installs the Debian "
            "package redis-server"
        )
    return redis


def check_gstreamer(system_python: str) -> None:
    if not Path(system_python).exists():
        raise PreflightError(
            f"{system_python} does not exist: GStreamer's RTSP server runs under the system Python; "
            f"run tools/bootstrap.sh, which installs python3 and {GST_PACKAGES}"
        )
    try:
        probe = subprocess.run(
            [system_python, "-c", GST_PROBE], capture_output=True, text=True, timeout=60, check=False
        )
    except subprocess.TimeoutExpired:
        raise PreflightError(f"{system_python} took over 60 s to load GStreamer") from None
    if probe.returncode != 0:
        detail = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        raise PreflightError(
            f"GStreamer's RTSP server is not usable from {system_python} ({detail}): run tools/bootstrap.sh, "
            f"which installs the Debian packages {GST_PACKAGES}"
        )
