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
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from tools.demo.clips import render_clips
from tools.demo.preflight import PortNeed, PreflightError, check_gstreamer, check_ports, check_redis_server
from tools.demo.procs import (
    Children,
    DemoFailed,
    say,
    start_beltsight,
    start_redis,
    start_rtsp,
    stop_all,
    wait_ready,
)
from tools.demo.reference import DemoReference
from tools.demo.watch import watch
from tools.kit.rtsp import SYSTEM_PYTHON
from tools.kit.running import stop_process

REPO = Path(__file__).resolve().parents[2]

CONFIG = REPO / "configs" / "demo.toml"
# The ports configs/demo.toml names; the demo substitutes the ones chosen on its command line.
CONFIG_PORTS = {"redis": 6389, "rtsp": 8554, "health": 9108, "opcua": 4840, "modbus": 5020, "bridge_health": 9109}


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


def say_how_to_look(args: argparse.Namespace) -> None:
    say(
        f"PLC bridge: OPC UA opc.tcp://127.0.0.1:{args.opcua_port}/beltsight (security none; counts at "
        f"BeltSight/<camera>/count/CountIn), Modbus TCP 127.0.0.1:{args.modbus_port} unit 1 (16 registers per "
        f"camera, CountIn in 0-1); read them: .venv/bin/python -m tools.demo.plc"
    )
    say(f"live view: http://127.0.0.1:{args.health_port}/  (each line's counts next to it)")


PORT_NEEDS = (  # (CONFIG_PORTS key, what, option): the preflight's list
    ("redis", "Redis", "--redis-port"),
    ("rtsp", "RTSP server", "--rtsp-port"),
    ("health", "health endpoint", "--health-port"),
    ("opcua", "the bridge's OPC UA server", "--opcua-port"),
    ("modbus", "the bridge's Modbus TCP server", "--modbus-port"),
    ("bridge_health", "the bridge's health endpoint", "--bridge-health-port"),
)


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
        stops.append(lambda: stop_process(bridge, 15))
        log = data / "daemon.log"
        daemon = start_beltsight("run", config, log)
        stops.append(lambda: stop_process(daemon, 15))
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
