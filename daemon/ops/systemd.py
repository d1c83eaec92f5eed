"""systemd's side of the daemon and the bridge: sd_notify(3) (READY, STATUS, WATCHDOG, STOPPING) and the
watchdog loop that pings only while no lane's engine is stuck on one batch."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Mapping

import structlog

log = structlog.get_logger("beltsight.health")  # the logger name operators already filter on


class SystemdNotifier:
    """sd_notify(3) over $NOTIFY_SOCKET; a no-op when not run by systemd."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        environ = os.environ if env is None else env
        self._address = environ.get("NOTIFY_SOCKET") or None
        usec = environ.get("WATCHDOG_USEC", "")
        pid = environ.get("WATCHDOG_PID", "")
        mine = not pid or pid == str(os.getpid())
        self.watchdog_interval_s: float | None = int(usec) / 2e6 if usec.isdigit() and mine else None

    @property
    def enabled(self) -> bool:
        return self._address is not None

    def notify(self, state: str) -> None:
        if self._address is None:
            return
        address = self._address
        if address.startswith("@"):  # abstract namespace socket
            address = "\0" + address[1:]
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.connect(address)
                sock.sendall(state.encode())
        except OSError as exc:
            log.warning("sd_notify_failed", error=str(exc))

    def ready(self, status: str) -> None:
        self.notify(f"READY=1\nSTATUS={status}")

    def status(self, status: str) -> None:
        self.notify(f"STATUS={status}")

    def stopping(self) -> None:
        self.notify("STOPPING=1")

    def watchdog(self) -> None:
        self.notify("WATCHDOG=1")


async def watchdog(notifier: SystemdNotifier, busy_s: Callable[[], Mapping[int, float]], interval_s: float) -> None:
    """Ping systemd (WATCHDOG=1) every `interval_s` while the loop runs and no lane's engine has
    been stuck on one batch for long (`busy_s`: each lane's longest batch in progress); else log
    `engine_stuck` and let systemd's watchdog restart the daemon."""
    stuck_after_s = max(30.0, 4 * interval_s)
    while True:
        busy = dict(busy_s())
        if all(b < stuck_after_s for b in busy.values()):
            notifier.watchdog()
        else:
            log.error("engine_stuck", lanes=busy)
        await asyncio.sleep(interval_s)
