"""A real RTSP server that loops H.264 (or H.265) MP4 files, for tests and the demo.

Run it with Debian's interpreter (a virtualenv cannot import ``gi``)::

    /usr/bin/python3 tools/kit/rtsp_server.py --port 0 --stream cam1=a.mp4 --stream cam2=b.mp4 \
        [--user U --password P] [--host 127.0.0.1]

Stdout protocol (each line flushed at once; nothing else is printed on stdout):

    STREAM <mount> rtsp://127.0.0.1:<port>/<mount>     one line per --stream, in order
    READY rtsp://127.0.0.1:<port>                       last line: the server accepts clients

URLs printed never contain credentials. Then the server runs until SIGTERM/SIGINT (clean exit 0)
or SIGKILL. Errors go to stderr with exit status 2 (bad arguments, unreadable file, port in use).

How it works: each MP4 is demuxed once into memory (``filesrc ! qtdemux ! appsink``: the H.264
access units with their timestamps, no re-encoding). Every client gets its own media (not shared),
so every connection starts at the file's first frame, a keyframe, and decodes at once; the access
units are replayed through ``appsrc ! h264parse config-interval=-1 ! rtph264pay`` with timestamps
shifted by one file duration per pass, forever, paced at the native frame rate by the pipeline
clock. ``h264parse config-interval=-1`` repeats SPS/PPS in band before every IDR (FFmpeg shows
green half frames when the payloader does it instead). An H.265 MP4 is served alike through
``h265parse config-interval=-1 ! rtph265pay`` (VPS/SPS/PPS in band before every IRAP).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402

LAUNCH = (
    "( appsrc name=src is-live=false format=time ! {codec}parse config-interval=-1 ! rtp{codec}pay name=pay0 pt=96 )"
)
"""The media of one client; `{codec}` is h264 or h265, from the clip's caps."""


@dataclass(frozen=True)
class AccessUnit:
    data: bytes
    pts: int  # ns from the start of the file
    dts: int
    duration: int
    keyframe: bool


@dataclass(frozen=True)
class Clip:
    caps: Gst.Caps
    units: tuple[AccessUnit, ...]
    duration: int  # ns, one full pass


def demux(path: Path) -> Clip:
    """Read every H.264 or H.265 access unit of the MP4's video track into memory."""
    pipeline = Gst.parse_launch(
        "filesrc name=file ! qtdemux ! video/x-h264;video/x-h265 ! appsink name=sink sync=false"
    )
    pipeline.get_by_name("file").set_property("location", str(path))
    sink = pipeline.get_by_name("sink")
    pipeline.set_state(Gst.State.PLAYING)
    units: list[AccessUnit] = []
    caps = None
    try:
        while True:
            sample = sink.emit("try-pull-sample", 10 * Gst.SECOND)
            if sample is None:
                break
            caps = caps or sample.get_caps()
            buf = sample.get_buffer()
            pts = buf.pts if buf.pts != Gst.CLOCK_TIME_NONE else buf.dts
            dts = buf.dts if buf.dts != Gst.CLOCK_TIME_NONE else pts
            keyframe = not buf.has_flags(Gst.BufferFlags.DELTA_UNIT)
            units.append(AccessUnit(buf.extract_dup(0, buf.get_size()), pts, dts, buf.duration, keyframe))
        bus_error = pipeline.get_bus().pop_filtered(Gst.MessageType.ERROR)
        if bus_error is not None:
            err, _debug = bus_error.parse_error()
            raise RuntimeError(f"cannot demux {path}: {err.message}")
    finally:
        pipeline.set_state(Gst.State.NULL)
    if not units or caps is None:
        raise RuntimeError(f"no H.264 or H.265 video found in {path}")
    first = units[0].pts
    if not units[0].keyframe:
        raise RuntimeError(f"{path} does not start with a keyframe")
    frame_ns = units[-1].duration if units[-1].duration != Gst.CLOCK_TIME_NONE else 0
    if frame_ns <= 0:
        frame_ns = (units[-1].pts - first) // max(1, len(units) - 1) if len(units) > 1 else Gst.SECOND // 25
    units = [AccessUnit(u.data, u.pts - first, u.dts - first, u.duration, u.keyframe) for u in units]
    return Clip(caps, tuple(units), units[-1].pts + frame_ns)


