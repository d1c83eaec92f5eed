"""One row of the log-event catalogue (`LogEvent`), and the event name every standard-library record gets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Level = Literal["debug", "info", "warning", "error", "critical"]

LIBRARY_EVENT = "library_log"
"""The event name of every record that comes from the standard `logging` module (asyncio, redis-py,
PyAV/FFmpeg, Python warnings): its text is in `message`, its logger name in `logger`."""


@dataclass(frozen=True, slots=True)
class LogEvent:
    name: str
    level: Level
    meaning: str
    fields: tuple[str, ...] = ()
