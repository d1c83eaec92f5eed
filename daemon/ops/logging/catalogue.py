"""Every log event the daemon and the bridge emit: its name, level, meaning and fields, in one place.

Operators filter journald with these names (`journalctl -u beltsight -o cat | jq 'select(.event=="camera_down")'`),
so a name is a contract: renaming one is a breaking change. Every line also carries `level`, `timestamp`
and `logger`; stages add `camera` where there is one. tests/unit/ops/test_log_events.py checks that this
catalogue, the README's "Log events" table and the `log.<level>("name", ...)` calls under daemon/ agree.

The rows live in `daemon.ops.logging.events`, one module per room that emits them (the bridge's in
`events.bridge`); this module joins them, and writes the README's table from them
(`python -m daemon.ops.logging.catalogue README.md`).
"""

from __future__ import annotations

from daemon.ops.logging.event import LIBRARY_EVENT, Level, LogEvent
from daemon.ops.logging.events.bridge import BRIDGE_EVENTS
from daemon.ops.logging.events.inference import INFERENCE_EVENTS
from daemon.ops.logging.events.ingest import INGEST_EVENTS
from daemon.ops.logging.events.ops import OPS_EVENTS
from daemon.ops.logging.events.process import PROCESS_EVENTS
from daemon.ops.logging.events.publish import PUBLISH_EVENTS
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
EVENTS: tuple[LogEvent, ...] = tuple(sorted((*DAEMON_EVENTS, *BRIDGE_EVENTS), key=lambda ev: ev.name))
__all__ = [
    "CATALOGUE",
    "DAEMON_EVENTS",
    "EVENTS",
    "LIBRARY_EVENT",
    "Level",
    "LogEvent",
    "markdown_table",
    "refresh_readme",
]

CATALOGUE: dict[str, LogEvent] = {e.name: e for e in EVENTS}


def markdown_table() -> str:
    """The README's "Log events" table, generated from `EVENTS`."""
    rows = ["| Event | Level | Meaning | Fields |", "|---|---|---|---|"]
    for e in sorted(EVENTS, key=lambda ev: ev.name):
        fields = ", ".join(f"`{f}`" for f in e.fields)
        rows.append(f"| `{e.name}` | {e.level} | {e.meaning} | {fields} |")
    return "\n".join(rows)


README_START = "<!-- log-events:start -->"
README_END = "<!-- log-events:end -->"


def refresh_readme(path: str) -> bool:
    """Rewrite the table between the README's markers from `EVENTS`; True when it changed."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    head, start, rest = text.partition(README_START)
    _old, end, tail = rest.partition(README_END)
    if not start or not end:
        raise SystemExit(f"{path}: the {README_START} / {README_END} markers are missing")
    new = f"{head}{README_START}\n{markdown_table()}\n{README_END}{tail}"
    if new != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)
    return new != text


if __name__ == "__main__":  # `python -m daemon.ops.logging.catalogue README.md` after adding an event
    import sys

    for target in sys.argv[1:] or ["README.md"]:
        print(f"{target}: {'updated' if refresh_readme(target) else 'up to date'}")
