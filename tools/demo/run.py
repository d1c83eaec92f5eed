"""The bundled demo: synthetic conveyor cameras over real RTSP into a real local Redis.

    .venv/bin/python tools/demo.py [--seconds N] [--verbose] [--redis-port N] [--rtsp-port N] [--health-port N]
                                   [--opcua-port N] [--modbus-port N] [--bridge-health-port N]
    .venv/bin/python -m tools.demo ...     (the same; tools/demo.py runs this)

1. checks that its ports are free and that redis-server and GStreamer's RTSP server are installed,
2. renders three demo clips with tools/kit/synth/video.py (once; cached in demo-data/; a clip is
   written under a temporary name and renamed when complete, so Ctrl-C leaves no half clip),
3. starts redis-server and the GStreamer RTSP server (tools/kit/rtsp_server.py, run by Debian's
   python3, which has GStreamer's bindings) on 127.0.0.1 (tools/kit's launchers),
4. runs `beltsight bridge` (OPC UA without security and Modbus TCP, on 127.0.0.1; log in
   demo-data/bridge.log) and `beltsight run`, both with configs/demo.toml (ports substituted; the
   daemon's JSON logs in demo-data/daemon.log), and says how a PLC would look (`tools.demo.plc`),
5. reads the detection and objects streams from Redis, as a consumer does, and shows one line per
   camera: state, fps, each counting line's ` in <N> out <M>`, belt speed, the last crossing and its
   gate arrival time, latency p50/p99, detections per frame, frequent labels; with --verbose also
   every entry and every crossing as it arrives (and the block every 5 s).

It is also the check that the demo works: the exit code is 1, naming the camera, when some camera
has published no detections within 30 s of the daemon's READY, when a camera that published
detections has counted no crossing within 60 s of READY (checked once a run has lasted that long),
or when the daemon or the bridge exits; else 0. Everything it started is stopped on exit.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import redis as redis_py

from daemon.core.seam import parse_fields
from daemon.publish.seam import decode_entry, format_entry
from tools.demo.clips import CAMERAS, render_clips
from tools.demo.parts import CameraParts, crossing_line
from tools.demo.preflight import PortNeed, PreflightError, check_gstreamer, check_ports, check_redis_server
from tools.demo.reference import DemoReference
from tools.demo.view import CameraWindow, StatusBoard, Summary
from tools.kit.redis_server import RedisServer
from tools.kit.rtsp import SYSTEM_PYTHON, RtspServer

REPO = Path(__file__).resolve().parents[2]

CONFIG = REPO / "configs" / "demo.toml"
# The ports configs/demo.toml names; the demo substitutes the ones chosen on its command line.
CONFIG_PORTS = {"redis": 6389, "rtsp": 8554, "health": 9108, "opcua": 4840, "modbus": 5020, "bridge_health": 9109}
READY_TIMEOUT_S = 180.0
FIRST_DETECTIONS_S = 30.0
FIRST_CROSSING_S = 60.0
LINES = ("count",)
"""The counting line of every demo camera (configs/demo.toml)."""


class DemoFailed(Exception):
    """The demo did not work; `str()` is the one-line reason."""


def say(message: str, *, err: bool = False) -> None:
    print(f"demo: {message}", file=sys.stderr if err else sys.stdout, flush=True)


def write_config(data: Path, ports: dict[str, int], extra: str = "") -> Path:
    """configs/demo.toml with the chosen ports (and `extra` appended), next to the clips."""
    text = CONFIG.read_text()
    for key, default in CONFIG_PORTS.items():
        text = text.replace(f"127.0.0.1:{default}", f"127.0.0.1:{ports[key]}")
    text = text.replace('"../models/', f'"{REPO / "models"}/')
    text = text.replace('state_dir = "bridge-state"', f'state_dir = "{data / "bridge-state"}"')
    config = data / "demo.toml"
    config.write_text(text + extra)
    return config


def start_redis(redis_server: str, port: int) -> RedisServer:
    server = RedisServer(redis_server, None, port=port, new_session=True, start_timeout_s=10)
    try:
        return server.start()
    except RuntimeError as exc:
        raise DemoFailed(f"redis-server did not start on {exc}") from None


def start_rtsp(system_python: str, port: int, clips: dict[str, Path], log: Path) -> RtspServer:
    server = RtspServer(clips, port, log_path=log, system_python=system_python, new_session=True, ready_timeout_s=30)
    try:
        server.start()
    except RuntimeError as exc:
        raise DemoFailed(f"the RTSP server did not start: {exc}") from None
    say(server.ready_line)
    return server


def fetch_health(port: int) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=0.5) as resp:
            body: dict[str, Any] = json.load(resp)
            return body
    except urllib.error.HTTPError as exc:  # 503 while degraded still carries the report
        with contextlib.suppress(ValueError):
            report: dict[str, Any] = json.loads(exc.read())
            return report
        return None
    except (OSError, ValueError):
        return None


def wait_ready(proc: subprocess.Popen[str], health_port: int, log: Path, what: str = "the daemon") -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DemoFailed(f"{what} exited with code {proc.returncode} before READY; see {log}")
        report = fetch_health(health_port)
        if report is not None and report.get("ok"):
            return
        time.sleep(0.25)
    raise DemoFailed(f"{what} was not READY within {READY_TIMEOUT_S:.0f} s; see {log}")


def start_beltsight(command: str, config: Path, log: Path) -> subprocess.Popen[str]:
    """`beltsight <command> -c config`, its output into `log`, in a session of its own (Ctrl-C reaches
    the demo only; it stops each child once, in order)."""
    beltsight = str(Path(sys.executable).with_name("beltsight"))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with log.open("w") as log_file:
        return subprocess.Popen(
            [beltsight, command, "-c", str(config)],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )


def say_how_to_look(args: argparse.Namespace) -> None:
    say(
        f"PLC bridge: OPC UA opc.tcp://127.0.0.1:{args.opcua_port}/beltsight (security none; counts at "
        f"BeltSight/<camera>/count/CountIn), Modbus TCP 127.0.0.1:{args.modbus_port} unit 1 (16 registers per "
        f"camera, CountIn in 0-1); read them: .venv/bin/python -m tools.demo.plc"
    )
    say(f"live view: http://127.0.0.1:{args.health_port}/  (each line's counts next to it)")


@dataclass(frozen=True, slots=True)
class Children:
    """The processes the demo watches, with their logs."""

    daemon: subprocess.Popen[str]
    daemon_log: Path
    bridge: subprocess.Popen[str]
    bridge_log: Path

    def check_running(self) -> None:
        for what, proc, log in (("daemon", self.daemon, self.daemon_log), ("bridge", self.bridge, self.bridge_log)):
            if proc.poll() is not None:
                raise DemoFailed(f"the {what} exited with code {proc.returncode}; see {log}")


class Streams:
    """The detection and objects streams of every camera, read from the start as a consumer does."""

    def __init__(self, client: redis_py.Redis, verbose: bool) -> None:
        self.client = client
        self.verbose = verbose
        self.ids = {f"beltsight:detections:{cam}": "0-0" for cam in CAMERAS}
        self.ids |= {f"beltsight:objects:{cam}": "0-0" for cam in CAMERAS}
        self.windows = {cam: CameraWindow(cam) for cam in CAMERAS}
        self.parts = {cam: CameraParts(cam, LINES) for cam in CAMERAS}

    def read(self) -> bool:
        """One XREAD (up to 200 ms); whether a line was printed (--verbose)."""
        printed = False
        # the client decodes responses: stream names, IDs and fields are str
        reply = self.client.xread(self.ids, count=200, block=200) or []  # type: ignore[arg-type]
        for stream, entries in cast("list[tuple[str, list[tuple[str, dict[str, str]]]]]", reply):
            for entry_id, fields in entries:
                self.ids[stream] = entry_id
                if stream.startswith("beltsight:objects:"):
                    event = parse_fields(fields)
                    self.parts[event.camera].add(event)
                    if self.verbose and event.event == "crossed":
                        say(crossing_line(event))
                        printed = True
                    continue
                entry = decode_entry(fields)
                self.windows[entry["camera"]].add(entry)
                if self.verbose:
                    print(format_entry(entry_id, entry), flush=True)
                    printed = True
        return printed

    def summaries(self, now_s: float, states: dict[str, str]) -> list[Summary]:
        return [w.summary(now_s, states.get(cam, "?"), self.parts[cam].text(now_s)) for cam, w in self.windows.items()]


def watch(args: argparse.Namespace, children: Children) -> None:
    """Read the streams and show them until --seconds (or Ctrl-C); raise DemoFailed on failure."""
    client = redis_py.Redis(port=args.redis_port, decode_responses=True)
    streams = Streams(client, args.verbose)
    board = StatusBoard(tty=False) if args.verbose else StatusBoard()  # --verbose: the block every 5 s
    ready_at = time.monotonic()
    end_at = ready_at + args.seconds if args.seconds else None
    checked_detections = checked_crossings = False
    states: dict[str, str] = {}
    next_health = 0.0
    try:
        while end_at is None or time.monotonic() < end_at:
            children.check_running()
            if streams.read():
                board.forget()
            now = time.monotonic()
            if now >= next_health:
                report = fetch_health(args.health_port) or {}
                states = {cam: str(c.get("state", "?")) for cam, c in report.get("cameras", {}).items()}
                next_health = now + 1.0
            if not checked_detections and now - ready_at >= FIRST_DETECTIONS_S:
                check_every_camera(streams.windows, states, children.daemon_log)
                checked_detections = True
            if not checked_crossings and now - ready_at >= FIRST_CROSSING_S:
                streams.read()  # what the last moment published
                check_crossings(streams.windows, streams.parts, children.daemon_log)
                checked_crossings = True
            wall = time.time()
            if board.due(wall):
                board.draw(wall, streams.summaries(wall, states))
    finally:
        client.close()
    if not checked_detections:
        check_every_camera(streams.windows, states, children.daemon_log)
    wall = time.time()
    if not board.tty:  # the last block, as the run ends (a terminal shows it already)
        board.draw(wall, streams.summaries(wall, states))
    totals = ", ".join(
        f"{cam} {w.total} frames ({w.with_detections} with detections), {streams.parts[cam].crossings} crossings"
        for cam, w in streams.windows.items()
    )
    if checked_crossings:
        say(f"OK: every camera published detections and counted parts: {totals}")
    else:
        say(f"OK: every camera published detections: {totals} (crossings are checked {FIRST_CROSSING_S:.0f} s in)")


def check_every_camera(windows: dict[str, CameraWindow], states: dict[str, str], log: Path) -> None:
    missing = [cam for cam, w in windows.items() if w.with_detections == 0]
    if missing:
        detail = ", ".join(
            f"{cam} (state {states.get(cam, 'unknown')}, {windows[cam].total} entries)" for cam in missing
        )
        raise DemoFailed(f"no detections published within {FIRST_DETECTIONS_S:.0f} s of READY by: {detail}; see {log}")


def check_crossings(windows: dict[str, CameraWindow], parts: dict[str, CameraParts], log: Path) -> None:
    """Every camera that published detections has counted a part on its line."""
    uncounted = [cam for cam, w in windows.items() if w.with_detections and not parts[cam].crossings]
    if uncounted:
        detail = ", ".join(
            f"{cam} ({windows[cam].with_detections} frames with detections, 0 crossings)" for cam in uncounted
        )
        raise DemoFailed(
            f"no part counted within {FIRST_CROSSING_S:.0f} s of READY by: {detail}; see {log} and "
            f"the live view's lines"
        )


PORT_NEEDS = (  # (CONFIG_PORTS key, what, option): the preflight's list
    ("redis", "Redis", "--redis-port"),
    ("rtsp", "RTSP server", "--rtsp-port"),
    ("health", "health endpoint", "--health-port"),
    ("opcua", "the bridge's OPC UA server", "--opcua-port"),
    ("modbus", "the bridge's Modbus TCP server", "--modbus-port"),
    ("bridge_health", "the bridge's health endpoint", "--bridge-health-port"),
)


def stop_daemon(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stop_all(stops: list[Callable[[], None]]) -> None:
    # One at a time, newest first: the daemon flushes to Redis before Redis goes away.
    for stop in reversed(stops):
        stop()


def chosen_ports(args: argparse.Namespace) -> dict[str, int]:
    return {name: int(getattr(args, f"{name}_port")) for name in CONFIG_PORTS}


def run(args: argparse.Namespace) -> None:
    check_ports([PortNeed(getattr(args, f"{name}_port"), what, option) for name, what, option in PORT_NEEDS])
    redis_server = check_redis_server()
    check_gstreamer(args.gst_python)
    data = Path(args.data_dir)
    clips = render_clips(data, say)
    reference = DemoReference(clips, args.reference_miss_every) if args.reference else None
    config = write_config(data, chosen_ports(args), reference.config_text() if reference else "")
    stops: list[Callable[[], None]] = []
    try:
        redis = start_redis(redis_server, args.redis_port)
        stops.append(lambda: redis.stop(timeout_s=15))
        if reference is not None:
            reference.start(args.redis_port)
            stops.append(reference.stop)
            say(f"simulated PLCs (photo-eye counters) on Modbus ports {[p.port for p in reference.plcs]}")
        rtsp = start_rtsp(args.gst_python, args.rtsp_port, clips, data / "rtsp.log")
        stops.append(lambda: rtsp.terminate(timeout_s=15))
        bridge_log = data / "bridge.log"
        bridge = start_beltsight("bridge", config, bridge_log)
        stops.append(lambda: stop_daemon(bridge))
        log = data / "daemon.log"
        daemon = start_beltsight("run", config, log)
        stops.append(lambda: stop_daemon(daemon))
        say(f"daemon started (log: {log}); waiting for READY")
        wait_ready(daemon, args.health_port, log)
        wait_ready(bridge, args.bridge_health_port, bridge_log, "the bridge")
        say(f"daemon READY; health: curl http://127.0.0.1:{args.health_port}/healthz  (Ctrl-C stops the demo)")
        say_how_to_look(args)
        watch(args, Children(daemon, log, bridge, bridge_log))
    finally:
        stop_all(stops)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="demo.py", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=0, help="stop after this long after READY (default: Ctrl-C)")
    parser.add_argument("--verbose", action="store_true", help="print every stream entry instead of a line per camera")
    parser.add_argument("--redis-port", type=int, default=CONFIG_PORTS["redis"])
    parser.add_argument("--rtsp-port", type=int, default=CONFIG_PORTS["rtsp"])
    parser.add_argument("--health-port", type=int, default=CONFIG_PORTS["health"])
    parser.add_argument("--opcua-port", type=int, default=CONFIG_PORTS["opcua"], help="the bridge's OPC UA server")
    parser.add_argument("--modbus-port", type=int, default=CONFIG_PORTS["modbus"], help="the bridge's Modbus TCP")
    parser.add_argument("--bridge-health-port", type=int, default=CONFIG_PORTS["bridge_health"])
    parser.add_argument(
        "--data-dir", default=str(REPO / "demo-data"), help="clips, config and log (default: %(default)s)"
    )
    parser.add_argument("--gst-python", default=SYSTEM_PYTHON, help="the Python with GStreamer's bindings")
    parser.add_argument("--reference", action="store_true", help="a simulated PLC counter per camera, reconciled")
    parser.add_argument("--reference-miss-every", type=int, default=0, help="its photo-eye misses every K-th part")
    return parser.parse_args(argv)


def _terminate(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM: stop the children in order, as Ctrl-C does


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        run(args)
    except (PreflightError, DemoFailed) as exc:
        say(f"FAILED: {exc}", err=True)
        return 1
    except KeyboardInterrupt:
        # Ctrl-C is how an unbounded demo ends; a bounded one (--seconds) was cut short.
        say("stopped (Ctrl-C); no half-rendered clip is kept")
        return 130 if args.seconds else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
