"""The `[logging]` section: output format and level (applied by `daemon.ops.logging.configure_logging`)."""

from __future__ import annotations

from typing import Literal

from daemon.config.base import Section


class LoggingConfig(Section):
    format: Literal["auto", "json", "console"] = "auto"
    """auto: console renderer on a terminal, JSON lines otherwise (journald)."""
    level: Literal["debug", "info", "warning", "error"] = "info"
    """The least level written (libraries' own records: warning at least); debug also routes FFmpeg's
    messages in as `library_log`."""


__all__ = ["LoggingConfig"]
