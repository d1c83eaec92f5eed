"""The shift report as a page (`GET /report` on the bridge's endpoint): the reconciled lines' windows
that disagreed with the plant's counter in one period, each with its crossings' evidence.

Rendered on the server (no script): the period (a shift with `[bridge] shifts`, else a day), links to
the one before and after and to the same report as CSV (`/api/counts/report.csv`), then one row per
disagreeing window: the line, its times (the box's local time), the camera's and the counter's counts,
the drift and what was allowed, and each crossing in it with its snapshot and its clip, opened at the
crossing (`#t=`). Snapshots and clips are served by the daemon's endpoint, not the bridge's: with
`[bridge] evidence_url` set they are links to it, else their paths are shown. Every value is escaped.
"""

from __future__ import annotations

from datetime import datetime
from html import escape
from typing import Any
from urllib.parse import quote

STYLE = (
    "body{font:14px system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:.3em .5em;vertical-align:top;text-align:left}"
    ".drift{font-weight:bold;color:#a00}nav a{margin-right:1em}"
)


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def _link(base: str, kind: str, path: str, fragment: str = "") -> str:
    shown = escape(path)
    if not base:
        return f"{kind} <code>{shown}</code>"
    href = f"{base.rstrip('/')}/{kind}/{quote(path)}{fragment}"
    return f'<a href="{escape(href, quote=True)}">{kind}</a>'


def _crossing(item: dict[str, Any], base: str) -> str:
    parts = [f"<code>{escape(str(item.get('id', '')))}</code>"]
    if item.get("snapshot"):
        parts.append(_link(base, "snapshots", str(item["snapshot"])))
    if item.get("clip"):
        at_s = int(item.get("clip_offset_ms", 0)) / 1000
        parts.append(_link(base, "clips", str(item["clip"]), f"#t={at_s:.1f}"))
    return " ".join(parts)


def render(
    rows: list[dict[str, Any]], start_ms: int, end_ms: int, *, before: int, after: int, evidence_url: str = ""
) -> str:
    """The page for the windows in `rows` (`CountsStore.disagreeing`) between `start_ms` and `end_ms`;
    `before`/`after`: the starts of the periods the navigation links to."""
    period = f"{escape(_when(start_ms))} to {escape(_when(end_ms))}"
    nav = (
        f'<nav><a href="report?start_ms={before}&amp;end_ms={start_ms}">previous</a>'
        f'<a href="report?start_ms={end_ms}&amp;end_ms={after}">next</a>'
        f'<a href="api/counts/report.csv?start_ms={start_ms}&amp;end_ms={end_ms}">CSV</a></nav>'
    )
    body = [
        "<tr><th>line</th><th>window</th><th>camera</th><th>counter</th><th>drift</th><th>allowed</th>"
        "<th>crossings in it</th></tr>"
    ]
    for row in rows:
        crossings = "<br>".join(_crossing(item, evidence_url) for item in row["crossings"]) or "none"
        body.append(
            f"<tr><td>{escape(str(row['key']))}</td>"
            f"<td>{escape(_when(int(row['start_ms'])))}<br>{escape(_when(int(row['end_ms'])))}</td>"
            f"<td>{int(row['vision'])}</td><td>{int(row['reference'])}</td>"
            f'<td class="drift">{int(row["drift"]):+d}</td><td>{float(row["allowed"]):g}</td>'
            f"<td>{crossings}</td></tr>"
        )
    summary = f"{len(rows)} window(s) disagreed" if rows else "every window agreed"
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>BeltSight shift report</title>'
        f"<style>{STYLE}</style></head><body><h1>Shift report</h1><p>{period}: {summary}.</p>{nav}"
        f'<table id="windows">{"".join(body)}</table></body></html>'
    )


__all__ = ["render"]
