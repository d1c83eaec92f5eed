"""Every log event the daemon and the bridge emit: its name, level, meaning and fields, in one place.

Operators filter journald with these names (`journalctl -u beltsight -o cat | jq 'select(.event=="camera_down")'`),
so a name is a contract: renaming one is a breaking change. Every line also carries `level`, `timestamp`
and `logger`; stages add `camera` where there is one. tests/unit/ops/test_log_events.py checks that this
catalogue, the documentation's log-events page and the `log.<level>("name", ...)` calls under daemon/ agree.

The rows live in `daemon.ops.logging.events`, one module per room that emits them (the bridge's in
`events.bridge`); this module joins them. The documentation's table is generated from `markdown_table()`
by `python -m tools.docs`, between `TABLE_START` and `TABLE_END`.
"""

from __future__ import annotations

from daemon.ops.logging.event import LIBRARY_EVENT, Level, LogEvent
from daemon.ops.logging.events.bridge import BRIDGE_EVENTS
from daemon.ops.logging.events.inference import INFERENCE_EVENTS
from daemon.ops.logging.events.ingest import INGEST_EVENTS
from daemon.ops.logging.events.ops import OPS_EVENTS
from daemon.ops.logging.events.process import PROCESS_EVENTS
from daemon.ops.logging.events.publish import PUBLISH_EVENTS
from daemon.ops.logging.events.reconcile import RECONCILE_EVENTS
from daemon.ops.logging.events.thermal import THERMAL_EVENTS
from daemon.ops.logging.events.tracking import TRACKING_EVENTS

DAEMON_EVENTS: tuple[LogEvent, ...] = (
    *PROCESS_EVENTS,
    *OPS_EVENTS,
    *INGEST_EVENTS,
    *INFERENCE_EVENTS,
    *TRACKING_EVENTS,
    *PUBLISH_EVENTS,
    *THERMAL_EVENTS,
)
EVENTS: tuple[LogEvent, ...] = tuple(
    sorted((*DAEMON_EVENTS, *BRIDGE_EVENTS, *RECONCILE_EVENTS), key=lambda ev: ev.name)
)
__all__ = [
    "CATALOGUE",
    "DAEMON_EVENTS",
    "EVENTS",
    "LIBRARY_EVENT",
    "TABLE_END",
    "TABLE_START",
    "Level",
    "LogEvent",
    "markdown_table",
]

CATALOGUE: dict[str, LogEvent] = {e.name: e for e in EVENTS}


def markdown_table() -> str:
    """The "Log events" table of the documentation, generated from `EVENTS`."""
    rows = ["| Event | Level | Meaning | Fields |", "|---|---|---|---|"]
    for e in sorted(EVENTS, key=lambda ev: ev.name):
        fields = ", ".join(f"`{f}`" for f in e.fields)
        rows.append(f"| `{e.name}` | {e.level} | {e.meaning} | {fields} |")
    return "\n".join(rows)


TABLE_START = "<!-- log-events:start -->"
TABLE_END = "<!-- log-events:end -->"
