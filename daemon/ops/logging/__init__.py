"""Logs: the structlog set-up every process shares, and the catalogue of every event it may write.

`configure` (JSON lines for journald or a console renderer, one pipeline for structlog and the
standard `logging` module, secret scrubbing, uncaught exceptions), `event` (`LogEvent`, one
catalogue row), `events` (the rows, one module per room that emits them), `catalogue` (`EVENTS`,
`CATALOGUE`: the rows joined; `python -m daemon.ops.logging.catalogue README.md` refreshes the
README's table). A line at most once per interval is `daemon.core.ratelimit.RateLimited`.

May import: `daemon.core`. Entry points: `configure_logging`, `capture_uncaught`,
`quiet_native_loggers`, `reset_logging` (re-exported here); `catalogue.EVENTS`.
"""

from daemon.ops.logging.configure import capture_uncaught, configure_logging, quiet_native_loggers, reset_logging

__all__ = ["capture_uncaught", "configure_logging", "quiet_native_loggers", "reset_logging"]
