"""Every log event the daemon and the bridge emit: its name, level, meaning and fields, in one place.

Operators filter journald with these names (`journalctl -u beltsight -o cat | jq 'select(.event=="camera_down")'`),
so a name is a contract: renaming one is a breaking change. Every line also carries `level`, `timestamp`
and `logger`; stages add `camera` where there is one. tests/unit/ops/test_log_events.py checks that this
catalogue, the README's "Log events" table and the `log.<level>("name", ...)` calls under daemon/ agree.

The rows live in `daemon.ops.log_rows` (the daemon's) and `daemon.ops.log_rows_bridge` (the bridge's).
"""

from __future__ import annotations

from daemon.ops.log_rows import DAEMON_EVENTS, LIBRARY_EVENT, Level, LogEvent
from daemon.ops.log_rows_bridge import BRIDGE_EVENTS

EVENTS: tuple[LogEvent, ...] = tuple(sorted((*DAEMON_EVENTS, *BRIDGE_EVENTS), key=lambda ev: ev.name))
__all__ = ["CATALOGUE", "EVENTS", "LIBRARY_EVENT", "Level", "LogEvent", "markdown_table", "refresh_readme"]

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


if __name__ == "__main__":  # `python -m daemon.ops.log_events README.md` after adding an event
    import sys

    for target in sys.argv[1:] or ["README.md"]:
        print(f"{target}: {'updated' if refresh_readme(target) else 'up to date'}")
