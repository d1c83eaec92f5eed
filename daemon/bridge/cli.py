"""`beltsight bridge [-c FILE]`: daemon/__main__.py resolves the config path and calls `main`.

The config is the daemon's own file, loaded with `daemon.config.load_settings` (environment
overrides and secret files as for `run`): `[bridge]`, `[redis]` (connection, stream names),
`[logging]`, and the enabled cameras' `lines`/`gates` for the served layout. An invalid config or
layout exits 78 (EX_CONFIG) listing every problem with its key path: printed on a terminal, one
`bridge_config_invalid` JSON line otherwise (the journal). Signals follow the daemon's rule
(daemon.ops.signals): SIGTERM/SIGINT stop it in order (`Bridge.run`: the batch in flight served and
acknowledged within `shutdown_grace_s`, exit 0), a second one exits 130 at once; an unexpected
exception in any of its tasks exits 1 (`bridge_task_failed`, then `unhandled_exception`).
SIGHUP loads the file again and applies the OPC UA users and certificates (`Bridge.reload`); a
file that no longer loads is logged (`bridge_reload_failed`) and changes nothing. At SIGHUP and after
each `camera_added`/`camera_changed`/`camera_removed` entry of the events stream the cameras (the
`cameras_dir` drop-ins applied) are read again and what they add is served live (daemon.bridge.live).
Redis is reached as the daemon does (`daemon.publish.redis_conn.Connector`: one Redis, Sentinel or
Cluster, TLS).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import structlog

from daemon.bridge.layout import BridgeLayout, layout_from_data, layout_problems
from daemon.bridge.protocols import config_problems
from daemon.bridge.reader import read_streams
from daemon.bridge.reconcile_setup import reconcile_problems
from daemon.bridge.service import Bridge
from daemon.bridge.topology import AckLayout
from daemon.config.bridge import BridgeConfig
from daemon.config.settings import EX_CONFIG, ConfigError, Settings, load_settings
from daemon.core.redaction import SECRETS
from daemon.ops.logging import capture_uncaught, configure_logging
from daemon.ops.signals import Requests, handle_signals
from daemon.ops.systemd import SystemdNotifier
from daemon.publish.redis_conn import Connector

log = structlog.get_logger("beltsight.bridge")


def load(path: Path) -> tuple[Settings, BridgeLayout]:
    """The settings and the served layout; ConfigError listing every problem with its key path."""
    settings = load_settings(path)
    modbus = settings.bridge.modbus
    layout = layout_from_data(settings.cameras)
    errors = [str(p) for p in layout_problems(layout, base_register=modbus.base_register, block_size=modbus.block_size)]
    errors += [str(p) for p in reconcile_problems(settings.bridge, layout)]
    errors += AckLayout.of(settings.bridge, settings.redis, read_streams(layout, settings.redis)).problems()
    errors += config_problems(settings.bridge)  # a missing password file, found before anything listens
    if errors:
        raise ConfigError(str(path), errors)
    return settings, layout


async def _serve(path: Path, settings: Settings, layout: BridgeLayout) -> None:
    loaded: list[BridgeLayout | None] = []
    """The layout SIGHUP's load found (None: it failed, logged), for the live layout's next read."""

    def load_config() -> BridgeConfig | None:
        loaded.clear()
        try:
            settings, layout = load(path)
        except ConfigError as exc:
            log.error("bridge_reload_failed", error=SECRETS.scrub(str(exc))[:2000])
            loaded.append(None)
            return None
        loaded.append(layout)
        return settings.bridge

    def layouts() -> BridgeLayout | None:
        if loaded:
            return loaded.pop()  # this SIGHUP's: the file read once, a failure logged once
        try:
            return load(path)[1]
        except ConfigError as exc:
            log.error("bridge_reload_failed", error=SECRETS.scrub(str(exc))[:2000])
            return None

    requests = Requests()  # the handlers before the Bridge is built (its construction does I/O)
    handle_signals(requests.request_stop, requests.request_reload)  # the daemon's rule (daemon.ops.signals)
    bridge = Bridge(
        settings.bridge,
        layout,
        Connector(settings.redis),
        redis=settings.redis,
        notifier=SystemdNotifier(),
        layouts=layouts,
        load_config=load_config,
        grace_s=settings.shutdown_grace_s,
    )
    requests.attach(bridge.request_stop, bridge.request_reload)  # a stop or reload asked meanwhile replayed
    await bridge.run()


def main(path: Path) -> int:
    """Serve until stopped (0), or EX_CONFIG when the config or the layout is invalid (an unexpected
    exception propagates: exit 1)."""
    try:
        settings, layout = load(path)
    except ConfigError as exc:
        message = SECRETS.scrub(str(exc))
        if sys.stderr.isatty():
            print(message, file=sys.stderr)
        else:
            configure_logging("json", "info", sys.stderr)
            log.error("bridge_config_invalid", error=message)
        return EX_CONFIG
    configure_logging(settings.logging.format, settings.logging.level)
    capture_uncaught()
    asyncio.run(_serve(path, settings, layout))
    return 0
