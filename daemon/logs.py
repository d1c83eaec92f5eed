"""structlog set-up: JSON lines for journald, a console renderer on a terminal.

Only the CLI calls `configure_logging`. Every line has an `event` name; stages bind
`camera=<id>` where there is one. A scrubbing processor removes URL passwords and every
secret registered in `daemon.redaction.SECRETS` from all string values, tracebacks included.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

from daemon.redaction import SECRETS

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def _scrub_value(value: Any) -> Any:
    if isinstance(value, str):
        return SECRETS.scrub(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_scrub_value(v) for v in value)
    if isinstance(value, dict):
        return {k: _scrub_value(v) for k, v in value.items()}
    if isinstance(value, BaseException):
        return SECRETS.scrub(f"{type(value).__name__}: {value}")
    return value


def scrub_secrets(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: redact secrets in every value (runs after tracebacks are formatted)."""
    for key, value in event_dict.items():
        event_dict[key] = _scrub_value(value)
    return event_dict


def configure_logging(fmt: str = "auto", level: str = "info", stream: TextIO | None = None) -> None:
    out = stream if stream is not None else sys.stdout
    use_console = fmt == "console" or (fmt == "auto" and out.isatty())
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    if use_console:
        processors += [scrub_secrets, structlog.dev.ConsoleRenderer(colors=out.isatty())]
    else:
        processors += [
            structlog.processors.dict_tracebacks,
            scrub_secrets,
            structlog.processors.JSONRenderer(),
        ]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
