"""The signal rule of every long-running process (`beltsight run`, `beltsight bridge`).

SIGTERM or SIGINT asks for a graceful stop (`stop_requested`; the process stops intake, drains
within its deadline and exits 0); a second one while it drains exits at once with `EX_FORCED`
(`forced_exit`, nothing more drained); SIGHUP asks for a reload (`systemctl reload`). The handlers
only call the process's `request_stop` / `request_reload`, which set an event on the loop; they are
installed before that object is built (`Requests` keeps what is asked meanwhile and replays it).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable

import structlog

log = structlog.get_logger("beltsight.cli")  # the logger name operators already filter on

EX_FORCED = 130
"""Exit status of a forced exit (a second SIGTERM/SIGINT): 128 + SIGINT, as a shell reports Ctrl-C."""


def handle_signals(request_stop: Callable[[], None], request_reload: Callable[[], None]) -> None:
    """Install the rule on the running loop (the handlers stay until the loop closes)."""
    loop = asyncio.get_running_loop()
    seen = 0

    def on_stop_signal(signum: int) -> None:
        nonlocal seen
        seen += 1
        name = signal.Signals(signum).name
        if seen > 1:
            log.warning("forced_exit", signal=name)
            os._exit(EX_FORCED)
        log.info("stop_requested", signal=name)
        request_stop()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_stop_signal, sig)
    loop.add_signal_handler(signal.SIGHUP, request_reload)


class Requests:
    """The `request_stop` / `request_reload` to install before the process's object exists (its
    construction does I/O a signal may interrupt, whose default action would kill the process): what is
    asked before `attach` is kept, and replayed to the object's own once it is attached (the reload
    first, then the stop); what is asked after goes straight to them."""

    def __init__(self) -> None:
        self.stop_pending = False
        self.reload_pending = False
        self._stop: Callable[[], None] | None = None
        self._reload: Callable[[], None] | None = None

    def request_stop(self) -> None:
        if self._stop is None:
            self.stop_pending = True
        else:
            self._stop()

    def request_reload(self) -> None:
        if self._reload is None:
            self.reload_pending = True
        else:
            self._reload()

    def attach(self, request_stop: Callable[[], None], request_reload: Callable[[], None]) -> None:
        """Hand the requests on to these from now on, replaying those asked meanwhile."""
        self._stop, self._reload = request_stop, request_reload
        if self.reload_pending:
            self.reload_pending = False
            request_reload()
        if self.stop_pending:
            self.stop_pending = False
            request_stop()


__all__ = ["EX_FORCED", "Requests", "handle_signals"]
