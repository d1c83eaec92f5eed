"""`beltsight bridge -c beltsight.toml` (also `python -m daemon.bridge -c ...` until the main CLI has it).

Reads `[bridge]`, `[redis]`, `[logging]` and the cameras' `lines`/`gates` from the TOML file; an
invalid section or layout is one `bridge_config_invalid` line and exit status 78 (EX_CONFIG).
SIGTERM/SIGINT stop it cleanly (exit 0).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog
from pydantic import ValidationError

from daemon.bridge.config import BridgeConfig
from daemon.bridge.deps import RedisConfig, SystemdNotifier, configure_logging, make_client
from daemon.bridge.layout import BridgeLayout, LayoutError, layout_from_data, validate_layout
from daemon.bridge.service import read_users, run_bridge

EX_CONFIG = 78
log = structlog.get_logger("beltsight.bridge")


def load(path: Path) -> tuple[BridgeConfig, RedisConfig, BridgeLayout, dict[str, Any]]:
    """The bridge's config, Redis config, validated layout and `[logging]` table from one TOML file."""
    with path.open("rb") as f:
        data = tomllib.load(f)
    config = BridgeConfig.model_validate(data.get("bridge", {}))
    redis_cfg = RedisConfig.model_validate(data.get("redis", {}))
    cameras = [c for c in data.get("cameras", []) if not isinstance(c, dict) or c.get("enabled", True)]
    layout = validate_layout(
        layout_from_data(cameras), base_register=config.modbus.base_register, block_size=config.modbus.block_size
    )
    read_users(config)  # a missing password file is a config error, found before anything listens
    return config, redis_cfg, layout, dict(data.get("logging", {}))


async def _serve(config: BridgeConfig, redis_cfg: RedisConfig, layout: BridgeLayout) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def factory() -> Any:
        return make_client(redis_cfg)

    await run_bridge(config, layout, factory, notifier=SystemdNotifier(), stop_event=stop)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="beltsight bridge", description="Serve BeltSight's streams over OPC UA and Modbus"
    )
    parser.add_argument("-c", "--config", type=Path, default=Path("/etc/beltsight/beltsight.toml"))
    args = parser.parse_args(argv)
    try:
        config, redis_cfg, layout, logging_cfg = load(args.config)
    except (OSError, tomllib.TOMLDecodeError, ValidationError, LayoutError, ValueError) as exc:
        configure_logging("json")
        log.error("bridge_config_invalid", error=str(exc).replace("\n", "; ")[:2000])
        return EX_CONFIG
    configure_logging(str(logging_cfg.get("format", "auto")), str(logging_cfg.get("level", "info")))
    asyncio.run(_serve(config, redis_cfg, layout))
    return 0


if __name__ == "__main__":
    sys.exit(main())