class Feeder:
    """Pushes one clip's access units into one media's appsrc, looping with shifted timestamps."""

    def __init__(self, clip: Clip, appsrc: Gst.Element) -> None:
        self.clip = clip
        self.appsrc = appsrc
        self.index = 0
        self.offset = 0
        self.lock = threading.Lock()
        appsrc.set_property("caps", clip.caps)
        appsrc.connect("need-data", self.on_need_data)

    def on_need_data(self, appsrc: Gst.Element, _length: int) -> None:
        with self.lock:
            unit = self.clip.units[self.index]
            buf = Gst.Buffer.new_wrapped(unit.data)
            buf.pts = unit.pts + self.offset
            buf.dts = unit.dts + self.offset
            buf.duration = unit.duration
            if not unit.keyframe:
                buf.set_flags(Gst.BufferFlags.DELTA_UNIT)
            self.index += 1
            if self.index == len(self.clip.units):
                self.index = 0
                self.offset += self.clip.duration
        appsrc.emit("push-buffer", buf)


class LoopFactory(GstRtspServer.RTSPMediaFactory):
    """One media per client; each starts at the clip's first keyframe."""

    def __init__(self, clip: Clip) -> None:
        super().__init__()
        self.clip = clip
        codec = "h265" if clip.caps.get_structure(0).get_name() == "video/x-h265" else "h264"
        self.set_launch(LAUNCH.format(codec=codec))
        self.set_shared(False)
        self.connect("media-configure", self.on_media_configure)

    def on_media_configure(self, _factory: GstRtspServer.RTSPMediaFactory, media: GstRtspServer.RTSPMedia) -> None:
        appsrc = media.get_element().get_by_name("src")
        # Keep the feeder alive as long as its media (the closure holds it).
        feeder = Feeder(self.clip, appsrc)
        media.connect("unprepared", lambda _m: feeder.appsrc.set_property("emit-signals", False))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8554, help="0: pick a free port")
    parser.add_argument("--stream", action="append", required=True, metavar="MOUNT=FILE.mp4")
    parser.add_argument("--user")
    parser.add_argument("--password")
    args = parser.parse_args(argv)
    if (args.user is None) != (args.password is None):
        parser.error("--user and --password go together")
    streams: dict[str, Path] = {}
    for spec in args.stream:
        mount, sep, file = spec.partition("=")
        if not sep or not mount or not file or "/" in mount.strip("/"):
            parser.error(f"--stream must be MOUNT=FILE, got {spec!r}")
        streams[mount.strip("/")] = Path(file)
    args.streams = streams
    return args


def add_auth(server: GstRtspServer.RTSPServer, factories: list[LoopFactory], user: str, password: str) -> None:
    auth = GstRtspServer.RTSPAuth()
    token = GstRtspServer.RTSPToken()
    token.set_string("media.factory.role", user)
    auth.add_basic(GstRtspServer.RTSPAuth.make_basic(user, password), token)
    server.set_auth(auth)
    for factory in factories:
        factory.add_role_from_structure(
            Gst.Structure.from_string(
                f"{user}, media.factory.access=(boolean)true, media.factory.construct=(boolean)true"
            )[0]
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    Gst.init(None)
    try:
        clips = {mount: demux(path) for mount, path in args.streams.items()}
    except RuntimeError as exc:
        print(f"rtsp_server: {exc}", file=sys.stderr)
        return 2
    server = GstRtspServer.RTSPServer()
    server.set_address(args.host)
    server.set_service(str(args.port))
    mounts = server.get_mount_points()
    factories = []
    for mount, clip in clips.items():
        factory = LoopFactory(clip)
        factories.append(factory)
        mounts.add_factory(f"/{mount}", factory)
    if args.user is not None:
        add_auth(server, factories, args.user, args.password)
    try:
        attached = server.attach(None)
    except GLib.Error as exc:  # older bindings raise, newer return 0 after a warning
        print(f"rtsp_server: cannot listen on {args.host}:{args.port}: {exc.message}", file=sys.stderr)
        return 2
    if not attached:
        print(f"rtsp_server: cannot listen on {args.host}:{args.port}", file=sys.stderr)
        return 2
    # Without a timeout source, sessions of clients that vanished are never reaped.
    GLib.timeout_add_seconds(2, lambda: (server.get_session_pool().cleanup(), True)[1])
    loop = GLib.MainLoop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        GLib.unix_signal_add(GLib.PRIORITY_HIGH, signum, lambda: (loop.quit(), False)[1])
    base = f"rtsp://{args.host}:{server.get_bound_port()}"
    for mount in clips:
        print(f"STREAM {mount} {base}/{mount}", flush=True)
    print(f"READY {base}", flush=True)
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
