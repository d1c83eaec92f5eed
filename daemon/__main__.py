"""`beltsight` / `python -m daemon`: parse arguments, load settings, configure logging, run.

Exit codes: 0 done; 78 (EX_CONFIG) invalid configuration or model file; 69 (EX_UNAVAILABLE)
the configured execution provider is not available, or `[engine] device = "cuda"` cannot be
served (systemd may retry: a driver can come up late at boot); 1 unexpected error; 130 forced exit on a second signal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import structlog

from daemon.config.lines_dropin import source_of
from daemon.config.models_dropin import describe as describe_model_sources
from daemon.config.settings import EX_CONFIG, ConfigError, Settings, load_settings, resolve_config_path
from daemon.config.sharding import describe
from daemon.config.tracking import describe_lines
from daemon.core.redaction import SECRETS
from daemon.ops.logging import capture_uncaught, configure_logging, quiet_native_loggers
from daemon.ops.signals import handle_signals

EX_UNAVAILABLE = 69

if TYPE_CHECKING:
    from daemon.app import Daemon

log = structlog.get_logger("beltsight.cli")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="beltsight", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument(
            "-c", "--config", help="TOML config (default: $BELTSIGHT_CONFIG or /etc/beltsight/beltsight.toml)"
        )
        return p

    add("run", "run the daemon in the foreground (systemd Type=notify)")
    add("check-config", "validate and print the effective config, secrets redacted")
    doctor = add("doctor", "prove where inference will run (providers, memory, CuPy, temperature sensor)")
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")
    tail = add("tail", "read detections from Redis as a consumer (reference consumer for PLC integrators)")
    tail.add_argument("--camera", action="append", help="camera id (repeatable; default: all configured)")
    tail.add_argument("--group", help="consumer group (entries are acknowledged); default: plain XREAD")
    tail.add_argument("--consumer", default=f"tail-{os.getpid()}", help="consumer name within the group")
    tail.add_argument("--count", type=int, help="stop after this many entries")
    tail.add_argument("--from-start", action="store_true", help="start at the beginning of the streams")
    tail.add_argument("--objects", action="store_true", help="read the objects streams (tracked parts) instead")
    add("bridge", "serve the objects and events streams to PLCs over OPC UA and Modbus TCP ([bridge])")
    return parser


def _load(path_arg: str | None) -> Settings:
    return load_settings(resolve_config_path(path_arg))


def cmd_check_config(args: argparse.Namespace) -> int:
    settings = _load(args.config)
    print(json.dumps(settings.redacted(), indent=2, sort_keys=True))
    from daemon.inference.model_file import describe_models  # noqa: PLC0415 - loads onnxruntime

    lines, errors = describe_models(settings.models)
    lines += describe_model_sources(settings.models_resolved, settings.engine.models_dropin)
    for line in lines:
        print(line, file=sys.stderr)
    if errors:
        print("invalid model files:\n" + "\n".join(f"  - {e}" for e in errors), file=sys.stderr)
        return EX_CONFIG
    print(f"config OK: {len(settings.enabled_cameras())} cameras, models {sorted(settings.models)}", file=sys.stderr)
    sources = settings.camera_sources
    for camera in settings.cameras:
        state = "" if camera.enabled else " (enabled = false)"
        print(f"camera {camera.id}: from {sources[camera.id]}{state}", file=sys.stderr)
    enabled = settings.enabled_cameras()
    for line in describe([c.id for c in enabled], settings.instance, {c.id: c.shard for c in enabled}):
        print(line, file=sys.stderr)
    for camera in enabled:
        tracked = settings.tracking.enabled if camera.tracking is None else camera.tracking
        source = source_of(settings.tracking.lines_dir, camera.id)
        for line in describe_lines(camera.id, tracked, camera.mm_per_px, camera.lines, source):
            print(line, file=sys.stderr)
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from daemon.ops.doctor import run_doctor  # noqa: PLC0415 - heavy imports only for this command

    return run_doctor(_load(args.config), as_json=args.json)


def cmd_tail(args: argparse.Namespace) -> int:
    from daemon.publish.tail import tail  # noqa: PLC0415

    settings = _load(args.config)
    cameras = args.camera or [c.id for c in settings.cameras]
    try:
        return asyncio.run(
            tail(
                settings.redis,
                cameras,
                group=args.group,
                consumer=args.consumer,
                count=args.count,
                from_start=args.from_start,
                objects=args.objects,
            )
        )
    except (KeyboardInterrupt, BrokenPipeError):  # Ctrl-C, or `| head` closed the pipe
        return 0


def cmd_bridge(args: argparse.Namespace) -> int:
    from daemon.bridge.cli import main as bridge_main  # noqa: PLC0415 - asyncua and pymodbus only for this command

    return bridge_main(resolve_config_path(args.config))


def cmd_run(args: argparse.Namespace) -> int:
    from daemon.app import Daemon  # noqa: PLC0415
    from daemon.core.memory import tune_malloc  # noqa: PLC0415
    from daemon.core.xp import GpuUnavailableError  # noqa: PLC0415
    from daemon.inference.model_file import ModelError  # noqa: PLC0415
    from daemon.inference.providers import ProviderError  # noqa: PLC0415
    from daemon.ops.fd_limit import raise_nofile_limit  # noqa: PLC0415

    malloc = tune_malloc()  # before any thread starts
    settings = _load(args.config)
    configure_logging(settings.logging.format, settings.logging.level)
    capture_uncaught()
    quiet_native_loggers()
    log.debug("malloc_tuned", **malloc)
    nofile = raise_nofile_limit()  # systemd's default soft 1,024 is too few for an HTTP flood
    log.info("open_files_limit", soft=nofile.soft, hard=nofile.hard, before=nofile.before, error=nofile.error)
    daemon = Daemon(settings, config_path=resolve_config_path(args.config))
    try:
        asyncio.run(_serve(daemon))
    except ModelError as exc:
        log.error("model_invalid", error=str(exc))
        return EX_CONFIG
    except ProviderError as exc:
        log.error("provider_unavailable", error=str(exc))
        return EX_UNAVAILABLE
    except GpuUnavailableError as exc:  # [engine] device = "cuda" without a CUDA session and CuPy
        log.error("gpu_unavailable", error=str(exc))
        return EX_UNAVAILABLE
    return 0


async def _serve(daemon: Daemon) -> None:
    handle_signals(daemon.request_stop, daemon.request_reload)  # SIGHUP: systemctl reload
    await daemon.run()


COMMANDS = {
    "run": cmd_run,
    "check-config": cmd_check_config,
    "doctor": cmd_doctor,
    "tail": cmd_tail,
    "bridge": cmd_bridge,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging("auto", "info", sys.stderr if args.command != "run" else None)
    try:
        return COMMANDS[args.command](args)
    except ConfigError as exc:
        message = SECRETS.scrub(str(exc))
        if args.command == "run" and not sys.stderr.isatty():  # journald: one JSON line, like the rest
            configure_logging("json", "info", sys.stderr)
            log.error("config_invalid", error=message)
        else:
            print(message, file=sys.stderr)
        return EX_CONFIG


if __name__ == "__main__":
    sys.exit(main())
