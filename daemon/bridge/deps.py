"""The only place the bridge imports the daemon's own modules (their paths are moving).

Rewrite these imports after the package reorganisation; nothing else in daemon/bridge needs to change.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from daemon.config.redis import RedisConfig
from daemon.core.redaction import SECRETS
from daemon.ops.health import HealthServer, SystemdNotifier
from daemon.ops.logs import configure_logging
from daemon.publish.redis_conn import make_client


def register_secret(secret: str) -> None:
    """Scrub `secret` from every log line (the daemon's log pipeline redacts registered secrets)."""
    SECRETS.add(secret)


__all__ = [
    "CollectorRegistry",
    "HealthServer",
    "RedisConfig",
    "SystemdNotifier",
    "configure_logging",
    "make_client",
    "register_secret",
]
